"""Reconcile a job's workload objects onto the cluster; cancel jobs."""

import copy
import logging
from contextlib import ExitStack

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from cluster import ClusterError, PermanentError, TransientError
from cluster.prometheus import prometheus_from_settings
from core.owners import Owner, Scope, run
from core.ownership import job_selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, enqueue
from quotas.tasks import ensure_team_quotas, namespace_first, reconcile_live_team
from tenants.tasks import TEAM_ITEMS
from workloads import gates
from workloads.kinds import KINDS, for_job

from .lifecycle import PLATFORM_GATES, State
from .manifests import JOB_KINDS, PVC, VOLUME_FIELDS, job_fields, render_job, render_volumes
from .models import RETAIN_FINISHED, Job, claims_of
from .outlook import reservations
from .queue import backfill
from .queue.caps import RELEASED, lock_team
from .status import nothing_left, workload_kinds
from .use import gpu_use

# Kinds whose objects stay a while after they end, so their logs can be read (`Job.cluster_plan`).
RETAINED_KINDS = [kind.name for kind in KINDS if not kind.removed_when_ended]

log = logging.getLogger(__name__)

# How many live jobs one message of the sweep carries (`reconcile_jobs`): a sweep of 10,000
# live jobs is 100 messages and 100 reads, not 10,000 of each.
SWEEP_BATCH = 100


class Superseded(Exception):
    """The job stopped wanting its objects applied after it was read (a cancel, an end)."""


def sync_job(cluster, job: Job) -> Outcome:
    """Make sure the team's namespace and queues exist, apply or remove the job's objects
    as its state says, never taking back what Kueue, the HPA or Volcano own, and record the
    move the apply implies, and any field the cluster keeps as created.

    ``job`` may be stale by the time its objects are written (a sweep's batch is read
    before its hundred jobs are synced): before the first write of an apply, the job's row
    is locked until the sync ends and its state read again (`_still_applied`). A cancel
    that commits before that lock is seen, and nothing is written back after its reconcile
    removed the objects; one that comes after waits for the apply, and its reconcile then
    removes what was applied."""
    return run(cluster, JOB_WORKLOADS, job)


def _still_applied(job: Job, lock: ExitStack):
    """A `before_write` for the job's apply: the first call opens a transaction on `lock`,
    locks the job's row (FOR UPDATE: state changes wait) and raises `Superseded` if the
    job as it is now would not be applied; later calls find it checked."""
    checked = False

    def check() -> None:
        nonlocal checked
        if checked:
            return
        lock.enter_context(transaction.atomic())
        now = Job.objects.select_for_update().filter(pk=job.pk).values("state", "finished_at").first()
        checked = True
        if now is None:
            raise Superseded
        if now["state"] != job.state:
            fresh = copy.copy(job)
            fresh.state, fresh.finished_at = now["state"], now["finished_at"]
            if fresh.cluster_plan() is not Job.Plan.APPLY:
                raise Superseded

    return check


class SystemNamespaceTeam(Exception):
    """The job's team owns a system namespace: its workloads are never touched."""


class InvalidSpec(Exception):
    """The job holds a setting its validators refuse (a row from before a rule): it is never
    rendered, so the cluster never gets it."""

    def __init__(self, problems: dict[str, list[str]]):
        said = " ".join(f"{name}: {' '.join(messages)}" for name, messages in sorted(problems.items()))
        super().__init__(f"Refused before reaching the cluster: {said} Submit the job again with this corrected.")


def _desired(job: Job) -> list[dict] | None:
    plan = job.cluster_plan()
    if plan is Job.Plan.LEAVE:
        return None
    if job.team.owns_system_namespace:  # never touch workloads in the cluster's own namespaces
        raise SystemNamespaceTeam(f"The team's namespace {job.team.namespace_name} is a system namespace.")
    if plan is not Job.Plan.APPLY:
        return []
    if _still_held(job) and for_job(job).gated is None:
        return None  # held, and its kind carries no admission gate: nothing is created yet
    if problems := job.spec_problems():
        if job.state != State.SUBMITTED:
            # Already on the cluster, from before the rule: a sweep never stops a running job
            # for it. Its objects stay as they were created, never re-rendered.
            log.warning("job %s holds text its validators now refuse (%s); its objects are left as they are",
                        job.pk, ", ".join(sorted(problems)))
            return None
        raise InvalidSpec(problems)
    return render_job(job)


