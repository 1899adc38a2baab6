"""Will a job start, queue, or never run? And where does a waiting job stand in its queue?

Kueue's word first: once Kueue has said why it does not admit a waiting job (its reason, kept
on the job: `workloads.kueue_words`), the verdict is Kueue's, and what follows is what the
platform adds. Before that (an unsaved job, a job Kueue has not looked at yet, another
scheduler), the verdict is the platform's model.

Model-level rules the web UI asks before a submission and on job pages; computed from
the team's quota (nominal and what it can borrow), the GPUs its jobs' pods hold now
(`jobs.use.usage`), the queue of its waiting jobs as the scheduler orders it (`jobs.queue.queueing`),
and the flavor's node size; then from the free GPUs per node (and per rack or block), which a
quota's free GPUs may not match (`jobs.outlook.fragmentation`). The scheduler has the last word; this is the honest estimate a
researcher sees before pressing Submit.

The queues are BestEffortFIFO: the jobs ahead are considered first, and each that fits what
is free takes it, but one that does not fit blocks no one behind it. So a job that fits
what the jobs ahead leave starts now, however many wait ahead of it, unless its flavor
reserves for the first waiting job and it would delay that one (`jobs.outlook.reservations`); a job
that can never start is never ahead of anyone.
"""

from dataclasses import dataclass, replace
from datetime import datetime

from ..lifecycle import NEVER_STARTS_REASONS, WAITING_FOR_QUOTA
from ..models import Job
from ..queue import looks
from ..use.usage import usage_of
from . import fragmentation, pending, reservations


@dataclass(frozen=True)
class Place:
    """Where a waiting job stands in its queue. ``ahead``: the jobs that may start before it,
    as GPU Platform counts them, in Kueue's own order when its visibility API lists the job
    (``in_kueue_order``), else in the same order from the database. ``kueue_position``: Kueue's
    own ``positionInClusterQueue``, verbatim (every pending workload before it, those that can
    never start too); None when Kueue did not say."""

    ahead: int
    in_kueue_order: bool = False
    kueue_position: int | None = None


@looks.one_look()  # Kueue's pending list, read once for both numbers
def place(job: Job, cluster=None) -> Place | None:
    """``job``'s place in its queue; None if it does not wait or can never start."""
    counted = job.queue_position()
    if counted is None:
        return None
    seen = pending.position(job, cluster)
    if seen is None:
        return Place(counted)
    return Place(seen, True, pending.kueue_position(job, cluster))


def queue_position(job: Job, cluster=None) -> int | None:
    """How many of the team's jobs the scheduler considers before ``job`` on its flavor, of
    those that may start; None if it does not wait or can never start (`place`)."""
    found = place(job, cluster)
    return None if found is None else found.ahead


@dataclass(frozen=True)
class Feasibility:
    verdict: str  # "now" | "queue" | "never"
    message: str
    jobs_ahead: int = 0
    in_use: int = 0
    capacity: int = 0
    # The jobs whose end makes room on the nodes, and when the last is due (if known).
    waits_for: tuple = ()
    room_by: datetime | None = None
    # Kueue's own reason and message for not admitting the job, verbatim, when it gave one:
    # then the verdict is Kueue's (`_kueue_first`) and ``message`` is what GPU Platform adds.
    kueue_reason: str = ""
    kueue_message: str = ""

    NOW = "now"
    QUEUE = "queue"
    NEVER = "never"


def _sizes_ahead(job: Job, usage) -> list[int]:
    # ``usage`` counted the team's waiting jobs on the flavor that may start, this one too
    # if it waits: with no other, none is ahead and the queue need not be read.
    itself = 1 if job.pk and job.state in WAITING_FOR_QUOTA else 0
    if usage.queued <= itself:
        return []
    return Job.objects.start_sizes_ahead(job, usage.ceiling)


def assess(job: Job, cluster=None) -> Feasibility:
    """Whether an unsaved (or waiting) ``job`` starts now, queues, or can never run: Kueue's
    answer when it gave one for the job (`_kueue_first`), else the platform's model: the quota's
    answer, then the nodes' (`jobs.outlook.fragmentation`, when the cluster can be read)."""
    return _kueue_first(job, _by_model(job, cluster))


def _kueue_first(job: Job, ours: Feasibility) -> Feasibility:
    """Kueue's reason for not admitting a waiting job, when it gave one, decides: never for a
    reason that never starts as it is (ExceedsMaxQuota, NoMatchingFlavor: `workloads.kueue_words`),
    else it queues. The model's numbers stay; its sentence too when it agrees, else the
    platform's reading of Kueue's words (the job's message)."""
    if job.pk is None or not job.kueue_reason or job.state not in WAITING_FOR_QUOTA:
        return ours
    verdict = Feasibility.NEVER if job.reason in NEVER_STARTS_REASONS else Feasibility.QUEUE
    message = ours.message if ours.verdict == verdict else job.message
    return replace(ours, verdict=verdict, message=message, kueue_reason=job.kueue_reason,
                   kueue_message=job.kueue_message)


