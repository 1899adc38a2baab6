"""The platform's side of a flavor's reservations (`GpuFlavor.backfill`, `jobs.queue.backfill`):
which of a team's waiting jobs on the flavor the platform keeps back so that the first one
that does not fit (the head) surely starts when the jobs holding its GPUs reach their maximum
runtime, and letting them go when they can start without delaying it.

A job kept back is submitted, with the reason ``BEHIND_RESERVATION``: never admitted (Kueue
would admit it whenever it fits, so it waits behind the platform's Kueue admission gate where
its kind carries one, `workloads.gates`, and is not created elsewhere), still in the team's
queue (its position, its start estimate). It is let go (`jobs.tasks.release_reserved`) by the
on-commit trigger of a job of the team on the flavor that is admitted or ends
(`jobs.receivers`), or by the sweep's reconcile of the held job itself, which takes its gate off. Every decision is taken with the team's row locked
(`jobs.queue.caps.lock_team`), as the personal caps' are.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from ..lifecycle import BEHIND_RESERVATION, HOLDING_QUOTA, State
from ..models import Job
from ..queue import backfill, eta, looks
from ..queue.queueing import START_GPUS
from ..use.usage import usage_of

BEHIND = Q(state=State.SUBMITTED, reason=BEHIND_RESERVATION)
RELEASED = {"reason": "Submitted", "message": "It can start without delaying the reserved job: sent to the cluster."}


@dataclass(frozen=True)
class Walk:
    """The team's waiting jobs on a flavor with what becomes of each now (`backfill.walk`), the
    head and its reservation."""

    jobs: list[Job]
    decisions: list[backfill.Decision]
    head: Job | None
    reservation: backfill.Reservation | None
    free: int
    admitting: Job | None = None  # the first job on the cluster that fits, not admitted yet
    awaiting: frozenset[int] = frozenset()  # indices of jobs held until ``admitting`` is admitted

    def _index(self, job: Job) -> int | None:
        for i, other in enumerate(self.jobs):
            if other is job or (job.pk is not None and other.pk == job.pk):
                return i
        return None

    def decision(self, job: Job) -> backfill.Decision | None:
        i = self._index(job)
        return None if i is None else self.decisions[i]

    def awaits_admission(self, job: Job) -> bool:
        return self._index(job) in self.awaiting


def _sure_end(job: Job, now: datetime) -> float | None:
    """Seconds from ``now`` by which a job holding GPUs has surely ended: its maximum runtime
    counted from its admission, as Kueue counts it; None without one."""
    began = job.run_admitted_at or job.admitted_at
    if not job.max_runtime_seconds or began is None:
        return None
    return max(job.max_runtime_seconds - (now - began).total_seconds(), 0.0)


def walk(team, flavor, *, adding: Job | None = None, now: datetime | None = None) -> Walk:
    """What becomes of the team's waiting jobs on ``flavor`` now, ``adding`` (a job not saved
    yet) among them after those of its priority or above. Walked once per look (`jobs.queue.looks`)."""
    if now is not None:
        return _walk(team, flavor, adding, now)
    return looks.remembered(("walk", team.pk, flavor.pk, id(adding)),
                            lambda: _walk(team, flavor, adding, timezone.now()))


def _walk(team, flavor, adding: Job | None, now: datetime) -> Walk:
    usage = usage_of(team, flavor)
    holders = list(Job.objects.filter(team=team, flavor=flavor, state__in=[*HOLDING_QUOTA, State.CANCELLING])
                   .annotate(size=START_GPUS))
    held = sum(h.gpus_in_use or h.size for h in holders)
    capacity = min(max(usage.nominal, held), usage.ceiling)
    queue = Job.objects.queue_of(team, flavor, usage.ceiling)
    jobs = list(queue)
    if adding is not None:
        ahead = queue.ahead(adding).count()
        jobs.insert(ahead, adding)
    let_go = [j is not adding and not j.behind_reservation for j in jobs]  # on the cluster already
    plan = backfill.walk(
        capacity, capacity - held, [(_sure_end(h, now), h.gpus_in_use or h.size) for h in holders],
        [backfill.Candidate(j.gpus_to_start, j.max_runtime_seconds, on_cluster=on)
         for j, on in zip(jobs, let_go, strict=True)])
    head = jobs[plan.head] if plan.head is not None and plan.reservation is not None else None
    decisions, admitting, awaiting = list(plan.decisions), None, set()
    for i, (job, on_cluster, decision) in enumerate(zip(jobs, let_go, plan.decisions, strict=True)):
        if on_cluster and decision is backfill.Decision.START and admitting is None:
            admitting = job
        elif not on_cluster and admitting is not None and decision is not backfill.Decision.HOLD:
            # The walk says Kueue admits ``admitting`` now, but Kueue may not have seen the GPUs
            # freed yet (a job it stopped still counts until its workload lets go): one let go
            # now could fit what Kueue sees free and pass it. It goes once that one is admitted.
            decisions[i] = backfill.Decision.HOLD
            awaiting.add(i)
    return Walk(jobs, decisions, head, plan.reservation, capacity - held, admitting, frozenset(awaiting))


def hold_message(job: Job, walk: Walk) -> str:
    """Why ``job`` is kept back, and what would let it start now."""
    head, reservation = walk.head, walk.reservation
    if walk.awaits_admission(job):
        return (f"Job {walk.admitting.name}, which waits ahead of it, fits the GPUs freed now: this job is sent to "
                "the cluster once Kueue has admitted that one.")
    reserved = (f"{head.gpus_to_start} GPUs are reserved for job {head.name}, which waits ahead of it and "
                f"starts in {eta.words(reservation.at)} at the latest")
    if job.gpus_to_start > walk.free:
        return f"{reserved}. It is sent to the cluster when it can start without delaying that job."
    gap = _longest_runtime(reservation) if takes_a_runtime(job) else None
    shorter = (f" With a maximum runtime of {eta.words(gap)} or less it would start now." if gap
               else "")
    return (f"{reserved}. {walk.free} GPUs are free now, but this job could still hold them then.{shorter} "
            "Otherwise it is sent to the cluster when it can start without delaying that job.")


def takes_a_runtime(job: Job) -> bool:
    """Whether ``job``'s kind has a maximum runtime (a server or a Ray cluster runs until cancelled)."""
    return "max_runtime_seconds" in job.work_kind.takes