def _still_held(job: Job) -> bool:
    """Whether the platform still holds ``job`` once it has tried to let it go: its submitter is
    still at their cap, or it would still delay the job its flavor reserves for. A held job whose
    kind carries an admission gate is applied with the platform's gate (`render_job`)."""
    if job.at_personal_cap and not _let_go(
            job, Job.objects.release_at_cap(job.team_id, job.submitter_id, job.flavor_id), RELEASED):
        return True
    return job.behind_reservation and not _let_go(
        job, release_kept_back(job.team_id, job.flavor_id), reservations.RELEASED)


def _let_go(job: Job, released: list[int], said: dict[str, str]) -> bool:
    """Whether ``job``, held back by the platform, is among the ``released`` ids (a release at
    its submitter's cap, `jobs.queue.caps`, or behind its flavor's reservation, `jobs.outlook.reservations`),
    then with the reason and message ``said``; the other jobs let go with it are reconciled too."""
    for other in released:
        if other != job.pk:
            enqueue(reconcile_job, other)
    if job.pk in released:
        job.reason, job.message = said["reason"], said["message"]
    return job.pk in released


@shared_task(**RETRY_POLICY)
def release_at_cap(self, team_id: int, user_id: int | None = None, flavor_id: int | None = None) -> int:
    """Let go the jobs of a person (on a flavor), or of everyone of the team, that waited at
    their caps and fit now, and reconcile them; how many went."""
    people = [(user_id, flavor_id)] if user_id and flavor_id else Job.objects.waiting_people(team_id)
    released = [pk for user, flavor in people for pk in Job.objects.release_at_cap(team_id, user, flavor)]
    for pk in released:
        enqueue(reconcile_job, pk)
    return len(released)


def release_kept_back(team_id: int, flavor_id: int) -> list[int]:
    """Let go the team's jobs kept back on the flavor that may go now (the new head among
    them, `jobs.queue.backfill.walk`); those still kept back get their message brought up to date.
    Returns the ids let go."""
    released: list[int] = []
    with transaction.atomic():
        lock_team(team_id)
        sample = (Job.objects.filter(reservations.BEHIND, team_id=team_id, flavor_id=flavor_id)
                  .select_related("team", "flavor").first())
        if sample is None:
            return released
        found = reservations.walk(sample.team, sample.flavor)
        now = timezone.now()
        for job, decision in zip(found.jobs, found.decisions, strict=True):
            if not job.behind_reservation:
                continue
            kept = Job.objects.filter(reservations.BEHIND, pk=job.pk)
            if decision is backfill.Decision.HOLD:
                message = reservations.hold_message(job, found)
                if message != job.message:
                    kept.update(message=message, updated_at=now)
            elif kept.update(**reservations.RELEASED, updated_at=now):
                job.note("ReservationAllows", reservations.RELEASED["message"])
                released.append(job.pk)
    return released


@shared_task(**RETRY_POLICY)
def release_reserved(self, team_id: int, flavor_id: int | None = None) -> int:
    """Let go the team's jobs kept back behind a reservation (on a flavor, or on every one)
    that may go now, and reconcile them; how many went."""
    flavors = [flavor_id] if flavor_id else reservations.waiting_flavors(team_id)
    released = [pk for flavor in flavors for pk in release_kept_back(team_id, flavor)]
    for pk in released:
        enqueue(reconcile_job, pk)
    return len(released)


def _queues_first(cluster, job: Job) -> Outcome:
    # A new job needs its team's namespace and queues: nothing to do when the watch cache
    # shows them in place, else the team's quotas are synced.
    if job.state != State.SUBMITTED:
        return Outcome()
    return ensure_team_quotas(cluster, job.team, job.flavor)


