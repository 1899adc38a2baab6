"""Reconcile what quotas put on the cluster: the cluster-wide objects of every flavor
(ResourceFlavors, Cohorts, priority classes) and each team's ResourceQuota and queues."""

from celery import shared_task

from cluster import ObjectRef, PermanentError
from cluster.objects import Snapshot
from core.ownership import cluster_wide_selector, team_selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, enqueue, sync
from schedulers import queue_name
from tenants.admission import PARAMS_NAME
from tenants.models import SystemNamespace, Team
from tenants.tasks import sync_team

from .manifests import CLUSTER_KINDS, QUOTA_KINDS, job_prerequisites, render_cluster, render_team_quotas
from .models import Cohort, GpuFlavor, PriorityClass, Quota


def sync_cluster_objects(cluster) -> Outcome:
    desired = render_cluster(list(GpuFlavor.objects.all()), list(Cohort.objects.all()),
                             list(PriorityClass.objects.all()))
    return sync(cluster, desired, selector=cluster_wide_selector(), kinds=CLUSTER_KINDS)


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
    """1. the team's namespace first if it is not ready yet, 2. render, apply and prune its
    ResourceQuota and queues."""
    outcome = Outcome()
    team.refresh_from_db(fields=["status"])  # another step may have made it ready
    if team.status != Team.Status.READY:
        outcome += sync_team(cluster, team)
    try:
        desired = render_team_quotas(team, list(Quota.objects.of_team(team)))
    except SystemNamespace as err:
        team.set_status(Team.Status.ERROR, str(err))
        return outcome
    try:
        return outcome + sync(cluster, desired, selector=team_selector(team.slug), kinds=QUOTA_KINDS)
    except PermanentError as err:
        team.set_status(Team.Status.ERROR, f"The cluster refused the team's quotas: {err}")
        raise


@shared_task(**RETRY_POLICY)
def reconcile_cluster_objects(self) -> int:
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    return sync_cluster_objects(cluster).writes


@shared_task(**RETRY_POLICY)
def reconcile_team_quotas(self, team_id: int) -> int:
    team = Team.objects.filter(pk=team_id).exclude(status=Team.Status.DELETING).first()
    if team is None:
        return 0
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    try:
        return sync_team_quotas(cluster, team).writes
    except PermanentError:
        return 0


def reconcile_team_quotas_soon(team: Team) -> None:
    enqueue(reconcile_team_quotas, team.pk)
