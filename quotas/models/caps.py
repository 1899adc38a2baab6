"""Per-person caps inside a team (issue 34, docs/caps.md): how many GPUs of a flavor one
person may hold at once, and optionally how many jobs, set by the team's owners.

A cap is the platform's own rule, checked before a job's Kueue or Volcano object is created
(`jobs.queue.caps`): Kueue has no per-user quota, and a workload it holds in a queue is admitted
whenever the team's quota allows. A row without a person is the team's default for
everyone who submits in it, owners included; a person's own row replaces the default.
"""

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from core.validators import between
from tenants.models import Membership, Team

from ..grants import MAX_GPUS
from .flavors import GpuFlavor

# The most live jobs a cap may allow on one flavor (a team may never hold more anyway:
# MAX_LIVE_JOBS_PER_TEAM refuses them first).
MAX_CAP_JOBS = 100_000


class MemberCapQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Caps of the teams a user may see: everyone in a team sees its caps (what they and
        their teammates may hold); quota managers see every team's."""
        return self.filter(team__in=Team.objects.visible_to(user))

    def for_person(self, team, user, flavor) -> "MemberCap | None":
        """The cap that holds ``user`` on ``flavor`` in ``team``: their own row, else the team's
        default; None when neither is set (no cap: the team's quota alone)."""
        if user is None:
            return None
        rows = list(self.filter(team=team, flavor=flavor).filter(Q(user=user) | Q(user__isnull=True)))
        rows.sort(key=lambda cap: cap.user_id is None)  # the person's own first
        return rows[0] if rows else None

    def effective_for(self, team, user) -> list["MemberCap"]:
        """Per flavor, the cap that holds ``user`` in ``team`` (`for_person` of each flavor)."""
        chosen: dict[int, MemberCap] = {}
        for cap in self.filter(team=team).filter(Q(user=user) | Q(user__isnull=True)).select_related("flavor"):
            if cap.flavor_id not in chosen or cap.user_id is not None:
                chosen[cap.flavor_id] = cap
        return sorted(chosen.values(), key=lambda cap: cap.flavor.name)


class MemberCap(models.Model):
    """At most ``max_gpus`` GPUs of ``flavor``, and at most ``max_jobs`` jobs on it (when set),
    that one person's jobs of ``team`` may hold at once (`jobs.queue.caps` says what "hold" counts)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="member_caps")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="member_caps")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="gpu_caps",
        help_text="The person it holds; empty: the team's default for everyone who submits in it.",
    )
    max_gpus = models.PositiveIntegerField(
        validators=between(0, MAX_GPUS), help_text="GPUs of the flavor one person's jobs may hold at once.")
    max_jobs = models.PositiveIntegerField(
        null=True, blank=True, validators=between(1, MAX_CAP_JOBS),
        help_text="Jobs on the flavor one person may have on the cluster at once; empty: no limit.")
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    objects = MemberCapQuerySet.as_manager()
    history = HistoricalRecords(excluded_fields=["updated_at"])

    class Meta:
        ordering = ["team", "flavor", "user"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "flavor", "user"], condition=Q(user__isnull=False), name="member_cap_one_per_person",
                violation_error_message="This person already has a cap on this flavor in this team; change it."),
            models.UniqueConstraint(
                fields=["team", "flavor"], condition=Q(user__isnull=True), name="member_cap_one_team_default",
                violation_error_message="The team already has a default cap on this flavor; change it."),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.flavor.name}: {self.user.get_username() if self.user else 'default'}"

    @staticmethod
    def can_manage(team: Team, user) -> bool:
        """The team's owners set caps (quota managers too, as they manage members)."""
        return team.can_manage_members(user)

    @property
    def is_default(self) -> bool:
        return self.user_id is None

    def clean(self) -> None:
        if not (self.team_id and self.flavor_id):
            return
        if self.user_id and not Membership.objects.filter(
                team_id=self.team_id, user_id=self.user_id,
                role__in=(Membership.Role.OWNER, Membership.Role.MEMBER)).exists():
            raise ValidationError({"user": "Only the team's owners and members submit jobs: "
                                           "give a cap to one of them."})
        if MemberCap.objects.filter(team_id=self.team_id, flavor_id=self.flavor_id,
                                    user_id=self.user_id).exclude(pk=self.pk).exists():
            raise ValidationError({"flavor": (
                f"{self.user.get_username()} already has a cap on {self.flavor.name}; change that one."
                if self.user_id else f"The team already has a default cap on {self.flavor.name}; change that one.")},
                code="unique")

    def validate_constraints(self, exclude=None) -> None:
        # The two conditional unique constraints are asked in ``clean``, as a field's error
        # (Django would say them of the whole row); the database still holds them.
        return

    def save_by(self, user) -> None:
        """Set this cap for ``user``, an owner of the team (or a quota manager), recorded in the
        team's history. `jobs.actions.save_cap` lets go the jobs it now lets through."""
        if not self.can_manage(self.team, user):
            raise PermissionDenied(f"Only owners of {self.team.slug} set the caps of its people.")
        self.set_by = user
        self.full_clean(exclude=["set_by"])
        self._history_user = user
        self.save()

    def remove_by(self, user) -> None:
        if not self.can_manage(self.team, user):
            raise PermissionDenied(f"Only owners of {self.team.slug} set the caps of its people.")
        self._history_user = user
        self.delete()
