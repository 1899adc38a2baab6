"""The job lifecycle shared by both schedulers (DESIGN.md section 6)."""

from django.db import models

from workloads import NEVER_STARTS, Phase, gates


class State(models.TextChoices):
    """What the platform says about a job: the phases every scheduler reports
    (`workloads.Phase`), and the steps only the platform knows."""

    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    QUEUED = Phase.QUEUED.value, "Queued"
    ADMITTED = Phase.ADMITTED.value, "Admitted"
    RUNNING = Phase.RUNNING.value, "Running"
    SUCCEEDED = Phase.SUCCEEDED.value, "Succeeded"
    FAILED = Phase.FAILED.value, "Failed"
    CANCELLING = "cancelling", "Cancelling"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = Phase.PREEMPTED.value, "Preempted"
    # Stopped by the platform because its GPUs sat idle (jobs.use.idle, jobs.use.reclaim).
    RECLAIMED = "reclaimed", "Reclaimed"
    # A notebook given back its GPUs and kept, with its volumes, to be started again
    # (by a person, its idle GPUs or its lifetime; docs/notebooks.md). Not final.
    STOPPED = Phase.STOPPED.value, "Stopped"


# The groups of states every part of the platform asks about; defined here only.
FINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED, State.RECLAIMED})
# Sorted: a stable migration for the constraint that names them.
FINAL_STATE_VALUES = sorted(str(s) for s in FINAL_STATES)
# Pods that hold quota: what a team uses, and what GPU-hours count.
HOLDING_QUOTA = (State.ADMITTED, State.RUNNING)
# Waiting for quota: what a team waits for, and the queue a new job joins.
WAITING_FOR_QUOTA = (State.SUBMITTED, State.QUEUED, State.PREEMPTED)
# Reasons a scheduler gives a waiting job that can never start (more than its team can ever
# use, or nothing its queue offers fits it): not ahead of anyone, not queued demand, and its card says so.
NEVER_STARTS_REASONS = NEVER_STARTS
# The reason of a submitted job the platform holds back because its submitter is at their
# per-person cap (`jobs.queue.caps`): not in any scheduler's queue, and let go by itself when the
# person's other jobs end.
AT_PERSONAL_CAP = "AtPersonalCap"
# The reason of a submitted job the platform holds back so that the first waiting job of its
# team on a flavor that reserves (`GpuFlavor.backfill`) is not delayed (`jobs.outlook.reservations`):
# let go by itself when it can start without delaying that job.
BEHIND_RESERVATION = "BehindReservation"
# A job held for one of these reasons is on the cluster already where its kind's Kueue
# integration carries an admission gate (`workloads.kinds.Integration.gated`): created with the
# reason's gate, which Kueue shows (AdmissionGated), and let go by taking the gate away
# (`workloads.gates`). Elsewhere (a Deployment, Volcano) it stays off the cluster until let go.
PLATFORM_GATES = {AT_PERSONAL_CAP: gates.MEMBER_CAP, BEHIND_RESERVATION: gates.RESERVATION}
# Not running yet: where the cluster's last warning about a job is worth showing.
NOT_STARTED = frozenset({State.SUBMITTED, State.QUEUED, State.ADMITTED})

# Allowed moves. Anything live can fail (a permanent error) or start cancelling; a
# preempted job goes back to the queue; a running job whose GPUs sat idle is reclaimed.
TRANSITIONS: dict[str, frozenset[str]] = {
    State.DRAFT: frozenset({State.SUBMITTED, State.CANCELLED}),
    State.SUBMITTED: frozenset({State.QUEUED, State.ADMITTED, State.FAILED, State.CANCELLING, State.STOPPED}),
    State.QUEUED: frozenset({State.ADMITTED, State.FAILED, State.CANCELLING, State.STOPPED}),
    State.ADMITTED: frozenset(
        {State.RUNNING, State.PREEMPTED, State.SUCCEEDED, State.FAILED, State.CANCELLING, State.STOPPED}
    ),
    State.RUNNING: frozenset({State.SUCCEEDED, State.FAILED, State.PREEMPTED, State.CANCELLING, State.RECLAIMED,
                              State.STOPPED}),
    State.PREEMPTED: frozenset({State.QUEUED, State.ADMITTED, State.FAILED, State.CANCELLING, State.STOPPED}),
    # A stopped notebook starts again (submitted anew to its queue) or is cancelled.
    State.STOPPED: frozenset({State.SUBMITTED, State.CANCELLING, State.FAILED}),
    State.CANCELLING: frozenset({State.CANCELLED, State.SUCCEEDED, State.FAILED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.CANCELLED: frozenset(),
    State.RECLAIMED: frozenset(),
}

# Which timestamp a state stamps when a job enters it (the first time only).
TIMESTAMP_ON_ENTRY = {
    State.SUBMITTED: "submitted_at",
    State.ADMITTED: "admitted_at",
    State.RUNNING: "started_at",
    State.SUCCEEDED: "finished_at",
    State.FAILED: "finished_at",
    State.CANCELLED: "finished_at",
    State.RECLAIMED: "finished_at",
}


class InvalidTransition(Exception):
    """A move the lifecycle does not allow, such as succeeded -> running."""

    def __init__(self, current: str, target: str):
        super().__init__(f"A {current} job cannot become {target}.")
        self.current, self.target = current, target


# States a job may pass through on its way to what the cluster shows, when the watcher
# missed the steps in between (a restart, a disconnect). Never a preemption: only the
# cluster says a job was preempted, so a reading that goes backwards (running -> admitted
# while workers finish one by one) is not one, and is not taken.
_NEVER_IN_PASSING = frozenset({State.CANCELLING, State.SUCCEEDED, State.FAILED, State.CANCELLED, State.PREEMPTED,
                               State.RECLAIMED, State.STOPPED})


def path(current: str, target: str) -> list[str] | None:
    """The shortest list of moves from ``current`` to ``target``; None if there is none."""
    if current == target:
        return []
    frontier, seen = [[current]], {current}
    while frontier:
        route = frontier.pop(0)
        for step in sorted(TRANSITIONS[route[-1]]):
            if step == target:
                return route[1:] + [step]
            if step not in seen and step not in _NEVER_IN_PASSING:
                seen.add(step)
                frontier.append(route + [step])
    return None
