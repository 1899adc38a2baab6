"""Teams and memberships. A team owns one namespace, named from its slug."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from cluster.names import DNS1123_LABEL_MAX
from gpuplatform.validators import validate_dns1123_label

from .roles import is_quota_manager

SLUG_MAX_LENGTH = 40


class TeamQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Teams a user may see: their own; every team for quota managers."""
        if is_quota_manager(user):
            return self.all()
        if not user.is_authenticated:
            return self.none()
        return self.filter(memberships__user=user).distinct()

    def submittable_by(self, user):
        """Teams where ``user`` may submit jobs: the queryset form of ``Team.can_submit``."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(
            memberships__user=user, memberships__role__in=[Membership.Role.OWNER, Membership.Role.MEMBER]
        ).distinct()


class Team(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        READY = "ready", "Ready"
        ERROR = "error", "Error"
        DELETING = "deleting", "Deleting"

    slug = models.SlugField(
        max_length=SLUG_MAX_LENGTH,
        unique=True,
        validators=[validate_dns1123_label],
        help_text="Lowercase letters, digits and '-'. The namespace is named from it.",
    )
    display_name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status, default=Status.PENDING)
    status_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "ready", "error", "deleting"]),
                name="team_status_valid",
                violation_error_message="Unknown team status.",
            ),
            models.CheckConstraint(
                condition=~Q(slug=""),
                name="team_slug_not_empty",
                violation_error_message="A team needs a slug.",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.slug

    @property
    def namespace_name(self) -> str:
        return f"{settings.TEAM_NAMESPACE_PREFIX}{self.slug}"

    def clean(self) -> None:
        limit = DNS1123_LABEL_MAX - len(settings.TEAM_NAMESPACE_PREFIX)
        if self.slug and len(self.slug) > limit:
            raise ValidationError(
                {"slug": f"At most {limit} characters, so that the namespace name "
                 f"'{settings.TEAM_NAMESPACE_PREFIX}…' fits in 63."}
            )

    def role_of(self, user) -> str | None:
        if not user.is_authenticated:
            return None
        return (
            self.memberships.filter(user=user).values_list("role", flat=True).first()
        )

    def can_manage_members(self, user) -> bool:
        return is_quota_manager(user) or self.role_of(user) == Membership.Role.OWNER

    def can_submit(self, user) -> bool:
        return self.role_of(user) in (Membership.Role.OWNER, Membership.Role.MEMBER)

    def render_inputs(self) -> dict:
        """What ``tenants.manifests.render_team`` needs, loaded in two queries."""
        return {
            "memberships": list(self.memberships.select_related("user")),
            "quotas": list(self.quotas.select_related("flavor", "cohort").with_cohort_lendable()),
        }

    def set_status(self, status: str, message: str = "") -> bool:
        """Write the lifecycle status only when it changed; returns whether it did."""
        changed = Team.objects.filter(pk=self.pk).exclude(
            status=status, status_message=message
        ).update(status=status, status_message=message)
        self.status, self.status_message = status, message
        return bool(changed)


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "user"],
                name="membership_one_per_user_and_team",
                violation_error_message="This person is already a member of the team.",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "member", "viewer"]),
                name="membership_role_valid",
                violation_error_message="Role must be owner, member or viewer.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team.slug} ({self.role})"

    @property
    def is_last_owner(self) -> bool:
        """A team always keeps an owner: the last one cannot be removed."""
        return (self.role == self.Role.OWNER
                and not self.team.memberships.filter(role=self.Role.OWNER).exclude(pk=self.pk).exists())


from .tokens import ApiToken, IdempotencyKey  # noqa: E402,F401  (API tokens: see tenants/tokens.py)
