"""Reconcile the cluster-wide quota objects: ResourceFlavors, Cohorts, priority classes."""

from celery import shared_task

from gpuplatform.ownership import cluster_wide_selector
from gpuplatform.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, sync

from .manifests import CLUSTER_KINDS, render_cluster
from .models import Cohort, GpuFlavor, PriorityClass


def sync_cluster_objects(cluster) -> Outcome:
    desired = render_cluster(list(GpuFlavor.objects.all()), list(Cohort.objects.all()),
                             list(PriorityClass.objects.all()))
    return sync(cluster, desired, selector=cluster_wide_selector(), kinds=CLUSTER_KINDS)


@shared_task(**RETRY_POLICY)
def reconcile_cluster_objects(self) -> int:
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    return sync_cluster_objects(cluster).writes