def _refused(job: Job, err: Exception, outcome: Outcome) -> Outcome | None:
    if isinstance(err, Superseded):
        log.info("job %s moved on while it was being applied; its own reconcile takes over", job.pk)
        return Outcome()
    if isinstance(err, InvalidSpec):
        if not job.is_final:
            job.transition(State.FAILED, reason="InvalidSpec", message=str(err))
        return Outcome()
    if isinstance(err, SystemNamespaceTeam):
        if job.state == State.CANCELLING:
            # Nothing of ours is ever created in (or deleted from) such a namespace: no
            # observation can come, so the cancel ends now.
            job.end_cancel(message=str(err))
        elif not job.is_final:
            job.transition(State.FAILED, reason="Rejected", message=str(err))
        return Outcome()
    if isinstance(err, PermanentError):
        if job.state == State.CANCELLING:
            # Its objects stay, and so may its pods: it is still cancelling (its GPU-hours
            # running), and the next sweep tries the delete again.
            job.note("RemovalRefused", f"The cluster refused to remove the job: {err}")
            return outcome
        job.transition(State.FAILED, reason="Rejected", message=f"The cluster refused the job: {err}")
        return outcome
    return None


def _record(cluster, job: Job, outcome: Outcome) -> None:
    if outcome.drift:
        job.note("KeptAsCreated", (
            "The cluster keeps this job as it was created: " + "; ".join(outcome.drift)
            + " can no longer change, and the platform now renders it differently. "
            "The job runs as submitted; submit it again to get the new settings."))
    if job.platform_gates:
        return  # held behind the platform's admission gate: submitted, on the cluster, not admitted
    open_gates(cluster, job, outcome)
    if job.state == State.SUBMITTED:
        job.transition(State.QUEUED, reason="Queued", message="Waiting for the scheduler.")
    elif job.state == State.CANCELLING and not outcome.pruned:
        # Objects just deleted go in the background (the garbage collector deletes their pods
        # after them): their end is observed later, by the watcher or the next sweep. A
        # reconcile that found nothing to delete looks whether anything is left.
        end_when_gone(cluster, job)


def open_gates(cluster, job: Job, outcome: Outcome) -> int:
    """Let go a job the platform no longer holds: take the platform's admission gates off the
    object Kueue makes its Workload from (`workloads.gates.open_gates`, one patch of that
    annotation alone; Kueue then takes them off the Workload and may admit it). With the job's
    row locked and read again first, as an apply's (`_still_applied`): a cancel that came
    meanwhile leaves the gate on for its own reconcile to remove the objects. Returns how many
    objects were patched."""
    kind, ours = for_job(job).gated, list(PLATFORM_GATES.values())
    found = [result.object for result in outcome.applied
             if (result.ref.api_version, result.ref.kind) == kind and gates.opening(result.object, ours)]
    if not found:
        return 0
    with transaction.atomic():
        now = Job.objects.select_for_update().filter(pk=job.pk).values("state", "reason", "finished_at").first()
        fresh = copy.copy(job)
        if now is not None:
            fresh.state, fresh.reason, fresh.finished_at = now["state"], now["reason"], now["finished_at"]
        if now is None or fresh.cluster_plan() is not Job.Plan.APPLY or fresh.platform_gates:
            return 0
        opened = sum(gates.open_gates(cluster, obj, ours) for obj in found)
    log.info("job %s: the platform's admission gate taken off %d object(s)", job.pk, opened)
    return opened


def end_when_gone(cluster, job: Job) -> bool:
    """End a cancel (`Job.end_cancel`) if nothing of the job is left on the cluster, as listed
    now (`jobs.status.nothing_left`: one LIST of each kind that makes its pods, one of its
    pods); whether it ended. The one observation that ends a cancel: the watcher asks when its
    cache shows nothing left (the list guards against a watch that has not brought an object
    just applied yet), the reconcile when it found nothing left to delete (the sweep's, the
    fallback where no watcher runs). Never sleeps: what is still there is looked at again by
    the next observation. A cluster that cannot say leaves the job cancelling."""
    namespace, selector = job.team.namespace_name, job_selector(job.pk)
    try:
        objects = [obj for api_version, kind in workload_kinds(job) if cluster.serves(api_version, kind)
                   for obj in cluster.list(api_version, kind, namespace=namespace, label_selector=selector)]
        pods = cluster.list("v1", "Pod", namespace=namespace, label_selector=selector)
    except ClusterError as err:
        log.info("job %s: cancelled, and the cluster cannot say whether it is gone (%s)", job.pk, err)
        return False
    if not nothing_left(objects, pods):
        log.info("job %s: cancelled, %d of its objects and %d pods still there", job.pk, len(objects), len(pods))
        return False
    return job.end_cancel()


def _with_related():
    return Job.objects.select_related("team", "flavor", "priority")


