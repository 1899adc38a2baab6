"""Teams and memberships. A team owns one namespace, named from its slug."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from simple_history.models import HistoricalRecords

from cluster.names import DNS1123_LABEL_MAX
from core.validators import validate_dns1123_label

from .roles import is_quota_manager
from .tokens import ApiToken  # noqa: F401  (a model of this app: API tokens)

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

    # The audit trail; its table was first made by the quotas app, hence the name.
    history = HistoricalRecords(table_name="quotas_historicalteam")
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

    def set_status(self, status: str, message: str = "") -> bool:
        """Write the lifecycle status only when it changed; returns whether it did.
        A team being offboarded stays so: a reconcile that started before cannot undo it."""
        rows = Team.objects.filter(pk=self.pk).exclude(status=status, status_message=message)
        if status != Team.Status.DELETING:
            rows = rows.exclude(status=Team.Status.DELETING)
        changed = rows.update(status=status, status_message=message)
        self.status, self.status_message = status, message
        return bool(changed)

    def start_offboarding(self, user) -> bool:
        """Mark the team for offboarding; its next reconcile deletes everything it has on
        the cluster, namespace last, and then the team itself. Recorded in the audit trail
        under ``user``. Returns ``False`` when the team was already being offboarded."""
        with transaction.atomic():
            locked = Team.objects.select_for_update().get(pk=self.pk)
            if locked.status == Team.Status.DELETING:
                return False
            locked.status = Team.Status.DELETING
            locked.status_message = (f"Offboarding, asked by {user.get_username()}: deleting the "
                                     f"namespace {locked.namespace_name} and everything in it.")
            locked._change_reason = "offboarding"
            locked._history_user = user
            locked.save(update_fields=["status", "status_message", "updated_at"])
        self.status, self.status_message = locked.status, locked.status_message
        return True


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
    history = HistoricalRecords(table_name="quotas_historicalmembership")

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

    def remove(self) -> None:
        """Take the person out of the team. A team always keeps an owner, so the last one
        cannot be removed (``ValidationError``). The team's owner rows are locked before the
        check, so two owners removing each other at once cannot both succeed."""
        with transaction.atomic():
            owners = list(Membership.objects.select_for_update().filter(
                team_id=self.team_id, role=self.Role.OWNER).order_by("pk").values_list("pk", flat=True))
            current = Membership.objects.select_for_update().filter(pk=self.pk).first()
            if current is None:  # removed meanwhile: nothing left to do
                return
            if current.role == self.Role.OWNER and not [pk for pk in owners if pk != self.pk]:
                raise ValidationError(
                    f"{self.user.get_username()} is the last owner of {self.team.slug}; add another owner first.")
            current.delete()
