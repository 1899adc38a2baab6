"""The job lifecycle shared by both schedulers (DESIGN.md section 6)."""

from django.db import models


class State(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLING = "cancelling", "Cancelling"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"


FINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})

# Allowed moves. Anything live can fail (a permanent error) or start cancelling; a
# preempted job goes back to the queue.
TRANSITIONS: dict[str, frozenset[str]] = {
    State.DRAFT: frozenset({State.SUBMITTED, State.CANCELLED}),
    State.SUBMITTED: frozenset({State.QUEUED, State.ADMITTED, State.FAILED, State.CANCELLING}),
    State.QUEUED: frozenset({State.ADMITTED, State.FAILED, State.CANCELLING}),
    State.ADMITTED: frozenset(
        {State.RUNNING, State.PREEMPTED, State.SUCCEEDED, State.FAILED, State.CANCELLING}
    ),
    State.RUNNING: frozenset({State.SUCCEEDED, State.FAILED, State.PREEMPTED, State.CANCELLING}),
    State.PREEMPTED: frozenset({State.QUEUED, State.ADMITTED, State.FAILED, State.CANCELLING}),
    State.CANCELLING: frozenset({State.CANCELLED, State.SUCCEEDED, State.FAILED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.CANCELLED: frozenset(),
}

# Which timestamp a state stamps when a job enters it (the first time only).
TIMESTAMP_ON_ENTRY = {
    State.SUBMITTED: "submitted_at",
    State.ADMITTED: "admitted_at",
    State.RUNNING: "started_at",
    State.SUCCEEDED: "finished_at",
    State.FAILED: "finished_at",
    State.CANCELLED: "finished_at",
}


class InvalidTransition(Exception):
    """A move the lifecycle does not allow, such as succeeded -> running."""

    def __init__(self, current: str, target: str):
        super().__init__(f"A {current} job cannot become {target}.")
        self.current, self.target = current, target
