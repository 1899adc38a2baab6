"""EtaEstimate: every start estimate the platform gave a waiting job (`jobs.outlook.estimates`), kept
so that, once the job starts, its error is known: the accuracy page of the console and the
calibration of later estimates (`jobs.queue.eta.Calibration`) read them.

Seconds are counted from ``made_at``; the raw figures are the simulation's before the
calibration, what the calibration learns from. The actual wait is the job's own record
(`Job.run_admitted_at`), not copied here.
"""

from django.db import models

from quotas.models import GpuFlavor


class EtaEstimate(models.Model):
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="eta_estimates")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE, related_name="+")
    made_at = models.DateTimeField(db_index=True)
    p10_seconds = models.FloatField()
    p50_seconds = models.FloatField()
    p90_seconds = models.FloatField()
    raw_p10_seconds = models.FloatField()
    raw_p50_seconds = models.FloatField()
    raw_p90_seconds = models.FloatField()
    # Position over the queue's admissions of the last hour, for the page's comparison.
    naive_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-made_at", "-id"]
        indexes = [models.Index(fields=["flavor", "-made_at"], name="eta_flavor_recent")]
        constraints = [models.CheckConstraint(
            condition=models.Q(p10_seconds__lte=models.F("p50_seconds"), p50_seconds__lte=models.F("p90_seconds")),
            name="eta_estimate_ordered", violation_error_message="An estimate has p10 <= p50 <= p90.")]

    def __str__(self) -> str:
        return f"ETA of job {self.job_id} at {self.made_at:%Y-%m-%d %H:%M}"
