"""Reconcile what quotas put on the cluster: the cluster-wide objects of every flavor
(ResourceFlavors, Cohorts, priority classes) and each team's ResourceQuota and queues."""

from celery import shared_task

from cluster import PermanentError
from core.ownership import cluster_wide_selector, team_selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, enqueue, sync
from tenants.models import SystemNamespace, Team
from tenants.tasks import sync_team

from .manifests import CLUSTER_KINDS, QUOTA_KINDS, render_cluster, render_team_quotas
from .models import Cohort, GpuFlavor, PriorityClass, Quota


def sync_cluster_objects(cluster) -> Outcome:
    desired = render_cluster(list(GpuFlavor.objects.all()), list(Cohort.objects.all()),
                             list(PriorityClass.objects.all()))
    return sync(cluster, desired, selector=cluster_wide_selector(), kinds=CLUSTER_KINDS)


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
