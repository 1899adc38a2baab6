"""Reconcile what quotas put on the cluster: the cluster-wide objects of every flavor
(ResourceFlavors, Cohorts, priority classes) and each team's ResourceQuota and queues."""

import logging

from celery import shared_task
from django.utils import timezone

from cluster import ClusterError, ObjectRef, PermanentError, UnknownKind
from cluster.objects import Snapshot
from core.owners import Owner, Scope, run
from core.ownership import team_selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, enqueue
from tenants.admission import PARAMS_NAME
from tenants.models import SystemNamespace, Team
from tenants.tasks import TEAM_ITEMS, sync_team
from workloads import queue_name
from workloads.trainer import CLUSTER_TRAINING_RUNTIME, FRAMEWORK_LABEL

from .manifests import CLUSTER_KINDS, QUOTA_KINDS, job_prerequisites, render_cluster, render_team_quotas
from .models import Cohort, GpuFlavor, PriorityClass, Quota, StorageQuota
from .models.runtimes import record_installed

log = logging.getLogger(__name__)
THE_CLUSTER = ""  # the key and label of the one item of the cluster-wide owner
# What the cluster sync reads besides what it applies, (apiVersion, kind) -> verbs: the
# ClusterTrainingRuntimes (`check_training_runtimes`). Granted by `gpuplatform.rbac`.
READS = {CLUSTER_TRAINING_RUNTIME: {"get", "list"}}


def _render_cluster(_item) -> list[dict]:
    return render_cluster(list(GpuFlavor.objects.all()), list(Cohort.objects.all()),
                          list(PriorityClass.objects.all()))


def sync_cluster_objects(cluster) -> Outcome:
    return run(cluster, CLUSTER_OBJECTS, THE_CLUSTER)


def check_training_runtimes(cluster) -> int:
    """Record on each `TrainingRuntime` whether the cluster has its ClusterTrainingRuntime (and
    the runtime's framework label where the row has none). Trainer not served: none is. A
    cluster that does not answer (or refuses the read) changes nothing: the last known value
    stays, and a runtime never checked refuses no job. How many rows changed."""
    try:
        found = cluster.list(*CLUSTER_TRAINING_RUNTIME)
    except UnknownKind:
        found = []
    except ClusterError as err:
        log.warning("ClusterTrainingRuntimes not read, keeping what was last known: %s", err)
        return 0
    live = {}
    for obj in found:
        metadata = obj.get("metadata") or {}
        live[metadata.get("name", "")] = (metadata.get("labels") or {}).get(FRAMEWORK_LABEL, "")
    return record_installed(live, timezone.now())


def _record_cluster(cluster, _item, _outcome) -> None:
    check_training_runtimes(cluster)


def team_ready_for(cluster, team: Team, flavor: GpuFlavor) -> bool:
    """Whether the worker's watch cache shows everything a new job of ``flavor`` needs
    from its team (``job_prerequisites``): the team ready, its namespace, ResourceQuota
    and queues there and not being deleted, and the admission parameters naming the job's
    queue. No request and no query: the job's reconcile then skips the team's sync.

    Only "yes" is trusted, and only from a cache in step with the cluster; a kind it cannot
    answer for, a miss, or no cache at all is "no" (the team is synced as before). Keeping
    the team's objects as its quotas say is `reconcile_team_quotas`' work (enqueued when a
    quota changes, and by every sweep); one of them deleted or edited behind the cache's
    back reaches it by the watch, which reconciles the team again (`gpuplatform.heal`).
    """
    cache = getattr(cluster, "cache", None)
    if cache is None or team.status != Team.Status.READY or team.owns_system_namespace:
        return False
    wanted = [ObjectRef(*ref) for ref in job_prerequisites(team, flavor)]
    snapshot = Snapshot()
    if cache.fill(snapshot, team_selector(team.slug), sorted({(r.api_version, r.kind) for r in wanted})):
        return False  # a kind the cache cannot answer for now
    found = [snapshot.get(ref) for ref in wanted]
    if any(obj is None or (obj.get("metadata") or {}).get("deletionTimestamp") for obj in found):
        return False
    params = next(obj for ref, obj in zip(wanted, found, strict=True) if (ref.kind, ref.name) == ("ConfigMap", PARAMS_NAME))
    return (params.get("data") or {}).get(queue_name(team.namespace_name, flavor)) == flavor.name