def _longest_runtime(reservation: backfill.Reservation) -> int | None:
    """The longest whole-minute maximum runtime a job starting now may have to go before the
    head; None under a minute."""
    minutes = int(reservation.longest_runtime() // 60)
    return minutes * 60 if minutes else None


def gap_for(job: Job) -> int | None:
    """For a waiting ``job`` the reservation keeps back though it fits now: the longest maximum
    runtime (seconds) with which it would start now; None otherwise."""
    if not job.flavor.backfill or not takes_a_runtime(job):
        return None
    found = walk(job.team, job.flavor, adding=job if job.pk is None else None)
    if (found.decision(job) is not backfill.Decision.HOLD or found.awaits_admission(job)
            or job.gpus_to_start > found.free):
        return None
    return _longest_runtime(found.reservation)


def verdict(job: Job) -> dict[str, str] | None:
    """With the team locked: the reason and message a new ``job`` (or a draft sent on) is kept
    back with, None when it may go to the cluster now."""
    if not job.flavor.backfill:
        return None
    why = _why_kept(job, adding=job)
    return {"reason": BEHIND_RESERVATION, "message": why} if why else None


def holds(job: Job) -> str | None:
    """Why the platform keeps ``job`` (kept back already, or not saved yet) back now; None when
    it does not (the scheduler decides)."""
    if not job.flavor.backfill or (job.pk is not None and not job.behind_reservation):
        return None
    return _why_kept(job, adding=job if job.pk is None else None)


def _why_kept(job: Job, *, adding: Job | None) -> str | None:
    found = walk(job.team, job.flavor, adding=adding)
    return hold_message(job, found) if found.decision(job) is backfill.Decision.HOLD else None


def waiting_flavors(team_id: int) -> list[int]:
    """Flavors on which the team has jobs kept back."""
    return list(Job.objects.filter(BEHIND, team_id=team_id).order_by().values_list("flavor_id", flat=True).distinct())
