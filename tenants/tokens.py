"""API tokens for CI pipelines, and the idempotency keys that make job submission retryable.

A token belongs to one person and is narrowed to one of their teams (or all of them) and
to scopes (read, submit, cancel), only those its person can use (``usable_scopes``: a
viewer's token reads); it expires. Only a SHA-256 of its secret is stored: the
full token is shown once, at creation. Its first characters (``gpp_`` + 8) are a
non-secret prefix, stored as is, so a request's token is found by an indexed lookup and
then compared in constant time.
"""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from . import recent_tokens
from .roles import QUOTA_MANAGER_FLAG, quota_manager_flag

TOKEN_PREFIX = "gpp_"
LOOKUP_LENGTH = 8  # characters after TOKEN_PREFIX that are stored in clear for lookup
DEFAULT_LIFETIME = timedelta(days=90)
# Keep "last used" cheap: write it at most once a minute per token.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class Scope(models.TextChoices):
    READ = "read", "Read"
    SUBMIT = "submit", "Submit jobs"
    CANCEL = "cancel", "Cancel jobs"


ALL_SCOPES = [s.value for s in Scope]
# What needs more than a view of the team: submitting and cancelling are for owners and
# members (``Team.can_submit``), so a token with them is only of use where its person is one.
WRITE_SCOPES = frozenset({Scope.SUBMIT, Scope.CANCEL})


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def validate_scopes(value) -> None:
    if not isinstance(value, list) or not value or any(s not in ALL_SCOPES for s in value):
        raise ValidationError(f"Scopes are a non-empty list of: {', '.join(ALL_SCOPES)}.")


def usable_scopes(user, team=None) -> list[str]:
    """The scopes a token of ``user`` could ever use: reading always; submitting and
    cancelling only in a team (``team``, or any of theirs) where they are an owner or member."""
    teams = ApiToken._meta.get_field("team").related_model.objects.submittable_by(user)
    if team is not None:
        teams = teams.filter(pk=team.pk)
    return ALL_SCOPES if teams.exists() else [s for s in ALL_SCOPES if s not in WRITE_SCOPES]


def unusable_scopes_message(user, team, unusable) -> str:
    where = f"in {team.slug}" if team is not None else "in any of your teams"
    return (f"{', '.join(sorted(unusable))}: you cannot submit or cancel jobs {where} (owners and members can), "
            "so a token could never use it.")


class ApiTokenQuerySet(models.QuerySet):
    def issue(self, *, user, name: str, team=None, scopes=None, lifetime=DEFAULT_LIFETIME):
        """Create a token; returns ``(token, secret)``. The secret is never stored.

        ``scopes`` None gives every scope the person can use (``usable_scopes``); a scope they
        could never use, or none at all, is refused."""
        if team is not None and not type(team).objects.visible_to(user).filter(pk=team.pk).exists():
            raise PermissionDenied(f"You cannot act for team {team.slug}.")
        usable = usable_scopes(user, team)
        if scopes is not None:
            unusable = set(scopes) - set(usable)
            if unusable & set(ALL_SCOPES):
                raise ValidationError({"scopes": unusable_scopes_message(user, team, unusable & set(ALL_SCOPES))})
        secret = f"{TOKEN_PREFIX}{secrets.token_hex(LOOKUP_LENGTH // 2)}{secrets.token_urlsafe(32)}"
        token = self.model(
            user=user, name=name, team=team, scopes=sorted(set(usable if scopes is None else scopes)),
            prefix=secret[: len(TOKEN_PREFIX) + LOOKUP_LENGTH], digest=_digest(secret),
            expires_at=timezone.now() + lifetime,
        )
        token.full_clean()
        with transaction.atomic():
            self._refuse_over_cap(user)
            token.save()
        return token, secret

    def live(self, now=None):
        """Tokens that still open the API: not revoked, not expired."""
        return self.filter(revoked_at__isnull=True, expires_at__gt=now or timezone.now())

    def _refuse_over_cap(self, user) -> None:
        """One person holds at most ``MAX_API_TOKENS_PER_USER`` live tokens. Their row is
        locked while the tokens are counted, so two requests at once cannot both take the last."""
        people = ApiToken._meta.get_field("user").related_model.objects
        people.select_for_update().filter(pk=user.pk).values_list("pk").first()
        held, cap = self.live().filter(user=user).count(), settings.MAX_API_TOKENS_PER_USER
        if held >= cap:
            raise ValidationError(
                f"You have {held} live API tokens, the most one person may hold ({cap}); revoke one you no "
                "longer use, then create this one.", code="too_many_tokens")

    def find(self, secret: str):
        """The token a secret belongs to (revoked or expired ones included), or None."""
        if not secret.startswith(TOKEN_PREFIX):
            return None
        digest = _digest(secret)
        candidates = (self.filter(prefix=secret[: len(TOKEN_PREFIX) + LOOKUP_LENGTH])
                      .select_related("user").annotate(user_is_quota_manager=quota_manager_flag("user")))
        for token in candidates:
            if hmac.compare_digest(token.digest, digest):
                setattr(token.user, QUOTA_MANAGER_FLAG, token.user_is_quota_manager)
                return token
        return None


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    team = models.ForeignKey(
        "tenants.Team", on_delete=models.CASCADE, null=True, blank=True, related_name="api_tokens",
        help_text="The one team the token acts for; empty means all of the person's teams.",
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'CI of repo x'.")
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list, validators=[validate_scopes])
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")),
                name="api_token_expires_after_creation",
                violation_error_message="A token must expire after it is created.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def narrow(self, queryset, team_field: str = "team"):
        """Limit an already visibility-scoped queryset to the token's team, if it has one."""
        if self.team_id is None:
            return queryset
        return queryset.filter(**{f"{team_field}_id" if team_field else "pk": self.team_id})

    def revoke(self) -> bool:
        changed = ApiToken.objects.filter(pk=self.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        recent_tokens.bump()  # no signal for an UPDATE
        self.refresh_from_db(fields=["revoked_at"])
        return bool(changed)

    def touch(self, now=None) -> None:
        """Record use; at most one write per ``LAST_USED_RESOLUTION``."""
        now = now or timezone.now()
        if self.last_used_at and now - self.last_used_at < LAST_USED_RESOLUTION:
            return
        ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)
        self.last_used_at = now
