"""What the platform knows of a running job's idle GPUs: a warning, its grace, an exemption.

One ``IdleWatch`` per job that was ever looked at by the idle sweep (``jobs.use.reclaim``). It
holds the warning (when it was given, from when the grace counts, when the job will be
reclaimed: the job page's banner), why the sweep is paused for the job (metrics missing or
stale), an owner's exemption with its reason, and, once the job was reclaimed, the idle
GPU-hours it gave back. Every change is kept in its history (the audit trail), and each
warning, withdrawal, exemption and reclaim is on the job's timeline (a ``JobEvent``).
"""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils import timezone
from simple_history.models import HistoricalRecords

from tenants.models import Membership
from tenants.roles import is_quota_manager

from ..lifecycle import State

MAX_EXEMPT_REASON = 500
# The reasons of the timeline's events, which notifications hear (`notifications.actions`).
WARNED = "IdleWarning"
CLEARED = "IdleCleared"
EXEMPTED = "IdleExempt"
RECLAIMED = "IdleGpus"


def span(seconds: float) -> str:
    """A duration in words a banner can show: 45 s, 12 min, 3 h 5 min."""
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"


class IdleWatch(models.Model):
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="idle_watch")
    checked_at = models.DateTimeField(null=True, blank=True, help_text="The idle sweep's last reading.")
    idle_seconds = models.PositiveIntegerField(
        default=0, help_text="How long every GPU of the job has been idle, at the last reading.")
    paused_reason = models.CharField(
        max_length=300, blank=True, help_text="Why the sweep could not tell (metrics missing or stale): nothing is "
                                              "warned or reclaimed meanwhile.")
    warned_at = models.DateTimeField(null=True, blank=True)
    grace_from = models.DateTimeField(null=True, blank=True,
                                      help_text="From when the grace counts: the warning, or the end of a gap in the metrics.")
    reclaim_at = models.DateTimeField(null=True, blank=True, help_text="When the job will be reclaimed if it stays idle.")
    exempt_reason = models.CharField(max_length=MAX_EXEMPT_REASON, blank=True)
    exempted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    exempted_at = models.DateTimeField(null=True, blank=True)
    reclaimed_idle_gpu_hours = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    stopped_at = models.DateTimeField(
        null=True, blank=True, help_text="When the reclaimed job's workload was stopped on the cluster.")

    history = HistoricalRecords()  # the audit trail: who exempted which job, and why

    class Meta:
        app_label = "jobs"

    def __str__(self) -> str:
        return f"idle watch of job {self.job_id}"

    @property
    def is_exempt(self) -> bool:
        return bool(self.exempt_reason)

    @property
    def is_warned(self) -> bool:
        return self.warned_at is not None

    # --- what the job page and the API say ------------------------------------------------
    @staticmethod
    def summary(job, rules) -> dict:
        """The job's idle-GPU state in plain values (the API's ``idle``, the page's banner)."""
        watch = getattr(job, "idle_watch", None)  # None when the sweep never looked at it
        kind = job.work_kind
        watched = rules.watches and kind.reclaimable
        return {
            "watched": watched,
            "policy": rules.describe() if kind.reclaimable else kind.idle_words,
            "idle_seconds": watch.idle_seconds if watch and watched else 0,
            "checked_at": watch.checked_at if watch else None,
            "paused_reason": watch.paused_reason if watch and watched else "",
            "warned_at": watch.warned_at if watch else None,
            "reclaim_at": watch.reclaim_at if watch else None,
            "exempt_reason": watch.exempt_reason if watch else "",
            "exempted_by": watch.exempted_by.get_username() if watch and watch.exempted_by else None,
            "idle_gpu_hours": watch.reclaimed_idle_gpu_hours if watch else None,
        }

    # --- the owner's exemption -----------------------------------------------------------
    @staticmethod
    def can_exempt(job, user, rules) -> bool:
        """A team owner, where the policy lets owners exempt; a quota manager always. Only a
        live job that the policy watches."""
        if job.is_final or not rules.watches or not user.is_authenticated:
            return False
        if is_quota_manager(user):
            return True
        return rules.owners_may_exempt and job.team.role_of(user) == Membership.Role.OWNER

    @classmethod
    def exempt(cls, job, user, reason: str, rules) -> "IdleWatch":
        """Exempt ``job`` from idle reclaim for ``user``, with ``reason`` (a warning is withdrawn)."""
        if not cls.can_exempt(job, user, rules):
            raise PermissionDenied("Only the team's owners (where the policy allows it) and quota managers can "
                                   "exempt a job from idle reclaim.")
        reason = (reason or "").strip()
        if not reason:
            raise ValidationError({"reason": "Say why this job may keep idle GPUs."})
        if len(reason) > MAX_EXEMPT_REASON:
            raise ValidationError({"reason": f"At most {MAX_EXEMPT_REASON} characters."})
        with transaction.atomic():
            watch, _ = cls.objects.select_for_update().get_or_create(job=job)
            watch.exempt_reason, watch.exempted_by, watch.exempted_at = reason, user, timezone.now()
            watch.warned_at = watch.grace_from = watch.reclaim_at = None
            watch._history_user = user
            watch.save()
            job.note(EXEMPTED, f"Exempted from idle reclaim by {user.get_username()}: {reason}")
        return watch

    # --- the sweep's moves (jobs.use.reclaim) --------------------------------------------------
    def warn(self, job, now, *, grace_seconds: int, threshold: int, reclaims: bool) -> None:
        self.warned_at = self.grace_from = now
        self.reclaim_at = now + timezone.timedelta(seconds=grace_seconds) if reclaims else None
        self.save(update_fields=["warned_at", "grace_from", "reclaim_at"])
        then = (f"it will be reclaimed at {timezone.localtime(self.reclaim_at):%Y-%m-%d %H:%M:%S %Z} "
                "unless they are busy again" if reclaims else "the policy only warns")
        job.note(WARNED, f"Its {job.gpus_in_use} GPUs have been idle (below {threshold} %) for "
                         f"{span(self.idle_seconds)}; {then}.", at=now)

    def restart_grace(self, at, *, grace_seconds: int) -> None:
        """The metrics had a gap since the grace began: it counts again from ``at``."""
        self.grace_from = at
        if self.reclaim_at is not None:
            self.reclaim_at = at + timezone.timedelta(seconds=grace_seconds)
        self.save(update_fields=["grace_from", "reclaim_at"])

    def clear(self, job, now) -> None:
        """Busy again: the warning is withdrawn, and the idle time counts from zero."""
        self.warned_at = self.grace_from = self.reclaim_at = None
        self.save(update_fields=["warned_at", "grace_from", "reclaim_at"])
        job.note(CLEARED, f"Its GPUs are busy again ({timezone.localtime(now):%H:%M:%S}): the reclaim warning is "
                          "withdrawn.", at=now)

    def reclaimed(self, job, now, *, threshold: int) -> bool:
        """Record the end: the job is `reclaimed` with its idle GPU-hours (the GPUs it held,
        for the time they sat idle). Returns whether this call moved it."""
        hours = (Decimal(job.gpus_in_use) * Decimal(self.idle_seconds) / 3600).quantize(Decimal("0.01"))
        with transaction.atomic():
            moved = job.transition(
                State.RECLAIMED, reason=RECLAIMED, at=now,
                message=(f"Reclaimed: its {job.gpus_in_use} GPUs stayed below {threshold} % for "
                         f"{span(self.idle_seconds)} ({hours} idle GPU-hours)."))
            if moved:
                self.reclaimed_idle_gpu_hours = hours
                self.reclaim_at = now
                self.save(update_fields=["reclaimed_idle_gpu_hours", "reclaim_at"])
        return moved

    def stopped_idle(self, job, now, *, threshold: int) -> bool:
        """A notebook at the end of its grace: stopped and kept (its volumes too), not ended; its
        warning is over, so a start watches it afresh. Returns whether this call moved it."""
        hours = (Decimal(job.gpus_in_use) * Decimal(self.idle_seconds) / 3600).quantize(Decimal("0.01"))
        with transaction.atomic():
            moved = job.stop(reason=RECLAIMED, at=now, message=(
                f"Stopped: its {job.gpus_in_use} GPUs stayed below {threshold} % for {span(self.idle_seconds)} "
                f"({hours} idle GPU-hours); its volumes are kept. Start it again when you need it."))
            if moved:
                self.reclaimed_idle_gpu_hours = hours
                self.warned_at = self.grace_from = self.reclaim_at = None
                self.idle_seconds = 0
                self.save(update_fields=["reclaimed_idle_gpu_hours", "warned_at", "grace_from", "reclaim_at",
                                         "idle_seconds"])
        return moved

    def stopped(self, at) -> None:
        self.stopped_at = at
        self.save(update_fields=["stopped_at"])