def ensure_team_quotas(cluster, team: Team, flavor: GpuFlavor) -> Outcome:
    """What a new job of ``flavor`` does first: nothing when its team is ready for it
    (`team_ready_for`), else sync the team's quotas (and its namespace if not ready)."""
    if team_ready_for(cluster, team, flavor):
        return Outcome()
    return sync_team_quotas(cluster, team)


def sync_team_quotas(cluster, team: Team) -> Outcome:
    """The team's namespace first if it is not ready yet, then render, apply and prune its
    ResourceQuota and queues."""
    return run(cluster, TEAM_QUOTAS, team)


def _render_quotas(team: Team) -> list[dict]:
    return render_team_quotas(team, list(Quota.objects.of_team(team)), list(StorageQuota.objects.filter(team=team)))


def namespace_first(cluster, team: Team) -> Outcome:
    team.refresh_from_db(fields=["status"])  # another step may have made it ready
    return Outcome() if team.status == Team.Status.READY else sync_team(cluster, team)


def _quotas_refused(team: Team, err: Exception, outcome: Outcome) -> Outcome | None:
    if isinstance(err, SystemNamespace):
        team.set_status(Team.Status.ERROR, str(err))
        return outcome
    if isinstance(err, PermanentError):
        team.set_status(Team.Status.ERROR, f"The cluster refused the team's quotas: {err}")
    return None


@shared_task(**RETRY_POLICY)
def reconcile_cluster_objects(self) -> int:
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    return sync_cluster_objects(cluster).writes


def reconcile_live_team(team_id: int, sync) -> int:
    """What a team-scoped task does: `sync(cluster, team)` for a team not being offboarded, when
    a cluster is configured; a permanent refusal is recorded by `sync`'s owner, not retried."""
    team = Team.objects.filter(pk=team_id).exclude(status=Team.Status.DELETING).first()
    if team is None:
        return 0
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    try:
        return sync(cluster, team).writes
    except PermanentError:
        return 0


@shared_task(**RETRY_POLICY)
def reconcile_team_quotas(self, team_id: int) -> int:
    return reconcile_live_team(team_id, sync_team_quotas)


def reconcile_team_quotas_soon(team: Team) -> None:
    enqueue(reconcile_team_quotas, team.pk)


# ResourceFlavors, Cohorts, WorkloadPriorityClasses (the admission policy is the installer's: tenants.admission);
# what it records is which ClusterTrainingRuntimes the cluster has.
CLUSTER_OBJECTS = Owner(
    name="cluster objects", scope=Scope.CLUSTER, kinds=tuple(CLUSTER_KINDS),
    load=lambda keys: [THE_CLUSTER], keys=lambda: [THE_CLUSTER], key=lambda item: THE_CLUSTER,
    label=lambda item: THE_CLUSTER, key_for=lambda label: THE_CLUSTER, title=lambda item: "cluster-wide objects",
    render=_render_cluster, record=_record_cluster, task=reconcile_cluster_objects,
)
# The team's ResourceQuota, admission parameters and queues; its namespace first when the
# team is not ready (a refusal there is the team objects' to record).
TEAM_QUOTAS = Owner(
    name="team quotas", scope=Scope.TEAM, kinds=tuple(QUOTA_KINDS),
    render=_render_quotas, prepare=namespace_first, refused=_quotas_refused,
    record=lambda cluster, team, outcome: None, task=reconcile_team_quotas, **TEAM_ITEMS,
)
