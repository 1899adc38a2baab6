"""Jobs (training or inference workloads): what they ask for, who may see and move them."""

import enum
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.validators import (
    TextBounds,
    between,
    validate_dns1035_label,
    validate_env,
    validate_image,
    validate_string_list,
    validate_url_path,
    validate_visible_text,
)
from quotas.grants import MAX_GPUS_PER_NODE
from quotas.models import (
    MAX_GPU_MEMORY_GIB,
    MAX_RUNTIME_SECONDS,
    MIN_RUNTIME_SECONDS,
    GpuFlavor,
    PriorityClass,
    runtime_limits,
)
from quotas.models.topology import Placement
from tenants.models import Membership, Team
from workloads import kinds, serving
from workloads.autoscaling import Autoscale
from workloads.gates import ADMISSION_GATED
from workloads.kinds import WorkKind, inference, ray_job
from workloads.spec import BY_NAME as SPEC
from workloads.spec import RELATED

from .. import gpus
from ..lifecycle import (
    AT_PERSONAL_CAP,
    BEHIND_RESERVATION,
    FINAL_STATE_VALUES,
    FINAL_STATES,
    NEVER_STARTS_REASONS,
    PLATFORM_GATES,
    WAITING_FOR_QUOTA,
    State,
)
from ..queue.caps import CapQuerySet, lock_team
from ..queue.queueing import QueueingQuerySet, ceiling_of
from .checks import problems
from .hardware import JobHardware
from .moves import JobMoves
from .notebook import NotebookRules
from .preemptions import PreemptionContract
from .ray import RayRules
from .trainer import TrainJobRules
from .volumes import JobVolumes

JOB_NAME_MAX_LENGTH = 40
# Bounds of the numbers a job asks for, the same on every database. Each is far inside the
# int32 of the Kubernetes field it lands in (parallelism, replicas, minAvailable, ports,
# probe and deadline seconds); a worker never needs more GPUs than a node has.
MAX_WORKERS = 512
MAX_REPLICAS = 512
MAX_GPUS_PER_WORKER = MAX_GPUS_PER_NODE
MAX_CPU_PER_WORKER = 1024
MAX_MEMORY_PER_WORKER_GIB = 16 * 1024
MAX_PROBE_DELAY_SECONDS = 3600
# How long a finished training job's objects stay on the cluster, so its logs can be read.
RETAIN_FINISHED = timedelta(days=1)
LIVE_NAME_TAKEN = "The team already has a live job with this name."
# Trainer's estimatedRemainingSeconds is an int32.
MAX_TRAINER_REMAINING_SECONDS = 2**31 - 1


def _bounded(name: str) -> TextBounds:
    bounds = SPEC[name].bounds
    return TextBounds(bounds.items, bounds.item_chars, bounds.total_bytes)


class JobQuerySet(CapQuerySet, QueueingQuerySet):
    def visible_to(self, user):
        """Jobs a user may see: their teams' jobs; every job for quota managers."""
        return self.filter(team__in=Team.objects.visible_to(user))

    def live(self):
        return self.exclude(state__in=FINAL_STATE_VALUES)

    def submit(self, *, team: Team, submitter, hold=None, **fields) -> "Job":
        """Check the submitter may, validate, save as submitted (`jobs.actions.submit`
        then reconciles it). ``hold(job)``: the reason and message it is kept back with when
        it fits its submitter's cap (`jobs.outlook.reservations.verdict`), None to let it go."""
        job = self.checked(team=team, submitter=submitter, **fields)
        # No savepoint of its own: nothing in here is caught and carried on from, and the
        # caller's transaction (``jobs.actions.submit``) rolls back as one.
        with transaction.atomic(savepoint=False):
            self._refuse_over_cap(team)
            # Over its submitter's cap: saved, but waiting (`jobs.queue.caps`), never admitted.
            job.save_submitted(because=self.cap_verdict(job) or (hold(job) if hold else None))
        return job

    def checked(self, *, team: Team, submitter, **fields) -> "Job":
        """The job `submit` would store, checked as it checks it (who may, every field), not
        saved: the one check of a submission and of a dry run. The team's cap of live jobs is
        counted when the job is stored, with the team locked."""
        if not team.can_submit(submitter):
            raise PermissionDenied(f"Only owners and members of {team.slug} can submit jobs.")
        job = Job(team=team, submitter=submitter, **fields)
        job.full_clean()
        return job

    def _refuse_over_cap(self, team: Team) -> None:
        """A team holds at most ``MAX_LIVE_JOBS_PER_TEAM`` jobs not finished (drafts count).
        The team's row is locked first, so two submissions at once cannot both take the last
        place. The count is a statement of its own: one counting in the locking statement
        would read the snapshot taken before it waited, without the job that held the lock."""
        lock_team(team.pk)
        held, cap = self.model.objects.live().filter(team=team).count(), settings.MAX_LIVE_JOBS_PER_TEAM
        if held >= cap:
            raise ValidationError({"team": (
                f"Team {team.slug} has {held:,} live jobs, the most a team may have at once ({cap:,}); "
                "wait for some to finish, or cancel some, then submit again.")}, code="too_many_jobs")


