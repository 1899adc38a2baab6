"""The preemption contract (docs/preemption.md): what a job's priority class promises it (a
checkpoint grace, a minimum runtime before Kueue may preempt it), and each preemption the
cluster reported, with the GPU-hours it cost the job and the team charged for them."""

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from tenants.models import Team

from ..lifecycle import HOLDING_QUOTA

HOURS = Decimal("0.01")


class PreemptionContract:
    """What a job's priority class promises it, mixed into `jobs.models.Job` (its fields:
    priority, state, ``run_admitted_at``)."""

    @property
    def checkpoint_grace_seconds(self) -> int:
        """Seconds its pods have between SIGTERM and SIGKILL: its class's, else the platform's."""
        return self.priority.checkpoint_grace_seconds if self.priority_id else settings.CHECKPOINT_GRACE_SECONDS

    @property
    def minimum_runtime_seconds(self) -> int:
        return self.priority.minimum_runtime_seconds if self.priority_id else 0

    def protected_until(self):
        """Until when Kueue may not preempt it for priority: its minimum runtime after this
        run's admission, while it holds its GPUs; None when nothing protects it."""
        if not self.minimum_runtime_seconds or self.state not in HOLDING_QUOTA or self.run_admitted_at is None:
            return None
        return self.run_admitted_at + timedelta(seconds=self.minimum_runtime_seconds)

    def is_protected_from_preemption(self, now=None) -> bool:
        until = self.protected_until()
        return until is not None and (now or timezone.now()) < until


def lost_gpu_hours(job, since, until) -> Decimal:
    """GPU-hours ``job`` held in [since, until): its GPU intervals cut at both ends."""
    if since is None or until <= since:
        return Decimal(0)
    intervals = job.gpu_intervals.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=until)
    seconds = sum(i.gpus * max((min(i.ended_at or until, until) - max(i.started_at, since)).total_seconds(), 0)
                  for i in intervals)
    return (Decimal(seconds) / 3600).quantize(HOURS)


class PreemptionQuerySet(models.QuerySet):
    def record(self, job, *, at, reason: str, by_job=None, checkpoint=None) -> "Preemption | None":
        """Record that ``job`` was preempted at ``at`` (the eviction's time) by ``by_job`` (None:
        not one of ours), once: the same eviction seen again (the watcher's next reading, a
        restart) finds its row, and only a later checkpoint than the one known changes it."""
        if at is None:
            return None
        found = self.filter(job=job, preempted_at=at).first()
        if found is None:
            run_started = self._run_before(job, at)
            found, created = self.get_or_create(job=job, preempted_at=at, defaults=dict(
                reason=reason[:64], by_job=by_job, by_team_id=by_job.team_id if by_job else None,
                by_priority=by_job.priority.name if by_job and by_job.priority_id else "",
                run_started_at=run_started, checkpoint_at=checkpoint,
                lost_gpu_hours=lost_gpu_hours(job, max(filter(None, (run_started, checkpoint))), at)
                if run_started else Decimal(0)))
            if created:
                return found
        if checkpoint is not None and (found.checkpoint_at is None or checkpoint > found.checkpoint_at):
            found.checkpoint_at = checkpoint
            start = max(filter(None, (found.run_started_at, checkpoint)))
            found.lost_gpu_hours = lost_gpu_hours(job, start, at) if found.run_started_at else Decimal(0)
            type(found).objects.filter(pk=found.pk).update(checkpoint_at=checkpoint, lost_gpu_hours=found.lost_gpu_hours)
        return found


    def _run_before(self, job, at):
        """When the run this eviction ended began: the latest of the job's run admission, its
        first admission and its previous preemption that came before it (the eviction may be
        read after Kueue admitted the job again, or after an earlier eviction nobody read)."""
        previous = self.filter(job=job, preempted_at__lt=at).aggregate(last=models.Max("preempted_at"))["last"]
        starts = [t for t in (job.run_admitted_at, job.admitted_at, previous) if t is not None and t <= at]
        return max(starts) if starts else None


class Preemption(models.Model):
    """One preemption of a job: when, by which job (of which team, at which priority), and the
    GPU-hours it lost since its last checkpoint (else since this run was admitted), charged to
    the preemptor's team."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="preemptions")
    preempted_at = models.DateTimeField(help_text="When the scheduler evicted it (its Evicted condition).")
    reason = models.CharField(max_length=64, help_text="The scheduler's reason, e.g. Kueue's InClusterQueue.")
    by_job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="preemptions_caused")
    by_team = models.ForeignKey(Team, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="preemptions_charged")
    by_priority = models.CharField(max_length=63, blank=True)
    run_started_at = models.DateTimeField(null=True, blank=True)
    checkpoint_at = models.DateTimeField(null=True, blank=True,
                                         help_text="The last checkpoint the job reported (termination message).")
    lost_gpu_hours = models.DecimalField(max_digits=12, decimal_places=2, default=Decimal(0))
    recorded_at = models.DateTimeField(default=timezone.now)

    objects = PreemptionQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["-preempted_at", "-id"]
        indexes = [models.Index(fields=["preempted_at"], name="preemption_at")]
        constraints = [
            models.UniqueConstraint(fields=["job", "preempted_at"], name="preemption_once",
                                    violation_error_message="This preemption is already recorded."),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} preempted at {self.preempted_at:%Y-%m-%d %H:%M}"

    def explanation(self, tz=None) -> str:
        """The victim's sentence: who preempted it, and what it lost and who pays for it."""
        tz = tz or timezone.get_default_timezone()

        def when(moment) -> str:
            local = timezone.localtime(moment, tz)
            same_day = local.date() == timezone.localtime(self.preempted_at, tz).date()
            return f"{local:%H:%M}" if same_day else f"{local:%Y-%m-%d %H:%M}"

        if self.by_job_id is not None:
            priority = f" (priority {self.by_priority})" if self.by_priority else ""
            who = f"Preempted by {self.by_team.slug}'s job {self.by_job.name}{priority}"
            payer = f"charged to {self.by_team.slug}"
        else:
            who = f"Preempted by a workload outside the platform ({self.reason})"
            payer = "charged to no team"
        if self.run_started_at is None:
            return f"{who}; it had not started, so nothing was lost."
        since = (f"since its last checkpoint at {when(self.checkpoint_at)}"
                 if self.checkpoint_at and self.checkpoint_at > self.run_started_at
                 else f"since this run started at {when(self.run_started_at)}")
        if not self.lost_gpu_hours:
            return f"{who}; nothing was lost {since}."
        return f"{who}; {self.lost_gpu_hours} GPU-hours {since} are {payer}."
