"""Quota requests and dated grants, and the audit trail of every quota-related model.

An owner files a ``QuotaRequest``; a quota manager approves it (possibly with other
numbers), which creates a ``QuotaGrant``, or denies it with a reason. A team's quota for a
flavor is the sum of its grants active at that moment (``quotas.grants``); the periodic
sweep writes that sum onto the ``Quota`` row when grants start or end.
"""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import MaxLengthValidator
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from core.validators import between
from tenants.models import Membership, Team
from tenants.roles import is_quota_manager

from .. import grants
from ..grants import MAX_CPU_CORES, MAX_GPUS, MAX_MEMORY_GIB

# What an owner may write to a quota manager (a request's or a renewal's justification).
MAX_JUSTIFICATION = 4000

# "Keep the grant's borrowing limit" (``None`` is a number there: no limit).
UNCHANGED = object()


class QuotaRequestQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Requests of the teams a person may see; every request for quota managers."""
        return self.filter(team__in=Team.objects.visible_to(user))

    def pending(self):
        return self.filter(status=QuotaRequest.Status.PENDING)

    def submit(self, *, team: Team, requested_by, **fields) -> "QuotaRequest":
        """The one way a request is filed: only the team's owners may ask."""
        if not QuotaRequest.can_request(team, requested_by):
            raise PermissionDenied(f"Only owners of {team.slug} can ask for a quota change.")
        request = QuotaRequest(team=team, requested_by=requested_by, **fields)
        request.full_clean()
        request._history_user = requested_by
        request.save()
        return request

    def renew(self, grant: "QuotaGrant", *, requested_by, ends_on, justification: str,
              gpus: int | None = None, borrowing_limit_gpus=UNCHANGED, now=None) -> "QuotaRequest":
        """The one way a renewal is asked for: an owner of the grant's team asks to carry
        ``grant`` on until ``ends_on`` (its numbers, or others), before it ends. Refused for
        a grant marked non-renewable, one that has no end or has ended, and while another
        renewal of it is pending. ``now``: the moment it is asked (the clock when None)."""
        now = now or timezone.now()
        if not QuotaRequest.can_request(grant.team, requested_by):
            raise PermissionDenied(f"Only owners of {grant.team.slug} can ask to renew its grants.")
        refusal = grant.why_not_renew(now)
        if refusal is not None:
            raise ValidationError({"renews": refusal})
        starts_on = grant.renewal_starts_on
        if ends_on is not None and ends_on < starts_on:
            raise ValidationError({"ends_on": f"Grant #{grant.pk} already runs until "
                                              f"{grants.last_day(grant.ends_at)}; pick a later last day."})
        fields = {"gpus": grant.gpus if gpus is None else gpus,
                  "borrowing_limit_gpus": (grant.borrowing_limit_gpus if borrowing_limit_gpus is UNCHANGED
                                           else borrowing_limit_gpus)}
        with transaction.atomic():
            # The grant row serialises two renewals asked at once (the constraint is the backstop).
            QuotaGrant.objects.select_for_update().filter(pk=grant.pk).first()
            if grant.renewals.pending().exists():
                raise ValidationError({"renews": f"A renewal of grant #{grant.pk} is already waiting for a "
                                                 "quota manager."})
            return self.submit(team=grant.team, requested_by=requested_by, flavor=grant.flavor, renews=grant,
                               starts_on=starts_on, ends_on=ends_on, justification=justification, **fields)


# Far enough for any plan, near enough that date arithmetic never overflows.
LAST_YEAR = 2999
# What a request asks for, fixed once it is filed (``QuotaRequest.save``).
ASKED_FIELDS = ("team_id", "flavor_id", "requested_by_id", "gpus", "borrowing_limit_gpus", "starts_on", "ends_on",
                "justification", "created_at", "renews_id")


def four_eyes_lookback() -> timedelta:
    """How far back a quota manager's membership of a team still bars her from deciding
    for it (``FOUR_EYES_LOOKBACK_DAYS``)."""
    return timedelta(days=settings.FOUR_EYES_LOOKBACK_DAYS)


