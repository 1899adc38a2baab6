"""What still runs on a drained pool, when each should end, and when the pool will be empty
(docs/drain.md). Read-only.

A job's end is its maximum runtime counted as its scheduler counts it: Kueue from the
Workload's admission (`Job.runtime_left`), Volcano from its pods' start (activeDeadlineSeconds).
A job without one (an inference server) has no end the platform can promise: the pool is then
empty only when its owner stops it, and the page says so.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from ..lifecycle import State
from ..models import Job

# On the pool's nodes now (or about to be): what keeps it from being empty.
ON_THE_POOL = (State.ADMITTED, State.RUNNING, State.CANCELLING)
# Waiting for the pool: held by Kueue's stopPolicy until it reopens.
WAITING = (State.SUBMITTED, State.QUEUED, State.PREEMPTED)


@dataclass(frozen=True)
class Running:
    job: Job
    ends_at: datetime | None  # None: no maximum runtime

    def after(self, deadline) -> bool:
        return self.ends_at is None or self.ends_at > deadline


@dataclass(frozen=True)
class PoolState:
    running: list[Running]
    waiting: int
    empty_at: datetime | None  # None: a job without an end still runs
    now: datetime

    @property
    def empty(self) -> bool:
        return not self.running

    def overdue(self, deadline) -> list[Running]:
        """Jobs that may still run at the deadline (admitted before the drain was declared)."""
        return [row for row in self.running if row.after(deadline)]


def ends_at(job: Job, now: datetime) -> datetime | None:
    if not job.max_runtime_seconds:
        return None
    kueue = job.flavor.scheduler == "kueue"
    start = (job.admitted_at if kueue else job.started_at) or job.admitted_at or now
    return start + timedelta(seconds=job.max_runtime_seconds)


def on_pool(drain, now=None) -> PoolState:
    """The jobs on the drained flavor, the end of each, and when the last one ends."""
    now = now or timezone.now()
    jobs = (Job.objects.filter(flavor_id=drain.flavor_id, state__in=ON_THE_POOL)
            .select_related("team", "flavor", "submitter").order_by("admitted_at", "pk"))
    running = [Running(job, ends_at(job, now)) for job in jobs]
    running.sort(key=lambda row: (row.ends_at is None, row.ends_at or now, row.job.pk))
    waiting = Job.objects.filter(flavor_id=drain.flavor_id, state__in=WAITING).count()
    if not running:
        empty_at = now
    elif any(row.ends_at is None for row in running):
        empty_at = None
    else:
        empty_at = max(row.ends_at for row in running)
    return PoolState(running, waiting, empty_at, now)
