"""Where Kueue itself puts a waiting job: the pending workloads of the team's ClusterQueue as
its visibility API lists them (visibility.kueue.x-k8s.io/v1beta2, served on the local cluster
through the API server's aggregation layer: deploy/local-cluster/cluster.sh), in Kueue's order.

Kueue's own positions count every pending workload, the inadmissible too (its ClusterQueue
snapshot adds the workloads it set aside to its heap), so a job that can never start would
still be "ahead" of the jobs after it. The platform takes Kueue's order and counts, of the
jobs before this one, those that may start (`jobs.queue.queueing`). When Kueue cannot say (no
cluster, a flavor governed by another scheduler, a cluster without the visibility API, a job
Kueue does not list yet), the position is counted from the database in the same order
(`Job.queue_position`).
"""

import logging

from cluster import ClusterError
from core.reconcile import NoCluster, current_cluster
from workloads import queue_name
from workloads.kueue import KUEUE
from workloads.pods import object_name

from ..models import Job
from ..queue import looks
from ..queue.queueing import ceiling_of

log = logging.getLogger(__name__)

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"  # the ClusterRole grants get on its pendingworkloads
VISIBILITY = f"/apis/{VISIBILITY_GROUP}/v1beta2"
# Pending workloads read at most (Kueue's default page is 1000): a job further back is counted
# from the database.
LIMIT = 1000


def pending_path(cluster_queue: str) -> str:
    return f"{VISIBILITY}/clusterqueues/{cluster_queue}/pendingworkloads"


def _workload_owner(item: dict) -> str | None:
    """The name of the object of ours a pending workload stands for: a batch Job is named after
    its job; a server's replica is a Pod of its Deployment, "<deployment>-<replica set>-<pod>"."""
    for owner in (item.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("kind") == "Job":
            return owner.get("name")
        if owner.get("kind") == "Pod":
            return owner.get("name", "").rsplit("-", 2)[0]
    return None


def kueue_order(job: Job, cluster) -> list[str] | None:
    """Names of the objects of the pending workloads of ``job``'s ClusterQueue, in Kueue's order
    (a server's replicas each count once, where the first stands); None when Kueue cannot say."""
    listed = _listed(job, cluster)
    return None if listed is None else [name for name, _ in listed]


def kueue_position(job: Job, cluster=None) -> int | None:
    """Kueue's own ``positionInClusterQueue`` of ``job``'s workload, verbatim (0: first; it counts
    every pending workload, those that can never start too); None when Kueue does not list it
    or cannot say."""
    cluster = _cluster_for(job, cluster)
    if cluster is None:
        return None
    mine = object_name(job)
    return next((at for name, at in _listed(job, cluster) or () if name == mine), None)


def _listed(job: Job, cluster) -> list[tuple[str, int]] | None:
    path = pending_path(queue_name(job.team.namespace_name, job.flavor))
    return looks.remembered(("pending", path), lambda: _ask(job, cluster, path))


def _ask(job: Job, cluster, path: str) -> list[tuple[str, int]] | None:
    try:
        summary = cluster.get_path(path, limit=LIMIT)
    except ClusterError as err:  # not served (no visibility API), Kueue down, a 403: count ourselves
        log.debug("no pending workloads from Kueue for job %s: %s", job.pk, err)
        return None
    listed: list[tuple[str, int]] = []
    seen: set[str] = set()
    for item in sorted(summary.get("items") or (), key=lambda i: i.get("positionInClusterQueue", 0)):
        name = _workload_owner(item)
        if name and name not in seen:
            seen.add(name)
            listed.append((name, item.get("positionInClusterQueue", 0)))
    return listed


def _cluster_for(job: Job, cluster):
    """The cluster to ask, or None when Kueue cannot say (another scheduler, no cluster)."""
    if job.flavor.scheduler != KUEUE.name:
        return None
    if cluster is None:
        try:
            cluster = current_cluster()
        except NoCluster:
            return None
    return cluster


def position(job: Job, cluster=None) -> int | None:
    """How many jobs that may start Kueue considers before ``job``; None when Kueue cannot say
    (the caller counts from the database), or ``job`` does not wait on a Kueue flavor or can
    never start."""
    if job.never_starts or (cluster := _cluster_for(job, cluster)) is None:
        return None
    order = kueue_order(job, cluster)
    mine = object_name(job)
    if not order or mine not in order:
        return None
    ceiling = ceiling_of(job.team, job.flavor)
    if job.gpus_to_start > ceiling:
        return None
    may_start = {object_name(other) for other in Job.objects.queue_of(job.team, job.flavor, ceiling).only("pk", "name")}
    return sum(1 for name in order[:order.index(mine)] if name in may_start)
