"""Teams and memberships. A team owns one namespace, named from its slug."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from django.db.models import Q
from simple_history.models import HistoricalRecords

from cluster.names import DNS1123_LABEL_MAX
from core.validators import validate_dns1123_label

from ..roles import is_quota_manager

SLUG_MAX_LENGTH = 40
# Priority class values lie within +-1e9 (as Kubernetes' user-defined PriorityClasses).
PRIORITY_BOUND = 1_000_000_000
# Without a quota manager's say, a team's jobs use at most the default priority (0).
DEFAULT_MAX_PRIORITY = 0

# Namespaces no team may ever own, whatever TEAM_NAMESPACE_PREFIX is (it may be empty):
# Kubernetes' own, the platform's (settings.PLATFORM_NAMESPACE) and the schedulers'.
# A team named into one would take it over, and offboarding the team would delete it.
SYSTEM_NAMESPACE_PREFIXES = ("kube-",)
SYSTEM_NAMESPACES = frozenset({"default", "kueue-system", "volcano-system", "volcano-monitoring"})


def is_system_namespace(name: str) -> bool:
    return (name.startswith(SYSTEM_NAMESPACE_PREFIXES) or name in SYSTEM_NAMESPACES
            or name == settings.PLATFORM_NAMESPACE)


class SystemNamespace(Exception):
    """A team's namespace would be a system namespace; nothing is rendered or deleted."""

    def __init__(self, namespace: str):
        super().__init__(f"The namespace {namespace} belongs to the cluster or the platform; "
                         "no team may own it.")
        self.namespace = namespace


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
    max_priority_value = models.IntegerField(
        default=DEFAULT_MAX_PRIORITY,
        validators=[MinValueValidator(-PRIORITY_BOUND), MaxValueValidator(PRIORITY_BOUND)],
        help_text="The highest priority class value this team's jobs may use. Higher classes may "
                  "preempt other teams' jobs, so a quota manager raises it for the teams that need them.",
    )
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
            models.CheckConstraint(
                condition=Q(max_priority_value__gte=-PRIORITY_BOUND, max_priority_value__lte=PRIORITY_BOUND),
                name="team_max_priority_in_range",
                violation_error_message="Priority values lie between -1e9 and 1e9.",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.slug

    def save(self, *args, **kwargs):
        # A rename would leave the old namespace, bindings and queues on the cluster (and
        # the team holding its quota twice): refused here too, not only in forms.
        fields = kwargs.get("update_fields")
        if (fields is None or "slug" in fields) and self._slug_changed():
            raise ValidationError({"slug": "A team's slug cannot change once the team exists."})
        super().save(*args, **kwargs)

    @property
    def namespace_name(self) -> str:
        return f"{settings.TEAM_NAMESPACE_PREFIX}{self.slug}"

    @property
    def owns_system_namespace(self) -> bool:
        """True when the configured prefix makes this team's namespace a system one (a
        team validated under another prefix); renderers and offboarding refuse it."""
        return is_system_namespace(self.namespace_name)

    def clean(self) -> None:
        limit = DNS1123_LABEL_MAX - len(settings.TEAM_NAMESPACE_PREFIX)
        if self.slug and len(self.slug) > limit:
            raise ValidationError(
                {"slug": f"At most {limit} characters, so that the namespace name "
                 f"'{settings.TEAM_NAMESPACE_PREFIX}…' fits in 63."}
            )
        if self.slug and self.owns_system_namespace:
            raise ValidationError({"slug": f"The namespace {self.namespace_name} belongs to the cluster or "
                                           "the platform; pick another name."})
        if self._slug_changed():
            raise ValidationError({"slug": "The slug names the team's namespace, queues and bindings on the "
                                           "cluster, so it cannot change once the team exists."})

    def _slug_changed(self) -> bool:
        if self.pk is None or not self.slug:
            return False
        saved = Team.objects.filter(pk=self.pk).values_list("slug", flat=True).first()
        return saved is not None and saved != self.slug

    def role_of(self, user) -> str | None:
        if not user.is_authenticated:
            return None
        # One membership at most (team, user is unique): no ordering, so no join for it.
        return self.memberships.filter(user=user).order_by().values_list("role", flat=True).first()

    def can_manage_members(self, user) -> bool:
        return is_quota_manager(user) or self.role_of(user) == Membership.Role.OWNER

    def allows_priority(self, value: int) -> bool:
        """Whether the team's jobs may run at this priority value (``max_priority_value``)."""
        return value <= self.max_priority_value

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
    class Source(models.TextChoices):
        MANUAL = "manual", "Added by hand"
        IDP = "idp", "IdP group"

    role = models.CharField(max_length=10, choices=Role, default=Role.MEMBER)
    # Single sign-on (tenants/models/identities.py): memberships made from IdP groups follow the
    # groups at each login and are not edited by hand; hand-made ones stay until removed.
    source = models.CharField(max_length=10, choices=Source, default=Source.MANUAL, editable=False)
    via_group = models.CharField(max_length=200, blank=True, editable=False,
                                 help_text="The IdP group that grants this membership.")
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
            models.CheckConstraint(
                condition=Q(source="manual", via_group="") | Q(source="idp") & ~Q(via_group=""),
                name="membership_source_valid",
                violation_error_message="A membership is made by hand, or from a named IdP group.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team.slug} ({self.role})"

    @property
    def from_idp(self) -> bool:
        return self.source == self.Source.IDP

    @classmethod
    def was_in(cls, team_id: int, user, since) -> bool:
        """Whether ``user`` was in the team at ``since`` or at any time after, in any role,
        as the audit trail (every add, change and removal) and the rows of today say.
        Four eyes ask this, not today's membership, which its holder can drop and take back."""
        if not getattr(user, "is_authenticated", False):
            return False
        if cls.objects.filter(team_id=team_id, user_id=user.pk).exists():
            return True
        trail = cls.history.filter(team_id=team_id, user_id=user.pk)
        if trail.filter(history_date__gte=since).exists():
            return True  # added, changed or removed since: a member at that moment
        before = trail.filter(history_date__lt=since).order_by("-history_date", "-history_id").first()
        return before is not None and before.history_type != "-"

    @property
    def idp_locked_message(self) -> str:
        return (f"{self.user.get_username()} is in {self.team.slug} through the IdP group "
                f"'{self.via_group}'; change the group at the identity provider instead.")

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
            if current.from_idp:
                raise ValidationError(current.idp_locked_message)
            if current.role == self.Role.OWNER and not [pk for pk in owners if pk != self.pk]:
                raise ValidationError(
                    f"{self.user.get_username()} is the last owner of {self.team.slug}; add another owner first.")
            current.delete()

