"""GPU use: what a job's GPUs did while it held them, measured, a row per GPU interval and day.

``GpuInterval`` says how many GPUs a job held and when (allocated GPU time). ``GpuUse`` adds,
for each interval and calendar day (in the platform's time zone, the accounting's days), how
much of that allocated GPU time was measured, how much of it the GPUs were busy (used) and
how much they sat idle. The rule that turns utilization into these numbers, and the sampler
that writes them, are ``jobs.use.gpu_use``; the accounting (``console.accounting``) sums them
beside the allocated GPU-hours. Kept in the database, not asked of Prometheus when a report
is read: a month's report stays what it was once Prometheus has forgotten the month, and it
costs one aggregate whatever the number of jobs.
"""

from django.conf import settings
from django.db import models
from django.db.models import F


class GpuUseQuerySet(models.QuerySet):
    def add(self, interval, day, *, measured: float, used: float, idle: float) -> None:
        """Add GPU-seconds to ``interval``'s row of ``day`` (created at its first sample)."""
        row, created = self.get_or_create(
            interval=interval, day=day,
            defaults={"team_id": interval.team_id, "flavor_id": interval.flavor_id,
                      "submitter_id": interval.submitter_id, "measured_gpu_seconds": measured,
                      "used_gpu_seconds": used, "idle_gpu_seconds": idle})
        if not created:
            self.filter(pk=row.pk).update(measured_gpu_seconds=F("measured_gpu_seconds") + measured,
                                          used_gpu_seconds=F("used_gpu_seconds") + used,
                                          idle_gpu_seconds=F("idle_gpu_seconds") + idle)


class GpuUse(models.Model):
    """Measured GPU-seconds of one GPU interval on one day: ``measured`` (allocated GPU time
    with a measurement), ``used`` (measured time x utilization) and ``idle`` (measured time
    of GPUs below the idle threshold); ``jobs.use.gpu_use`` defines them."""

    interval = models.ForeignKey("jobs.GpuInterval", on_delete=models.CASCADE, related_name="uses")
    # The interval's, copied so the report groups without a join (as GpuInterval copies the job's).
    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="gpu_uses")
    flavor = models.ForeignKey("quotas.GpuFlavor", on_delete=models.PROTECT, related_name="gpu_uses")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="gpu_uses",
    )
    day = models.DateField(help_text="The calendar day, in the platform's time zone.")
    measured_gpu_seconds = models.FloatField(default=0.0)
    used_gpu_seconds = models.FloatField(default=0.0)
    idle_gpu_seconds = models.FloatField(default=0.0)

    objects = GpuUseQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["day", "id"]
        indexes = [models.Index(fields=["day", "team"], name="gpu_use_day_team")]
        constraints = [
            models.UniqueConstraint(fields=["interval", "day"], name="gpu_use_one_per_interval_day",
                                    violation_error_message="One row of GPU use per interval and day."),
            models.CheckConstraint(
                condition=models.Q(used_gpu_seconds__lte=F("measured_gpu_seconds") + 1e-6,
                                   idle_gpu_seconds__lte=F("measured_gpu_seconds") + 1e-6),
                name="gpu_use_within_measured",
                violation_error_message="Used and idle GPU time cannot exceed the measured GPU time."),
        ]

    def __str__(self) -> str:
        return f"interval {self.interval_id} on {self.day}: {self.used_gpu_seconds:.0f} of {self.measured_gpu_seconds:.0f} GPU-s used"
