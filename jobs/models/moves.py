"""How a job moves through its lifecycle: compare-and-swap transitions, what the watcher
observes, and the events and GPU intervals each move writes (`Job` takes these methods)."""

from django.db import models, transaction
from django.utils import timezone

from workloads.gates import ADMISSION_GATED

from ..lifecycle import (
    FINAL_STATES,
    HOLDING_QUOTA,
    TIMESTAMP_ON_ENTRY,
    TRANSITIONS,
    WAITING_FOR_QUOTA,
    InvalidTransition,
    State,
    path,
)
from ..signals import job_reason_changed
from .intervals import GpuInterval, held_after

# What a cancel's end says (`JobMoves.end_cancel`).
CANCEL_ENDED = "Stopped and removed from the cluster."
# Why a new job is submitted: its first event, and its reason and message until the cluster tells more.
SUBMITTED_BECAUSE = {"reason": "Submitted", "message": "Waiting for the cluster."}


class JobMoves:
    """The lifecycle's writes, mixed into `jobs.models.Job` (its fields: state, reason,
    message, the timestamps, ``gpus_in_use``)."""

    def transition(self, target: str, *, reason: str = "", message: str = "", at=None, gpus: int | None = None) -> bool:
        """Move to ``target`` if the row is still in the state this instance saw.

        A compare-and-swap: when two workers race from the same state, exactly one update
        matches and records its event; the loser gets ``False`` and changes nothing.
        Raises ``InvalidTransition`` for moves the lifecycle forbids. ``gpus``: what the job's
        pods hold on nodes, when the watcher counted them (`jobs.models.intervals.held_after`).
        """
        current = self.state
        if target not in TRANSITIONS[current]:
            raise InvalidTransition(current, target)
        at = at or timezone.now()
        changes = {"state": target, "reason": reason, "message": message, "updated_at": at}
        stamp = TIMESTAMP_ON_ENTRY.get(target)
        if stamp and getattr(self, stamp) is None:
            changes[stamp] = at
        if target == State.ADMITTED:  # every run, not the first only
            changes["run_admitted_at"] = at
        if target not in WAITING_FOR_QUOTA:  # Kueue's words say why it waits: no longer (`hear_kueue`)
            changes.update(kueue_reason="", kueue_message="")
        held = held_after(self, current, target, gpus)
        if held != self.gpus_in_use:
            changes["gpus_in_use"] = held
        with transaction.atomic(savepoint=False):  # an error here fails the caller's transaction too
            won = type(self)._default_manager.filter(pk=self.pk, state=current).update(**changes)
            if not won:
                return False
            self._record(current, target, reason=reason, message=message, at=at, held=held)
        for field, value in changes.items():
            setattr(self, field, value)
        return True

    def _record(self, current: str, target: str, *, reason: str, message: str, at, held: int = 0) -> None:
        """The event of a move, and the GPU interval it opens, closes or resizes (in the
        caller's transaction, before this instance takes the new ``gpus_in_use``)."""
        JobEvent.objects.create(job=self, created_at=at, from_state=current, to_state=target,
                                reason=reason, message=message)
        if held != self.gpus_in_use:
            GpuInterval.objects.move(self, held, at)

    def observe(self, target: str, *, reason: str, message: str, gpus: int | None = None, at=None,
                times=None) -> bool:
        """Bring the row to what the cluster shows; write only when something changed.

        Steps the watcher did not see (queued -> admitted -> running) are recorded on the
        way, so the timeline and the timestamps stay whole. A job being cancelled ignores
        everything but an end, and the GPUs its pods give back on the way (``gpus``: what
        they hold on nodes, None when not counted). ``times``: when the cluster says each
        phase began (`workloads.Observation.times`); ``at``: when it was seen (now by default).
        """
        if self.state == target:
            return self._update_in_place(reason, message, gpus, at)
        if self.state == State.CANCELLING and target not in FINAL_STATES:
            # Its pods hold what they hold until they go, a pod placed after the cancel too
            # (a server's replica the scheduler starts meanwhile); a job that held nothing is
            # charged nothing for pods a waiting phase shows, as before the cancel.
            counted = gpus if target in HOLDING_QUOTA or self.gpus_in_use else None
            return self._update_in_place(self.reason, self.message, counted, at)
        if self.state == State.STOPPED:  # only a start (`request_start`) moves a stopped notebook on
            return False
        if self.platform_gates and target == State.QUEUED:
            # Held by the platform's admission gate (`jobs.lifecycle.PLATFORM_GATES`): it stays
            # submitted with the platform's reason and words (what lets it go looks for them), and
            # Kueue's own, read from its Workload (AdmissionGated), are noted beside them.
            return reason == ADMISSION_GATED and self.note(reason, message, at=at)
        route = path(self.state, target)
        if not route:
            return False
        stamps = self._route_times(route, times or {}, at or timezone.now())
        for step, when in zip(route[:-1], stamps, strict=False):
            if not self.transition(step, reason=State(step).label, gpus=gpus, at=when):
                return False
        return self.transition(target, reason=reason, message=message, gpus=gpus, at=stamps[-1])

    def hear_kueue(self, reason: str, message: str) -> bool:
        """Keep Kueue's own reason and message for not admitting the job (``""``: it says none,
        or admitted it); written only when they changed. A job's state times do not move with
        them: they are Kueue's words, not a step of the lifecycle."""
        reason = reason[:64]
        if (reason, message) == (self.kueue_reason, self.kueue_message):
            return False
        type(self)._default_manager.filter(pk=self.pk).update(kueue_reason=reason, kueue_message=message)
        self.kueue_reason, self.kueue_message = reason, message
        return True

    def give_back(self, gpus: int, at=None) -> bool:
        """A job being cancelled whose pods hold ``gpus`` now, its workload gone: the interval
        moves with them (`jobs.watch.watcher`), up from nothing too (a pod placed after the cancel
        holds GPUs until it goes); the end is `end_cancel`'s."""
        if self.state != State.CANCELLING:
            return False
        return self._update_in_place(self.reason, self.message, gpus, at)

    def gave_back_at(self):
        """When a job being cancelled last gave GPUs back, once it holds none (`give_back`, or
        its cancel's request when it held none): when its GPU-hours ended. None while it holds some."""
        return self.updated_at if self.state == State.CANCELLING and not self.gpus_in_use else None

    def end_cancel(self, *, message: str = CANCEL_ENDED) -> bool:
        """A cancel's end: the one writer of cancelling -> cancelled, called once nothing of the
        job is seen left on the cluster (`jobs.tasks.end_when_gone`: the watcher's observation,
        or the sweep's where no watcher runs). It ended when its pods gave their GPUs back as the
        watcher counted them (`gave_back_at`), else now, when it was seen gone. The row is read
        again first: the watcher may have given GPUs back since this instance was read."""
        self.refresh_from_db(fields=["state", "reason", "message", "updated_at", "gpus_in_use"])
        if self.state != State.CANCELLING:
            return False
        return self.transition(State.CANCELLED, reason="Cancelled", message=message, at=self.gave_back_at())

    def _route_times(self, route: list[str], times: dict, seen_at) -> list:
        """When each step of ``route`` happened: the cluster's time where it keeps one, else
        that of the next step it knows (it happened no later), else ``seen_at``; never before
        what this row last recorded (``updated_at``), never after it was seen. So a finish
        the watcher reads late (it was restarting, the API server was down) is charged up to
        when it happened, and the timeline stays in order."""
        known, later = [], None
        for step in reversed(route):
            later = times.get(step) or later
            known.append(later)
        stamps, floor = [], self.updated_at
        for when in reversed(known):
            when = min(when or seen_at, seen_at)
            if floor is not None and when < floor:
                when = floor
            stamps.append(when)
            floor = when
        return stamps

    def _update_in_place(self, reason: str, message: str, gpus: int | None, at=None) -> bool:
        """A new reason, message or GPU count in the same state (compared with the row as this
        instance saw it): one UPDATE guarded by the state, and the interval moved with it."""
        held = held_after(self, self.state, self.state, gpus)
        said = (reason, message) != (self.reason, self.message)
        if not said and held == self.gpus_in_use:
            return False
        at = at or timezone.now()
        changes = {"reason": reason, "message": message, "updated_at": at}
        if held != self.gpus_in_use:
            changes["gpus_in_use"] = held
        with transaction.atomic(savepoint=False):
            changed = type(self)._default_manager.filter(pk=self.pk, state=self.state).update(**changes)
            if changed and held != self.gpus_in_use:
                GpuInterval.objects.move(self, held, at)
        if changed:
            for field, value in changes.items():
                setattr(self, field, value)
            if said:
                job_reason_changed.send(sender=type(self), job=self)
        return bool(changed)

    def note(self, reason: str, message: str, *, at=None) -> bool:
        """Record something worth knowing that changes no state, once per reason and message.
        ``at``: when it happened (the clock when None), as ``transition`` takes it."""
        _, created = JobEvent.objects.get_or_create(
            job=self, reason=reason, message=message,
            defaults={"from_state": self.state, "to_state": self.state, "created_at": at or timezone.now()},
        )
        return created

    def submit(self, because: dict | None = None) -> bool:
        """``because``: another reason and message than `SUBMITTED_BECAUSE` (a personal cap's)."""
        return self.transition(State.SUBMITTED, **(because or SUBMITTED_BECAUSE))

    def save_submitted(self, because: dict | None = None) -> None:
        """Store this new job as ``save`` then ``submit`` would leave it, with one INSERT
        instead of an INSERT of a draft and its UPDATE."""
        if not self._state.adding:
            raise ValueError("save_submitted stores a new job; submit() moves a stored draft.")
        at, because = timezone.now(), because or SUBMITTED_BECAUSE
        self.state, self.submitted_at = State.SUBMITTED, at
        self.reason, self.message = because["reason"], because["message"]
        self.save(force_insert=True)
        self._record(State.DRAFT, State.SUBMITTED, **because, at=at)


class JobEvent(models.Model):
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="events")
    # When it happened (the cluster's time when the watcher read one), and when the platform
    # wrote it down: the difference is the status lag the soak measures.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    from_state = models.CharField(max_length=12, choices=State, blank=True)
    to_state = models.CharField(max_length=12, choices=State)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        app_label = "jobs"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.from_state or '-'} -> {self.to_state}: {self.reason}"
