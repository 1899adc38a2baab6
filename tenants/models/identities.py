"""Single sign-on: who a person is at the identity provider (IdP), and which IdP groups
make people team members (in which role) or quota managers.

``GroupMapping.objects.apply(user, groups)`` runs at each SSO login: the person's
memberships follow their groups (added, role changed, removed). Memberships it makes are
marked ``source=idp`` with the group that grants them; hand-made memberships are never
touched by it. Every change is in the audit trail (the memberships' history, and the
identity's for groups and the quota-manager role), and the receivers of
``tenants.receivers`` reconcile each team concerned once the transaction commits.
What the IdP gave lasts ``OIDC_MEMBERSHIP_TTL_HOURS`` after the last sign-in:
``expire_idp_access`` (a beat task) ends it for people who do not come back.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from .. import recent_tokens
from ..roles import QUOTA_MANAGER_GROUP
from ..tokens import ApiToken
from .teams import Membership, Team

# When two of a person's groups map to the same team, the stronger role wins.
ROLE_RANK = {Membership.Role.VIEWER: 1, Membership.Role.MEMBER: 2, Membership.Role.OWNER: 3}


class GroupMappingQuerySet(models.QuerySet):
    def desired_for(self, groups) -> tuple[dict[int, tuple[str, str]], str | None]:
        """What these IdP groups grant: ``{team_id: (role, group)}`` (the strongest role, and
        the first group in name order giving it) and the group making a quota manager, if any."""
        teams: dict[int, tuple[str, str]] = {}
        quota_manager = None
        for mapping in self.filter(group__in=list(groups)).order_by("group", "pk"):
            if mapping.role == GroupMapping.Role.QUOTA_MANAGER:
                quota_manager = quota_manager or mapping.group
                continue
            held = teams.get(mapping.team_id)
            if held is None or ROLE_RANK[mapping.role] > ROLE_RANK[held[0]]:
                teams[mapping.team_id] = (mapping.role, mapping.group)
        return teams, quota_manager

    def apply(self, user, groups) -> list[str]:
        """Make ``user``'s IdP memberships and quota-manager role follow ``groups``; returns
        the changes in words. Hand-made memberships stay as they are, and so does a
        quota-manager role given by hand. A team being offboarded gets nobody new."""
        teams, quota_manager = self.desired_for(groups)
        changes = []
        with transaction.atomic():
            current = {m.team_id: m for m in Membership.objects.select_for_update()
                       .filter(user=user).select_related("team")}
            joinable = set(Team.objects.filter(pk__in=teams).exclude(status=Team.Status.DELETING)
                           .values_list("pk", flat=True))
            for team_id, (role, group) in sorted(teams.items()):
                membership = current.get(team_id)
                if membership is None and team_id in joinable:
                    membership = Membership(team_id=team_id, user=user, role=role,
                                            source=Membership.Source.IDP, via_group=group)
                    _record(membership, user, f"IdP group {group}: added as {role}")
                    membership.save()
                    changes.append(f"added to {membership.team.slug} as {role} (group {group})")
                elif (membership is not None and membership.source == Membership.Source.IDP
                      and (membership.role, membership.via_group) != (role, group)):
                    was = membership.role
                    membership.role, membership.via_group = role, group
                    _record(membership, user, f"IdP group {group}: {was} -> {role}")
                    membership.save(update_fields=["role", "via_group"])
                    changes.append(f"{membership.team.slug}: {was} -> {role} (group {group})")
            for team_id, membership in current.items():
                if membership.source == Membership.Source.IDP and team_id not in teams:
                    # The IdP is the truth for these: no group, no access, even for the
                    # team's last owner (a quota manager can still run the team).
                    _record(membership, user, f"IdP group {membership.via_group} no longer held: removed")
                    membership.delete()
                    _revoke_team_tokens(user, team_id)
                    changes.append(f"removed from {membership.team.slug} (group {membership.via_group} gone)")
            changes += _apply_quota_manager(user, quota_manager)
        return changes


def expire_idp_access(now=None) -> list[str]:
    """End what the IdP gave people who have not signed in (nor been re-checked at the IdP)
    for ``OIDC_MEMBERSHIP_TTL_HOURS``: their IdP memberships (and the tokens narrowed to
    those teams) and the IdP's quota-manager role. Someone removed from a group at the IdP
    so loses access within the window, whether or not they ever come back; the receivers of
    ``tenants.receivers`` take them out of the teams' RoleBindings once this commits.
    Returns the changes in words (the audit trail has them with their reason)."""
    now = now or timezone.now()
    ttl = settings.OIDC_MEMBERSHIP_TTL_HOURS
    renewed = Q(user__oidc_identity__last_login_at__gte=now - timedelta(hours=ttl))
    reason = f"not renewed by an SSO sign-in within {ttl} h"
    changes = []
    with transaction.atomic():
        stale = (Membership.objects.select_for_update(of=("self",)).filter(source=Membership.Source.IDP)
                 .exclude(renewed).select_related("team", "user"))
        for membership in stale:
            _record(membership, None, f"IdP group {membership.via_group}: {reason}: removed")
            membership.delete()
            _revoke_team_tokens(membership.user, membership.team_id, now)
            changes.append(f"{membership.user.get_username()} removed from {membership.team.slug} ({reason})")
        managers = Group.objects.filter(name=QUOTA_MANAGER_GROUP).first()
        for identity in (OidcIdentity.objects.select_for_update(of=("self",)).select_related("user")
                         .filter(quota_manager_via_idp=True)
                         .exclude(last_login_at__gte=now - timedelta(hours=ttl))):
            if managers is not None:
                identity.user.groups.remove(managers)
            identity.quota_manager_via_idp = False
            _record(identity, None, f"quota manager through the IdP: {reason}: role removed")
            identity.save(update_fields=["quota_manager_via_idp"])
            changes.append(f"{identity.user.get_username()} no longer a quota manager ({reason})")
    return changes


def _revoke_team_tokens(user, team_id: int, now=None) -> None:
    """Tokens narrowed to a team rest on the membership that just ended: they end with it,
    and do not come back to life if the person is later given the team again."""
    tokens = ApiToken.objects.filter(user=user, team_id=team_id, revoked_at__isnull=True)
    if tokens.update(revoked_at=now or timezone.now()):
        recent_tokens.bump()


def _record(instance, user, reason: str) -> None:
    """Who and why, for the audit trail (django-simple-history reads both at save/delete)."""
    instance._history_user = user
    instance._change_reason = reason[:100]


def _apply_quota_manager(user, group: str | None) -> list[str]:
    identity = OidcIdentity.objects.filter(user=user).first()
    managers = Group.objects.get_or_create(name=QUOTA_MANAGER_GROUP)[0]
    holds = user.groups.filter(pk=managers.pk).exists()
    if group and not holds:
        user.groups.add(managers)
        if identity is not None:
            identity.quota_manager_via_idp = True
            _record(identity, user, f"IdP group {group}: quota manager")
            identity.save(update_fields=["quota_manager_via_idp"])
        return [f"quota manager (group {group})"]
    if not group and holds and identity is not None and identity.quota_manager_via_idp:
        user.groups.remove(managers)
        identity.quota_manager_via_idp = False
        _record(identity, user, "no IdP group for quota managers: role removed")
        identity.save(update_fields=["quota_manager_via_idp"])
        return ["no longer a quota manager"]
    return []


class GroupMapping(models.Model):
    """An IdP group that makes its members a team's owners, members or viewers, or quota
    managers (no team)."""

    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"
        QUOTA_MANAGER = "quota_manager", "Quota manager"

    group = models.CharField(max_length=200, help_text="The group's name exactly as the IdP sends it "
                                                       "in the groups claim.")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="group_mappings",
                             help_text="Empty for the quota-manager role.")
    role = models.CharField(max_length=20, choices=Role, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    history = HistoricalRecords()

    objects = GroupMappingQuerySet.as_manager()

    class Meta:
        ordering = ["group", "team__slug"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(role="quota_manager", team__isnull=True)
                           | Q(role__in=["owner", "member", "viewer"], team__isnull=False)),
                name="group_mapping_team_iff_team_role",
                violation_error_message="A team role needs a team; the quota-manager role takes none.",
            ),
            models.UniqueConstraint(
                fields=["group", "team"], condition=Q(team__isnull=False),
                name="group_mapping_one_role_per_team",
                violation_error_message="This group already has a role in this team.",
            ),
            models.UniqueConstraint(
                fields=["group"], condition=Q(role="quota_manager"),
                name="group_mapping_one_quota_manager_row",
                violation_error_message="This group already makes quota managers.",
            ),
        ]

    def __str__(self) -> str:
        where = self.team.slug if self.team_id else "the platform"
        return f"{self.group} -> {self.get_role_display().lower()} of {where}"


class OidcIdentity(models.Model):
    """The IdP account a platform account signs in with (issuer + subject), with what the
    last login said: the groups, and the claim the cluster's OIDC authenticator names the
    person by (``CLUSTER_OIDC_USERNAME_CLAIM``), which RoleBindings use."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    cluster_username = models.CharField(max_length=300, blank=True)
    groups = models.JSONField(default=list, blank=True)
    quota_manager_via_idp = models.BooleanField(default=False)
    last_login_at = models.DateTimeField(null=True, blank=True)
    history = HistoricalRecords(excluded_fields=["last_login_at"])

    class Meta:
        verbose_name = "SSO identity"
        verbose_name_plural = "SSO identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_one_per_subject",
                                    violation_error_message="This IdP account is already linked."),
        ]

    def __str__(self) -> str:
        return f"{self.user} = {self.subject} at {self.issuer}"

    @property
    def cluster_user_name(self) -> str:
        """The user name the cluster sees for this person (prefix + claim), or ''."""
        if not self.cluster_username:
            return ""
        return f"{settings.CLUSTER_OIDC_USERNAME_PREFIX}{self.cluster_username}"


def cluster_user_name(user) -> str:
    """How RoleBindings name a person: as the cluster's OIDC authenticator presents them
    when they signed in with SSO, else by their platform user name."""
    try:
        name = user.oidc_identity.cluster_user_name
    except OidcIdentity.DoesNotExist:
        name = ""
    return name or user.get_username()