class QuotaRequest(models.Model):
    """An owner's request for more (or fewer) GPUs of one flavor for a period."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        DENIED = "denied", "Denied"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    flavor = models.ForeignKey("quotas.GpuFlavor", on_delete=models.PROTECT, related_name="quota_requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="quota_requests"
    )
    gpus = models.IntegerField(
        validators=between(-MAX_GPUS, MAX_GPUS),
        help_text="GPUs to add for the period; a negative number gives GPUs back.",
    )
    borrowing_limit_gpus = models.PositiveIntegerField(
        null=True, blank=True, validators=between(0, MAX_GPUS),
        help_text="Most GPUs the team may borrow from its cohort during the period; empty leaves it unlimited.",
    )
    starts_on = models.DateField(help_text="First day of the change.")
    ends_on = models.DateField(null=True, blank=True, help_text="Last day of the change; empty means no end.")
    justification = models.TextField(validators=[MaxLengthValidator(MAX_JUSTIFICATION)],
                                     help_text="What the GPUs are for, so a quota manager can decide.")
    renews = models.ForeignKey(
        "quotas.QuotaGrant", on_delete=models.RESTRICT, null=True, blank=True, related_name="renewals",
        help_text="The grant this request asks to carry on past its end; empty for a new grant.",
    )
    status = models.CharField(max_length=10, choices=Status, default=Status.PENDING, db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = QuotaRequestQuerySet.as_manager()
    history = HistoricalRecords()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_on__isnull=True) | Q(ends_on__gte=F("starts_on")),
                name="quota_request_ends_after_start",
                violation_error_message="The last day cannot be before the first day.",
            ),
            models.CheckConstraint(
                condition=~Q(gpus=0) | Q(borrowing_limit_gpus__isnull=False),
                name="quota_request_asks_for_something",
                violation_error_message="Ask for some GPUs (or give some back), or for a borrowing limit.",
            ),
            models.CheckConstraint(
                condition=~Q(status="denied") | ~Q(decision_reason=""),
                name="quota_request_denial_has_reason",
                violation_error_message="A denial needs a reason the team can read.",
            ),
            models.UniqueConstraint(
                fields=["renews"], condition=Q(status="pending"), name="quota_request_one_pending_renewal",
                violation_error_message="A renewal of this grant is already waiting for a quota manager.",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "approved", "denied"]),
                name="quota_request_status_valid",
                violation_error_message="Unknown request status.",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team.slug} {self.gpus:+d} {self.flavor.name} ({self.status})"

    def save(self, *args, **kwargs):
        # A request is what its owner filed: once saved, what it asks for never changes
        # (a manager approves with other numbers, which the grant records), and once
        # decided nothing of it changes, whoever saves (the admin included).
        if self.pk is not None:
            saved = QuotaRequest.objects.filter(pk=self.pk).first()
            if saved is not None:
                self._refuse_rewrite(saved)
        super().save(*args, **kwargs)

    @staticmethod
    def can_request(team: Team, user) -> bool:
        return team.role_of(user) == Membership.Role.OWNER

    def can_decide(self, user) -> bool:
        return self.why_not_decide(user) is None

    def why_not_decide(self, user) -> str | None:
        """Four eyes: only a quota manager decides, and never on a request she filed or one
        that benefits a team she was in (owner, member or viewer) when it was filed, in the
        ``FOUR_EYES_LOOKBACK_DAYS`` before, or since: the audit trail of memberships says,
        not today's rows, so leaving the team to decide and coming back changes nothing.
        ``None`` when ``user`` may decide."""
        if not is_quota_manager(user):
            return "Only quota managers decide on quota requests."
        if self.requested_by_id is not None and self.requested_by_id == user.pk:
            return "You filed this request; another quota manager decides it."
        filed = self.created_at or timezone.now()
        if Membership.was_in(self.team_id, user, filed - four_eyes_lookback()):
            return (f"You are or were in {self.team.slug} when this request was filed or since; "
                    "another quota manager decides it.")
        return None

    def _refuse_rewrite(self, saved: "QuotaRequest") -> None:
        if not saved.is_pending:
            raise ValidationError(f"Request #{saved.pk} was {saved.status}; a decided request cannot change.")
        changed = [name for name in ASKED_FIELDS if getattr(self, name) != getattr(saved, name)]
        if changed:
            raise ValidationError({name: "What a request asks for cannot change once filed; file a new one."
                                   for name in changed})

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING

    @property
    def is_renewal(self) -> bool:
        return self.renews_id is not None

    def clean(self) -> None:
        errors = {}
        if self.ends_on and self.starts_on and self.ends_on < self.starts_on:
            errors["ends_on"] = "The last day cannot be before the first day."
        for field in ("starts_on", "ends_on"):
            day = getattr(self, field)
            if day and day.year > LAST_YEAR:
                errors[field] = f"Pick a day before {LAST_YEAR + 1}; leave the last day empty for no end."
        if self.gpus == 0 and self.borrowing_limit_gpus is None:
            errors["gpus"] = "Ask for some GPUs (or give some back with a negative number), or for a borrowing limit."
        if errors:
            raise ValidationError(errors)

    def _take_decision(self, locked: "QuotaRequest") -> None:
        for field in ("status", "decided_by", "decided_at", "decision_reason"):
            setattr(self, field, getattr(locked, field))

    def _lock_pending(self, user) -> "QuotaRequest | None":
        locked = QuotaRequest.objects.select_for_update().get(pk=self.pk)
        # Checked under the lock on the row as saved, so an edited instance cannot slip past.
        refusal = locked.why_not_decide(user)
        if refusal is not None:
            raise PermissionDenied(refusal)
        return locked if locked.is_pending else None

    def approve(self, user, *, gpus: int, borrowing_limit_gpus: int | None, starts_on, ends_on,
                cpu_cores: int, memory_gib: int, reason: str = "", renewable: bool = True,
                now=None) -> "QuotaGrant | None":
        """Approve with the given numbers (the request's or changed ones): record the
        decision and create the grant (`quotas.actions.approve` applies it). Returns the
        grant, or ``None`` when someone else decided first."""
        now = now or timezone.now()
        with transaction.atomic():
            locked = self._lock_pending(user)
            if locked is None:
                return None
            locked.status, locked.decided_by, locked.decided_at = self.Status.APPROVED, user, now
            locked.decision_reason = reason
            locked._change_reason = "approved"
            locked._history_user = user
            locked.save()
            starts_at, ends_at = grants.window(starts_on, ends_on)
            numbers = {"gpus": gpus, "borrowing_limit_gpus": borrowing_limit_gpus, "cpu_cores": cpu_cores,
                       "memory_gib": memory_gib}
            if locked.renews_id is not None:
                grant = QuotaGrant.objects.select_for_update().get(pk=locked.renews_id)
                grant = grant.renew(locked, user, numbers=numbers, starts_at=starts_at, ends_at=ends_at,
                                    reason=reason, renewable=renewable, now=now)
                self._take_decision(locked)
                return grant
            grant = QuotaGrant.objects.add(QuotaGrant(
                team=self.team, flavor=self.flavor, request=locked, granted_by=user, gpus=gpus,
                borrowing_limit_gpus=borrowing_limit_gpus, cpu_cores=cpu_cores, memory_gib=memory_gib,
                starts_at=starts_at, ends_at=ends_at, note=reason, renewable=renewable,
            ), now=now)
        self._take_decision(locked)
        return grant

    def deny(self, user, reason: str, *, now=None) -> bool:
        """Deny with a reason the team reads on its page; ``False`` if already decided."""
        if not reason.strip():
            raise ValidationError({"decision_reason": "Say why, so the team knows what to change."})
        with transaction.atomic():
            locked = self._lock_pending(user)
            if locked is None:
                return False
            locked.status, locked.decided_by = self.Status.DENIED, user
            locked.decided_at, locked.decision_reason = now or timezone.now(), reason.strip()
            locked._change_reason = "denied"
            locked._history_user = user
            locked.save()
        self._take_decision(locked)
        return True


class QuotaGrantQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.visible_to(user))

    def active_at(self, at):
        return self.filter(Q(starts_at__lte=at), Q(ends_at__isnull=True) | Q(ends_at__gt=at))

    def inactive_at(self, at):
        return self.filter(Q(starts_at__gt=at) | Q(ends_at__lte=at))

    def current_or_upcoming(self, at):
        return self.filter(Q(ends_at__isnull=True) | Q(ends_at__gt=at))

    def add(self, grant: "QuotaGrant", *, now=None) -> "QuotaGrant":
        """The one way a grant is created (approvals, the console, the admin). Once grants
        manage a quota its numbers are their sum, so the first grant on a quota that exists
        is preceded by a standing grant with its current numbers: a change adds to what the
        team had instead of replacing it."""
        now = now or timezone.now()
        if grant.granted_by is not None and Membership.was_in(grant.team_id, grant.granted_by,
                                                              now - four_eyes_lookback()):
            # Four eyes, as for requests: nobody grants GPUs to a team they are or were lately in.
            raise PermissionDenied(f"You are or were lately in {grant.team.slug}; another quota manager "
                                   "grants its quota.")
        with transaction.atomic():
            # The team row serialises this with the sweep, so two first grants make one standing grant.
            Team.objects.select_for_update().filter(pk=grant.team_id).first()
            if not QuotaGrant.objects.filter(team_id=grant.team_id, flavor_id=grant.flavor_id).exists():
                quota = grant.team.quotas.filter(flavor_id=grant.flavor_id).first()
                if quota is not None:
                    QuotaGrant.objects.create(
                        team_id=grant.team_id, flavor_id=grant.flavor_id, gpus=quota.nominal_gpus,
                        borrowing_limit_gpus=quota.borrowing_limit_gpus, cpu_cores=quota.cpu_cores,
                        memory_gib=quota.memory_gib, starts_at=now, applied=True,
                        note="Standing quota when grants took over this quota.",
                    )
            grant.full_clean(exclude=["team", "flavor"])
            if grant.granted_by is not None:
                grant._history_user = grant.granted_by
            grant.save()
        return grant


class QuotaGrant(models.Model):
    """GPUs (and the CPU and memory that go with them) granted to a team on one flavor
    from ``starts_at`` until ``ends_at`` (exclusive; empty means no end)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_grants")
    flavor = models.ForeignKey("quotas.GpuFlavor", on_delete=models.PROTECT, related_name="quota_grants")
    request = models.OneToOneField(
        QuotaRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="grant"
    )
    gpus = models.IntegerField(
        validators=between(-MAX_GPUS, MAX_GPUS),
        help_text="GPUs added while the grant is active; negative takes GPUs away.")
    borrowing_limit_gpus = models.PositiveIntegerField(
        null=True, blank=True, validators=between(0, MAX_GPUS),
        help_text="Added to the borrowing limit while active; empty sets none.",
    )
    cpu_cores = models.IntegerField(default=0, validators=between(-MAX_CPU_CORES, MAX_CPU_CORES))
    memory_gib = models.IntegerField(default=0, validators=between(-MAX_MEMORY_GIB, MAX_MEMORY_GIB))
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    renewable = models.BooleanField(
        default=True, help_text="Whether the team may ask to carry this grant on past its end.")
    # Bookkeeping of the sweep: whether the team's Quota row counts this grant right now.
    applied = models.BooleanField(default=False)
    expiry_warning_sent_at = models.DateTimeField(null=True, blank=True)

    objects = QuotaGrantQuerySet.as_manager()
    history = HistoricalRecords(excluded_fields=["applied", "expiry_warning_sent_at"])

    class Meta:
        ordering = ["-starts_at", "-id"]
        indexes = [models.Index(fields=["team", "flavor"], name="grant_team_flavor")]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True) | Q(ends_at__gt=F("starts_at")),
                name="quota_grant_ends_after_start",
                violation_error_message="A grant ends after it starts.",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team.slug} {self.gpus:+d} {self.flavor.name}"

    @staticmethod
    def can_end(user) -> bool:
        """Ending a grant early only takes GPUs away, so any quota manager may, in her team too."""
        return is_quota_manager(user)

    @property
    def renewal_starts_on(self):
        """The first day a renewal covers: the day the grant ends on (its end is exclusive)."""
        return timezone.localtime(self.ends_at).date() if self.ends_at else None

    def why_not_renew(self, now=None) -> str | None:
        """Why the team cannot ask to renew this grant now; ``None`` when it can."""
        now = now or timezone.now()
        if not self.renewable:
            return f"Grant #{self.pk} is not renewable; ask for a new grant instead."
        if self.ends_at is None:
            return f"Grant #{self.pk} has no end; there is nothing to renew."
        if self.ends_at <= now:
            return f"Grant #{self.pk} has ended; ask for a new grant instead."
        return None

    def renew(self, renewal: QuotaRequest, user, *, numbers: dict, starts_at, ends_at, reason: str,
              renewable: bool, now) -> "QuotaGrant":
        """Carry this grant (locked by the caller) on as ``renewal`` was approved. With its
        own numbers from its end, the grant is extended in place: its end moves, and the
        owners hear again before the new one. With other numbers or another start, it stays
        as it is and a grant from the approved start (never before this one's end, so the
        two never add up) carries it on."""
        if ends_at is not None and ends_at <= self.ends_at:
            raise ValidationError({"ends_on": f"A renewal ends after grant #{self.pk} does "
                                              f"({grants.last_day(self.ends_at)})."})
        if all(getattr(self, name) == value for name, value in numbers.items()) and starts_at <= self.ends_at:
            self.ends_at, self.renewable = ends_at, renewable
            self.expiry_warning_sent_at = None
            self.full_clean(exclude=["team", "flavor"])
            self._change_reason = f"extended by renewal request #{renewal.pk}"
            self._history_user = user
            self.save()
            return self
        return QuotaGrant.objects.add(QuotaGrant(
            team_id=self.team_id, flavor_id=self.flavor_id, request=renewal, granted_by=user,
            starts_at=max(starts_at, self.ends_at), ends_at=ends_at, note=reason or f"Renews grant #{self.pk}.",
            renewable=renewable, **numbers,
        ), now=now)

    def end_now(self, user, *, now=None) -> bool:
        """End the grant early (quota managers; `quotas.actions.end_grant` applies it)."""
        if not self.can_end(user):
            raise PermissionDenied("Only quota managers end grants.")
        now = now or timezone.now()
        with transaction.atomic():
            locked = QuotaGrant.objects.select_for_update().get(pk=self.pk)
            if locked.ends_at is not None and locked.ends_at <= now:
                return False
            locked.ends_at = max(now, locked.starts_at + timedelta(seconds=1))
            locked._change_reason = f"ended early by {user.get_username()}"
            locked._history_user = user
            locked.save()
        self.ends_at = locked.ends_at
        return True
