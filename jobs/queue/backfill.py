"""A reservation for the job at the head of a team's queue, and which later jobs may start
before it (backfill, as Slurm's and Maui's "EASY" scheduler does).

Kueue's BestEffortFIFO lets any later job that fits the free GPUs start at once, so a big job
can wait for ever behind a stream of small ones, and no estimate of its start holds. The
platform keeps a reservation for the first job of a team's queue on a flavor that does not fit
(the head): the time by which it surely fits, because the jobs holding the GPUs it needs
have surely ended by their maximum runtime. A later job that fits the free GPUs is let onto
the cluster only when it cannot delay the head: it surely ends before that time (its own
maximum runtime), or it needs no more than the GPUs the head leaves spare then. When a job the
head needs has no maximum runtime, no time is sure and nothing is held (BestEffortFIFO).

A job already on the cluster is never taken back: Kueue admits it whenever it fits, as
BestEffortFIFO does. So the head itself is let onto the cluster (Kueue's pending head), and
so is any job when there is no reservation; only the jobs behind a reserved head that may
not start now stay with the platform (`walk`).

Pure (no Django): the platform's release (`jobs.outlook.reservations`), the start estimate's
simulation (`jobs.queue.eta`) and the offline replay (`bench/eta.py`) decide with the same code.
Times are seconds from "now".
"""

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Reservation:
    """The head surely fits ``at`` seconds from now, leaving ``spare`` GPUs free beside it."""

    at: float
    spare: int
    need: int

    def lets_start(self, gpus: int, max_runtime: float | None, now: float = 0.0) -> bool:
        """Whether a job of ``gpus`` GPUs that fits the free GPUs at ``now`` may start without
        delaying the head."""
        return ends_before(max_runtime, now, self.at) or gpus <= self.spare

    def after(self, gpus: int, max_runtime: float | None, now: float = 0.0) -> "Reservation":
        """The reservation once such a job has started: one that may run past it takes from the spare."""
        if ends_before(max_runtime, now, self.at):
            return self
        return Reservation(self.at, self.spare - gpus, self.need)

    def longest_runtime(self, now: float = 0.0) -> float:
        """The longest maximum runtime a job starting at ``now`` may have to start before the head."""
        return max(self.at - now, 0.0)


def ends_before(max_runtime: float | None, now: float, deadline: float) -> bool:
    return max_runtime is not None and now + max_runtime <= deadline


def reserve(need: int, capacity: int, free: int, ends: list[tuple[float | None, int]]) -> Reservation | None:
    """The reservation of a head needing ``need`` GPUs of the team's ``capacity``, with ``free``
    free now and the jobs holding the rest surely ending at ``ends`` (seconds from now, None:
    no maximum runtime; GPUs each frees). None when no time is sure (a job it needs has no
    maximum runtime) or it can never fit."""
    if need > capacity:
        return None
    available, at = free, 0.0
    sure = sorted((t, gpus) for t, gpus in ends if t is not None)
    i = 0
    while available < need and i < len(sure):
        at = sure[i][0]
        while i < len(sure) and sure[i][0] == at:  # all that end at once
            available += sure[i][1]
            i += 1
    if available < need:
        return None
    return Reservation(max(at, 0.0), available - need, need)


class Decision(Enum):
    START = "start"  # fits the free GPUs and may go: the scheduler admits it now
    WAIT = "wait"  # waits on the cluster: the head, or any job when nothing is reserved
    HOLD = "hold"  # stays with the platform: it would delay the reserved head


@dataclass(frozen=True)
class Candidate:
    """A waiting job as the walk sees it, in the scheduler's order."""

    gpus: int
    max_runtime: float | None = None
    on_cluster: bool = False  # already let go: Kueue admits it when it fits, reservation or not


@dataclass(frozen=True)
class Plan:
    decisions: list[Decision]  # one per waiting job, in order
    head: int | None = None  # the index of the head: the first that does not fit
    reservation: Reservation | None = None  # the head's; None when no time is sure


def walk(capacity: int, free: int, ends: list[tuple[float | None, int]], waiting: list[Candidate],
         now: float = 0.0) -> Plan:
    """What becomes of each waiting job at ``now``: in order, a job that fits the free GPUs
    starts unless it would delay the reserved head (and is not on the cluster already); the
    first that does not fit is the head, reserved for; the others wait on the cluster when
    nothing is reserved, else with the platform. ``ends``: when the jobs holding GPUs surely
    end (absolute times, as ``now``; None: no maximum runtime), and the GPUs each frees."""
    decisions, reservation, head, ends = [], None, None, list(ends)
    for i, job in enumerate(waiting):
        if job.gpus <= free and (job.on_cluster or reservation is None
                                 or reservation.lets_start(job.gpus, job.max_runtime, now)):
            free -= job.gpus
            if reservation is not None:
                reservation = reservation.after(job.gpus, job.max_runtime, now)
            else:
                ends.append((None if job.max_runtime is None else now + job.max_runtime, job.gpus))
            decisions.append(Decision.START)
        elif head is None and job.gpus > free:
            head = i
            reservation = reserve(job.gpus, capacity, free, ends)
            decisions.append(Decision.WAIT)
        else:
            decisions.append(Decision.WAIT if job.on_cluster or reservation is None else Decision.HOLD)
    return Plan(decisions, head, reservation)
