"""GPU intervals: the stretches of time a job held a number of GPUs, the one record of what ran.

A job holds GPUs while its state holds quota (admitted, running; then cancelling until its
pods are gone, a pod placed after the cancel too), and it holds what its pods were given on
nodes: the watcher counts them
(`workloads.placed_gpus`) and every change of the count closes the open interval and opens
one with the new count. So a server of 1-3 replicas that runs one replica holds one
replica's GPUs, and two when the HPA adds a second. Until the watcher has counted, a job
that enters a holding state holds what it needs to start (`Job.gpus_to_start`).

``Job.gpus_in_use`` is the open interval's count (0 when none is open), written with it in
one transaction: what the dashboard, the quota list, the team API and the console call in
use now (`jobs.use.usage`), and what the usage page and its CSV sum over time
(`console.accounting`) are the same GPUs.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..lifecycle import HOLDING_QUOTA, State


def held_after(job, current: str, target: str, gpus: int | None) -> int:
    """GPUs ``job`` holds once it moved from ``current`` to ``target``; ``gpus``: what its pods
    hold on nodes as the watcher counts them (None: not counted). The rule of
    ``jobs.use.usage.admitted_intervals``, with the count: a state that holds quota holds the
    counted GPUs (entering one uncounted, what the job needs to start; staying in one, what
    it held); cancelling holds what its pods hold on nodes until they go (uncounted, what it
    held); any other state holds none."""
    if target in HOLDING_QUOTA:
        if gpus is not None:
            return gpus
        return job.gpus_in_use if current in HOLDING_QUOTA else job.gpus_to_start
    if target == State.CANCELLING:
        return job.gpus_in_use if gpus is None else gpus
    return 0


class GpuIntervalQuerySet(models.QuerySet):
    def move(self, job, gpus: int, at) -> None:
        """Make ``job``'s open interval say ``gpus`` from ``at`` on (called by ``Job`` when its
        count changes, in the transaction that writes ``Job.gpus_in_use``): the open one ends
        at ``at``, and one with the new count opens unless it is 0."""
        self.filter(job=job, ended_at__isnull=True).update(ended_at=at)
        if gpus:
            self.create(job=job, team_id=job.team_id, flavor_id=job.flavor_id, submitter_id=job.submitter_id,
                        gpus=gpus, started_at=at)

    def open(self):
        return self.filter(ended_at__isnull=True)


class GpuInterval(models.Model):
    """A stretch of time during which a job held ``gpus`` GPUs (see the module docstring),
    written as it happens: what the usage page and its CSV sum. ``ended_at`` is empty while
    the job still holds them."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="gpu_intervals")
    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="gpu_intervals")
    flavor = models.ForeignKey("quotas.GpuFlavor", on_delete=models.PROTECT, related_name="gpu_intervals")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="gpu_intervals",
    )
    gpus = models.PositiveIntegerField(
        help_text="GPUs the job's pods held on nodes: pods placed times GPUs per worker.")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # How far GPU use was measured (``jobs.use.gpu_use``): the sampler moves it on by a
    # compare-and-swap, so two samplers never count the same seconds twice.
    measured_until = models.DateTimeField(null=True, blank=True)

    objects = GpuIntervalQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["started_at", "id"]
        indexes = [
            models.Index(fields=["started_at"], name="gpu_interval_start"),
            models.Index(fields=["team", "started_at"], name="gpu_interval_team_start"),
            # A report's window: intervals still open or ended after its start.
            models.Index(fields=["ended_at"], name="gpu_interval_end"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["job"], condition=Q(ended_at__isnull=True), name="gpu_interval_one_open_per_job",
                violation_error_message="A job holds its GPUs in one interval at a time.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.gpus} GPUs {self.started_at:%Y-%m-%d %H:%M} - {self.ended_at or 'now'}"