class Job(JobHardware, JobVolumes, JobMoves, PreemptionContract, RayRules, NotebookRules, TrainJobRules,
          models.Model):
    # One member per registered kind of work: Job.Kind.TRAINING == "training" (`workloads.kinds`).
    Kind = models.TextChoices("Kind", [(value.upper().replace("-", "_"), (value, label))
                                       for value, label in kinds.choices()])

    Autoscale = Autoscale

    State = State

    class Plan(enum.Enum):
        """What the reconciler should do with the job's cluster objects."""

        APPLY = "apply"
        REMOVE = "remove"
        LEAVE = "leave"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="jobs")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="jobs",
    )
    # DNS-1035 (a letter first): the job's Services are named after it.
    name = models.CharField(max_length=JOB_NAME_MAX_LENGTH, validators=[validate_dns1035_label])
    kind = models.CharField(max_length=16, choices=Kind, default=kinds.KINDS[0].name)
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="jobs")
    priority = models.ForeignKey(
        PriorityClass, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs"
    )

    image = models.CharField(max_length=512, validators=[validate_image])
    # Bounded as the spec says (`spec.TEXT_BOUNDS`), for the form, the API and the admin alike.
    # No hidden characters either (`core.validators.hidden_character`): what runs reads as shown.
    command = models.JSONField(default=list, blank=True,
                               validators=[validate_string_list, _bounded("command"), validate_visible_text])
    args = models.JSONField(default=list, blank=True,
                            validators=[validate_string_list, _bounded("args"), validate_visible_text])
    env = models.JSONField(default=dict, blank=True, validators=[validate_env, _bounded("env"), validate_visible_text])
    # The team's volumes it mounts, volume name -> mount path (`.volumes`).
    volumes = models.JSONField(default=dict, blank=True, validators=[_bounded("volumes"), validate_visible_text])

    workers = models.PositiveSmallIntegerField(default=1, validators=between(1, MAX_WORKERS))
    gpus_per_worker = models.PositiveSmallIntegerField(default=1, validators=between(1, MAX_GPUS_PER_WORKER))
    cpu_per_worker = models.DecimalField(
        max_digits=6, decimal_places=2, default=4, validators=between(Decimal("0.1"), MAX_CPU_PER_WORKER),
        help_text="CPU cores per worker.",
    )
    memory_per_worker_gib = models.PositiveIntegerField(
        default=16, validators=between(1, MAX_MEMORY_PER_WORKER_GIB)
    )
    # The GPU memory budget (per GPU or share of one); checked against the flavor's unit.
    gpu_memory_gib = models.PositiveIntegerField(
        null=True, blank=True, validators=between(1, MAX_GPU_MEMORY_GIB),
        help_text="GPU memory needed on each GPU (or share), in GiB; empty: not declared.")
    placement = models.CharField(
        max_length=16, blank=True, default=Placement.ANYWHERE, choices=Placement,
        help_text="Keep the workers in one rack or block of the flavor's topology (required or preferred).")
    max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=between(MIN_RUNTIME_SECONDS, MAX_RUNTIME_SECONDS),
        help_text="Stop the job after this long, counted from its admission; empty means no limit (a submission "
                  "without one gets its flavor's and priority class's default).",
    )

    # Inference only.
    port = models.PositiveIntegerField(null=True, blank=True, validators=between(1, 65535))
    min_replicas = models.PositiveSmallIntegerField(null=True, blank=True, validators=between(1, MAX_REPLICAS))
    max_replicas = models.PositiveSmallIntegerField(null=True, blank=True, validators=between(1, MAX_REPLICAS))
    readiness_path = models.CharField(max_length=200, blank=True, default="", validators=[validate_url_path])
    readiness_initial_delay_seconds = models.PositiveIntegerField(
        default=30, validators=between(0, MAX_PROBE_DELAY_SECONDS)
    )
    # The startup probe's budget (`workloads.serving`): how long a replica may load its model.
    model_load_seconds = models.PositiveIntegerField(
        default=serving.DEFAULT_MODEL_LOAD_SECONDS, validators=between(*serving.MODEL_LOAD_SECONDS_BOUNDS)
    )
    autoscaling_target_cpu_percent = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=between(1, 100)
    )
    autoscale_metric = models.CharField(max_length=3, choices=Autoscale, default=Autoscale.CPU)
    target_gpu_utilization_percent = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=between(1, 100)
    )

    # Ray jobs only (docs/ray.md): what a RayJob runs and Ray's runtime environment (YAML).
    ray_entrypoint = models.CharField(max_length=ray_job.ENTRYPOINT_MAX_CHARS, blank=True, default="")
    ray_runtime_env = models.TextField(blank=True, default="")

    # TrainJobs only (docs/trainjobs.md): the ClusterTrainingRuntime it runs on, and what its
    # trainer last published of its progress (`record_progress`).
    training_runtime = models.CharField(max_length=253, blank=True, default="")
    trainer_progress_percent = models.PositiveSmallIntegerField(null=True, blank=True, editable=False,
                                                                validators=between(0, 100))
    trainer_remaining_seconds = models.PositiveIntegerField(null=True, blank=True, editable=False,
                                                            validators=between(0, MAX_TRAINER_REMAINING_SECONDS))
    trainer_status_at = models.DateTimeField(null=True, blank=True, editable=False)

    state = models.CharField(max_length=12, choices=State, default=State.DRAFT, db_index=True)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    # Kueue's own reason and message for not admitting the job yet, verbatim (its Workload's
    # QuotaReserved=False condition; "" when it says none): shown first, before the platform's
    # ``reason`` and ``message`` (`workloads.kueue_words`, docs/ui.md).
    kueue_reason = models.CharField(max_length=64, blank=True, default="", editable=False)
    kueue_message = models.TextField(blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the scheduler last admitted it: the start of its current (or last) run, from which
    # its minimum runtime and a preemption's lost GPU-hours count (docs/preemption.md).
    run_admitted_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What the job's pods hold on nodes now: its open GpuInterval's count (jobs.intervals).
    gpus_in_use = models.PositiveIntegerField(
        default=0, editable=False, validators=between(0, MAX_WORKERS * MAX_GPUS_PER_WORKER))

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "state"], name="job_team_state"),
            # A team's jobs newest first: the API list's visibility filter and cursor order,
            # read from the index whatever the number of other teams' jobs.
            models.Index(fields=["team", "-id"], name="job_team_newest_first"),
            # The pages' newest-first order (Meta.ordering), for a team and for everyone.
            models.Index(fields=["team", "-created_at", "-id"], name="job_team_created_newest"),
            models.Index(fields=["-created_at", "-id"], name="job_created_newest"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=~Q(state__in=FINAL_STATE_VALUES),
                name="job_name_unique_among_live_jobs",
                violation_error_message=LIVE_NAME_TAKEN,
            ),
            # The sizes the usage sums multiply, bounded in the database too (SQLite columns
            # take any 64-bit integer).
            models.CheckConstraint(
                condition=Q(workers__gte=1, workers__lte=MAX_WORKERS),
                name="job_workers_in_range",
                violation_error_message=f"A job has between 1 and {MAX_WORKERS} workers.",
            ),
            models.CheckConstraint(
                condition=Q(gpus_per_worker__gte=1, gpus_per_worker__lte=MAX_GPUS_PER_WORKER),
                name="job_gpus_in_range",
                violation_error_message=f"Each worker needs between 1 and {MAX_GPUS_PER_WORKER} GPUs.",
            ),
            models.CheckConstraint(
                condition=~Q(kind=inference.NAME)
                | Q(workers=1, port__isnull=False, min_replicas__gte=1, max_replicas__gte=F("min_replicas"),
                    max_replicas__lte=MAX_REPLICAS),
                name="job_inference_shape",
                violation_error_message=(f"An inference job needs a port and 1 <= min replicas <= max replicas "
                                         f"<= {MAX_REPLICAS}."),
            ),
            models.CheckConstraint(
                condition=Q(autoscale_metric__in=Autoscale.values),
                name="job_autoscale_metric_valid",
                violation_error_message="An inference server scales on cpu or gpu.",
            ),
            models.CheckConstraint(
                condition=Q(state__in=[s.value for s in State]),
                name="job_state_valid",
                violation_error_message="Unknown job state.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.name}"

    # --- rules -----------------------------------------------------------------------
    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def work_kind(self) -> WorkKind:
        """The declaration of the job's kind (`workloads.kinds`)."""
        return kinds.by_name(self.kind)

    @property
    def total_gpus(self) -> int:
        return gpus.total_gpus(self)

    @property
    def gpus_to_start(self) -> int:
        return gpus.gpus_to_start(self)

    @property
    def runs_until_cancelled(self) -> str:
        """What it is once running when it runs until cancelled ("serving"); "" otherwise."""
        return self.work_kind.runs_until_cancelled

    @property
    def size_words(self) -> str:
        """Its replicas in words, for its page: "2 workers", "1–3 replicas"."""
        shape = self.work_kind.shape
        most, start = getattr(self, shape.most) or 1, getattr(self, shape.start) or 1
        count = f"{start}–{most}" if most != start else f"{most}"
        return f"{count} {shape.unit}{'' if most == 1 else 's'}"

    @property
    def is_starting(self) -> bool:
        """About to join its queue: a new draft or submission, not yet saved."""
        return self.state in (State.DRAFT, State.SUBMITTED) and self._state.adding

    def quota_ceiling_gpus(self) -> int:
        """The most GPUs the team can use on the job's flavor, borrowing included."""
        return ceiling_of(self.team, self.flavor)

    @property
    def never_starts(self) -> bool:
        """A waiting job that can never start, as the cluster said (more than its team can
        ever use) or as its size says (a worker needs more GPUs than a node has). It is not
        ahead of anyone, not queued demand, and says it cannot start rather than "Queued"."""
        return self.state in WAITING_FOR_QUOTA and (
            self.reason in NEVER_STARTS_REASONS or not gpus.fits_a_node(self.gpus_per_worker, self.flavor))

    @property
    def at_personal_cap(self) -> bool:
        """Held back by the platform: its submitter is at their cap (`jobs.queue.caps`); not in the
        scheduler's queue (on the cluster behind the platform's admission gate where its kind
        carries one, `platform_gates`)."""
        return self.state == State.SUBMITTED and self.reason == AT_PERSONAL_CAP

    @property
    def behind_reservation(self) -> bool:
        """Held back by the platform so that the job its flavor reserves for is not delayed
        (`jobs.outlook.reservations`); in its team's queue, not admitted by the scheduler (on the
        cluster behind the platform's admission gate where its kind carries one)."""
        return self.state == State.SUBMITTED and self.reason == BEHIND_RESERVATION

    @property
    def platform_gates(self) -> list[str]:
        """The platform's admission gates that hold the job now (`jobs.lifecycle.PLATFORM_GATES`):
        one while it is at its submitter's cap or behind a reservation, none otherwise. On the
        cluster where its kind carries a gate (`render_job`); elsewhere it is not created yet."""
        gate = PLATFORM_GATES.get(self.reason) if self.state == State.SUBMITTED else None
        return [gate] if gate else []

    def kueue_hold(self) -> str:
        """While the platform holds the job behind its gate: Kueue's own word on it, read from its
        Workload (the status watcher's last `AdmissionGated` note, `JobMoves.observe`); "" otherwise."""
        if not self.platform_gates:
            return ""
        said = self.events.filter(reason=ADMISSION_GATED).order_by("-created_at", "-id").values_list("message", flat=True)
        return said.first() or ""

    def get_state_display(self) -> str:
        """The state's label; "Cannot start" for a waiting job that never will, "At cap" for
        one waiting for its submitter's other jobs."""
        if self.at_personal_cap:
            return "At cap"
        return "Cannot start" if self.never_starts else State(self.state).label

    def queue_position(self) -> int | None:
        """How many of the team's jobs on the flavor the scheduler will start before this one
        (`QueueingQuerySet.ahead_of`); None unless it waits and can start some day."""
        if self.state not in WAITING_FOR_QUOTA or self.never_starts or self.at_personal_cap:
            return None
        return Job.objects.ahead_of(self)

    # --- what the job page says of its time (one definition, asked by the page) ----------
    def queue_wait(self, now=None) -> timedelta | None:
        """How long it waited for its GPUs: from submission to admission, or until now while
        it still waits (until it ended, for one that ended without being admitted)."""
        if self.submitted_at is None:
            return None
        end = self.admitted_at or self.finished_at or (now or timezone.now())
        return max(end - self.submitted_at, timedelta(0))

    def run_time(self, now=None) -> timedelta | None:
        """How long its workloads have run: from the first start to the end (or now)."""
        if self.started_at is None:
            return None
        end = self.finished_at or (now or timezone.now())
        return max(end - self.started_at, timedelta(0))

    def gpu_hours(self, now=None) -> Decimal:
        """The GPU-hours it held: its `GpuInterval`s, what the usage page and its CSV sum
        (an open one counts until now)."""
        now = now or timezone.now()
        seconds = sum(i.gpus * max((i.ended_at or now) - i.started_at, timedelta(0)).total_seconds()
                      for i in self.gpu_intervals.all())
        return (Decimal(seconds) / 3600).quantize(Decimal("0.01"))

    def can_submit_draft(self, user) -> bool:
        """A draft is sent on by the team's owners and members, as a new job is."""
        return self.state == State.DRAFT and self.team.can_submit(user)

    def submit_draft(self, user, hold=None) -> bool:
        """Submit this draft for ``user`` after the checks a new job gets (`jobs.actions.submit_draft`
        then reconciles it; ``hold`` as `JobQuerySet.submit`'s). Returns whether this call submitted it."""
        if not self.can_submit_draft(user):
            raise PermissionDenied(f"Only owners and members of {self.team.slug} can submit its drafts.")
        self.full_clean()
        with transaction.atomic(savepoint=False):  # as a new job: the team locked, the cap asked
            lock_team(self.team_id)
            return self.submit(because=Job.objects.cap_verdict(self) or (hold(self) if hold else None))

    @property
    def is_cancellable(self) -> bool:
        """Whether the job can still be stopped, whoever asks."""
        return not self.is_final and self.state != State.CANCELLING

    def can_cancel(self, user) -> bool:
        """The team's owners and members; quota managers watch jobs but do not stop them
        (the permission map in docs/console.md), unless they are in the team themselves."""
        if not self.is_cancellable:
            return False
        return self.team.role_of(user) in (Membership.Role.OWNER, Membership.Role.MEMBER)

    def request_cancel(self, user) -> bool:
        """Stop the job for ``user``: a draft ends at once, anything live starts cancelling
        (`jobs.actions.cancel` then has the reconciler remove its objects). Returns whether
        this call changed it."""
        if not self.can_cancel(user):
            raise PermissionDenied("You cannot cancel this job.")
        who = user.get_username()
        if self.state == State.DRAFT:
            return self.transition(State.CANCELLED, reason="Cancelled", message=f"Cancelled by {who}.")
        # A watcher may move the row on (submitted -> queued) between our read and our write: the
        # compare-and-swap then loses, and the cancel is asked again of the state it found.
        for _ in range(3):
            if self.transition(State.CANCELLING, reason="CancelRequested", message=f"Cancelled by {who}."):
                return True
            self.refresh_from_db(fields=["state", "reason", "message", "updated_at", "gpus_in_use"])
            if not self.is_cancellable:
                return False
        return False

    def cluster_plan(self, now=None) -> "Job.Plan":
        if self.state == State.DRAFT:
            return self.Plan.LEAVE
        if self.state == State.CANCELLING:
            return self.Plan.REMOVE
        if not self.is_final:
            return self.Plan.APPLY
        # Never re-apply a finished job: a deleted batch Job would run again.
        if self.work_kind.removed_when_ended:
            return self.Plan.REMOVE
        now = now or timezone.now()
        if self.finished_at and now - self.finished_at > RETAIN_FINISHED:
            return self.Plan.REMOVE
        return self.Plan.LEAVE

    def clean_fields(self, exclude=None) -> None:
        # A related row given as an object was just read: Django would query again that it
        # exists (one query per relation on every submit). The foreign key still guards it.
        held = {field.name for field in self._meta.concrete_fields
                if field.is_relation and field.is_cached(self) and getattr(self, field.name) is not None}
        super().clean_fields(exclude={*(exclude or ()), *held})

    def spec_problems(self) -> dict[str, list[str]]:
        """What the validators of the spec's own fields refuse in this job, by field: nothing
        for a job the form or the API took, but a row written before a rule (or behind the
        model's back) may hold text the cluster must never get. The reconcile asks before it
        renders (`jobs.tasks`). No query: related rows are not looked at."""
        own = {field.name for field in SPEC.values() if field.shape != RELATED}
        try:
            self.clean_fields(exclude=[field.name for field in self._meta.concrete_fields if field.name not in own])
        except ValidationError as err:
            return err.message_dict
        return {}

    def validate_constraints(self, exclude=None) -> None:
        # The check constraints restate for the database what the fields' validators and
        # ``clean`` already say, with the same limits (tests/jobs/test_model_constraints.py
        # holds them to it); validating them again would cost three round trips apiece.
        # The uniqueness of live names needs the database: one question, answered as an
        # error on the name (Django's own check of a conditional constraint costs a savepoint,
        # an expression for every field, and says it of the whole job).
        if {"team", "name"} & set(exclude or ()) or self.is_final or not (self.team_id and self.name):
            return
        if Job.objects.live().filter(team_id=self.team_id, name=self.name).exclude(pk=self.pk).exists():
            raise ValidationError({"name": LIVE_NAME_TAKEN}, code="unique")

    def runtime_within_limits(self) -> str:
        """Give a training job without a max runtime the default of its flavor and priority
        class; say why a longer one than their cap is refused ("" when it is not)."""
        limits = runtime_limits(self.flavor, self.priority if self.priority_id else None)
        if self.max_runtime_seconds is None:
            self.max_runtime_seconds = limits.default
        return limits.refusal(self.max_runtime_seconds)

    def runtime_left(self, now=None) -> timedelta | None:
        """How long the job may still run before its max runtime stops it: counted from its
        admission, as Kueue counts (None without a limit, before admission, once ended)."""
        if not self.max_runtime_seconds or self.admitted_at is None or self.is_final:
            return None
        used = (now or timezone.now()) - self.admitted_at
        return max(timedelta(seconds=self.max_runtime_seconds) - used, timedelta(0))

    @property
    def max_runtime(self) -> timedelta | None:
        return timedelta(seconds=self.max_runtime_seconds) if self.max_runtime_seconds else None

    def clean(self) -> None:
        """Every named check (`checks`), every error reported, by field."""
        if errors := problems(self):
            raise ValidationError(errors)