@shared_task(**RETRY_POLICY)
def reconcile_job(self, job_id: int) -> int:
    job = _with_related().filter(pk=job_id).first()
    if job is None:
        return 0
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    return sync_job(cluster, job).writes


@shared_task(**RETRY_POLICY)
def reconcile_jobs(self, job_ids: list[int]) -> int:
    """The sweep's reconcile of many jobs: one read for all of them, then each synced as
    `reconcile_job` syncs it (with a warm watch cache, a job already in place costs no
    request). A job whose sync fails for a reason of its own is logged and the rest go on;
    a cluster that cannot be reached now retries the whole batch, where the jobs already
    done are no-ops."""
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    writes = 0
    for job in _with_related().filter(pk__in=job_ids).order_by("pk"):
        try:
            writes += sync_job(cluster, job).writes
        except TransientError:
            raise
        except Exception:  # one job's fault must not hold back the batch
            log.exception("reconciling job %s failed; the next sweep tries again", job.pk)
    return writes


@shared_task
def record_gpu_use() -> dict:
    """The beat's sample of used and idle GPU time (`jobs.use.gpu_use`); nothing without Prometheus."""
    if prometheus_from_settings() is None:
        return {"skipped": "PROMETHEUS_URL is not set"}
    return gpu_use.sample_quietly()


# --- the job workloads, as an owner --------------------------------------------------------
def load_jobs(keys: list | None):
    if keys is None:
        return _with_related().live().exclude(state=State.DRAFT)
    return _with_related().filter(pk__in=keys).order_by("pk")


def live_job_keys() -> list[int]:
    """What the sweep reconciles: every live job that left its draft."""
    return list(Job.objects.live().exclude(state=State.DRAFT).order_by("pk").values_list("pk", flat=True))


def send_in_batches(keys: list[int], **options) -> None:
    """The sweep's live jobs, `SWEEP_BATCH` a message (`reconcile_jobs`)."""
    for start in range(0, len(keys), SWEEP_BATCH):
        reconcile_jobs.apply_async((keys[start:start + SWEEP_BATCH],), **options)


def wanted_jobs(found: set[int]) -> set[int]:
    """Of the jobs whose objects are on the cluster, those the database still wants there:
    live ones (a cancelling job's own reconcile removes its objects, and accounting charges
    until its end is seen, `end_when_gone`), jobs of a retained kind finished less than `RETAIN_FINISHED` ago
    (their logs), and any newer than the newest row read first, so a job submitted while the
    sweep runs is never mistaken for an orphan."""
    newest = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    keep = set(Job.objects.filter(pk__lte=newest).live().values_list("pk", flat=True)) | set(
        Job.objects.filter(kind__in=RETAINED_KINDS, finished_at__gte=timezone.now() - RETAIN_FINISHED)
        .values_list("pk", flat=True))
    return keep | {job_id for job_id in found if job_id > newest}


JOB_WORKLOADS = Owner(
    name="job workloads", scope=Scope.JOB, kinds=tuple(JOB_KINDS),
    load=load_jobs, keys=live_job_keys, key=lambda job: job.pk, label=lambda job: str(job.pk),
    key_for=lambda label: int(label) if label.isdigit() else None, title=lambda job: f"job {job}",
    render=render_job, desired=_desired, prepare=_queues_first, prepare_refusals_are_its_own=True,
    refused=_refused, rules=job_fields, guard=_still_applied, record=_record, wanted=wanted_jobs,
    task=reconcile_job, send_many=send_in_batches,
)


# --- the team's volumes ----------------------------------------------------------------------
@shared_task(**RETRY_POLICY)
def reconcile_team_volumes(self, team_id: int) -> int:
    """Apply the team's volumes as claims, and delete the claims of volumes deleted."""
    return reconcile_live_team(team_id, lambda cluster, team: run(cluster, TEAM_VOLUMES, team))


# One PersistentVolumeClaim per volume of the team (`jobs.models.volumes`), after its quotas
# (the ResourceQuota holds them); its namespace first when the team is not ready.
TEAM_VOLUMES = Owner(
    name="team volumes", scope=Scope.TEAM, kinds=(PVC,), prepare=namespace_first,
    render=lambda team: render_volumes(team, claims_of(team)), rules=lambda team: VOLUME_FIELDS,
    record=lambda cluster, team, outcome: None, task=reconcile_team_volumes, **TEAM_ITEMS,
)
