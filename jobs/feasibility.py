"""Will a job start, queue, or never run? And where does a waiting job stand in its queue?

Model-level rules the web UI asks before a submission and on job pages; computed from
the team's quota (nominal and what it can borrow), the GPUs held by its admitted and
running jobs, the queue of its waiting jobs, and the flavor's node size. The scheduler has
the last word; this is the honest estimate a researcher sees before pressing Submit.
"""

from dataclasses import dataclass

from django.db.models import F, Q
from django.db.models.functions import Coalesce

from .lifecycle import WAITING_FOR_QUOTA
from .models import Job
from .usage import usage_of

def _priority_value(job: Job) -> int:
    # Kueue gives workloads without a priority class the value 0.
    return job.priority.value if job.priority_id else 0


def _waiting_ahead(team, flavor, priority: int, *, before=None):
    """The team's waiting jobs on ``flavor`` that the scheduler considers first:
    higher priority, or the same priority and submitted earlier."""
    waiting = Job.objects.filter(team=team, flavor=flavor, state__in=WAITING_FOR_QUOTA)
    priority_value = Coalesce(F("priority__value"), 0)
    waiting = waiting.alias(pv=priority_value)
    if before is None:  # a new job: everything waiting at its priority or above is ahead
        return waiting.filter(pv__gte=priority)
    return waiting.exclude(pk=before.pk).filter(
        Q(pv__gt=priority) | Q(pv=priority, created_at__lt=before.created_at)
        | Q(pv=priority, created_at=before.created_at, pk__lt=before.pk)
    )


def queue_position(job: Job) -> int | None:
    """How many of the team's jobs wait ahead of ``job`` on its flavor; None if not waiting."""
    if job.state not in WAITING_FOR_QUOTA:
        return None
    return _waiting_ahead(job.team, job.flavor, _priority_value(job), before=job).count()


def _jobs_ahead(job: Job, usage) -> int:
    # ``usage`` counted the team's waiting jobs on the flavor, this one too if it waits:
    # with no other, none is ahead and the queue need not be read.
    itself = 1 if job.pk and job.state in WAITING_FOR_QUOTA else 0
    if usage.queued <= itself:
        return 0
    return _waiting_ahead(job.team, job.flavor, _priority_value(job), before=job if job.pk else None).count()


@dataclass(frozen=True)
class Feasibility:
    verdict: str  # "now" | "queue" | "never"
    message: str
    jobs_ahead: int = 0
    in_use: int = 0
    capacity: int = 0

    NOW = "now"
    QUEUE = "queue"
    NEVER = "never"


def assess(job: Job) -> Feasibility:
    """Whether an unsaved (or waiting) ``job`` starts now, queues, or can never run."""
    flavor, team = job.flavor, job.team
    if job.gpus_per_worker > flavor.gpus_per_node:
        return Feasibility(
            Feasibility.NEVER,
            f"Can never run: {job.gpus_per_worker} GPUs per worker but nodes of this flavor "
            f"have {flavor.gpus_per_node}.",
        )
    usage = usage_of(team, flavor)
    need = job.total_gpus
    if usage.quota is None:
        return Feasibility(Feasibility.NEVER, f"Can never run: team {team.slug} has no quota on {flavor.name}.")
    if need > usage.ceiling:
        return Feasibility(
            Feasibility.NEVER,
            f"Can never run: it needs {need} GPUs but team {team.slug} can use at most "
            f"{usage.ceiling} on {flavor.name}, borrowing included.",
            in_use=usage.in_use, capacity=usage.ceiling,
        )
    ahead = _jobs_ahead(job, usage)
    in_use = f"{usage.in_use} of {usage.nominal} GPUs in use"
    if ahead == 0 and usage.in_use + need <= usage.nominal:
        return Feasibility(Feasibility.NOW, f"Starts now: {need} GPUs fit in the free quota ({in_use}).",
                           in_use=usage.in_use, capacity=usage.nominal)
    if ahead == 0 and usage.in_use + need <= usage.ceiling:
        borrow = usage.in_use + need - usage.nominal
        return Feasibility(
            Feasibility.NOW,
            f"Starts now if the cohort has {borrow} idle GPUs to lend ({in_use}); otherwise it queues.",
            in_use=usage.in_use, capacity=usage.nominal,
        )
    jobs = "job" if ahead == 1 else "jobs"
    return Feasibility(
        Feasibility.QUEUE, f"Will queue: {ahead} {jobs} ahead, {in_use}.",
        jobs_ahead=ahead, in_use=usage.in_use, capacity=usage.nominal,
    )