def _by_model(job: Job, cluster=None) -> Feasibility:
    verdict = _by_quota(job)
    if verdict.verdict == Feasibility.NEVER or (job.pk and job.at_personal_cap):
        return verdict
    room = fragmentation.assess(job, cluster)
    if room is None or room.verdict == fragmentation.NOW:
        return verdict
    if room.verdict == fragmentation.NEVER:
        return Feasibility(Feasibility.NEVER, room.message, in_use=verdict.in_use, capacity=verdict.capacity)
    # The quota has room (or the job queues for it anyway): the nodes say what else it waits for.
    message = (f"Will queue for room on the nodes: {room.message}" if verdict.verdict == Feasibility.NOW
               else f"{verdict.message} {room.message}")
    return replace(verdict, verdict=Feasibility.QUEUE, message=message, waits_for=room.waits_for, room_by=room.room_by)


def _by_quota(job: Job) -> Feasibility:
    flavor, team = job.flavor, job.team
    if job.gpus_per_worker > flavor.gpus_per_node:
        return Feasibility(
            Feasibility.NEVER,
            f"Can never run: {job.gpus_per_worker} GPUs per worker but nodes of this flavor "
            f"have {flavor.gpus_per_node}.",
        )
    usage = usage_of(team, flavor)
    return _never_within_quota(job, usage) or _held_back(job, usage) or _in_the_queue(job, usage)


def _never_within_quota(job: Job, usage) -> Feasibility | None:
    """NEVER when the team has no quota on the flavor, or the job needs more than it may borrow."""
    flavor, team, need = job.flavor, job.team, job.gpus_to_start
    if usage.quota is None:
        return Feasibility(Feasibility.NEVER, f"Can never run: team {team.slug} has no quota on {flavor.name}.")
    if need > usage.ceiling:
        return Feasibility(
            Feasibility.NEVER,
            f"Can never run: it needs {job.need_words(need)} but team {team.slug} can use at most "
            f"{usage.ceiling} on {flavor.name}, borrowing included.",
            in_use=usage.in_use, capacity=usage.ceiling,
        )
    return None


def _held_back(job: Job, usage) -> Feasibility | None:
    """QUEUE when something other than the quota's free GPUs holds the job: a drain, its
    submitter's cap, or a reservation for the first waiting job."""
    flavor = job.flavor
    if (drain := flavor.open_drain()) is not None and drain.holds_queues:  # docs/drain.md
        return Feasibility(Feasibility.QUEUE, drain.waiting_message(), in_use=usage.in_use, capacity=usage.nominal)
    if job.pk and job.at_personal_cap:  # not in the queue yet: waits for its submitter's other jobs
        return Feasibility(Feasibility.QUEUE, job.message, in_use=usage.in_use, capacity=usage.nominal)
    if flavor.backfill and (kept := reservations.holds(job)):  # fits, but would delay the reserved job
        return Feasibility(Feasibility.QUEUE, f"Will queue: {kept}", in_use=usage.in_use, capacity=usage.nominal)
    return None


def _in_the_queue(job: Job, usage) -> Feasibility:
    """NOW or QUEUE from what the jobs ahead leave of the free quota, and what the team may borrow."""
    need = job.gpus_to_start
    sizes = _sizes_ahead(job, usage)
    # The scheduler's pass over the queue: each job ahead that fits the free quota takes its
    # GPUs first; one that does not fit is set aside and blocks no one.
    free, first = usage.nominal - usage.in_use, 0
    for size in sizes:
        if size <= free:
            free, first = free - size, first + 1
    in_use = f"{usage.in_use} of {usage.nominal} GPUs in use"
    if need <= free:
        return Feasibility(Feasibility.NOW, f"Starts now: {job.need_words(need)} fit in the free quota ({in_use}).",
                           jobs_ahead=first, in_use=usage.in_use, capacity=usage.nominal)
    taken = usage.nominal - usage.in_use - free  # by the jobs ahead that fit first
    if usage.in_use + taken + need <= usage.ceiling:
        borrow = usage.in_use + taken + need - usage.nominal
        return Feasibility(
            Feasibility.NOW,
            f"Starts now if the cohort has {borrow} idle GPUs to lend ({in_use}); otherwise it queues.",
            jobs_ahead=first, in_use=usage.in_use, capacity=usage.nominal,
        )
    ahead = len(sizes)
    jobs = "job" if ahead == 1 else "jobs"
    return Feasibility(
        Feasibility.QUEUE, f"Will queue: {ahead} {jobs} ahead, {in_use}.",
        jobs_ahead=ahead, in_use=usage.in_use, capacity=usage.nominal,
    )
