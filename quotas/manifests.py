"""Render quota objects: Kueue ResourceFlavor, Cohort, ClusterQueue, LocalQueue,
WorkloadPriorityClass, and Volcano Queue. Pure functions: models in, dicts out.

A team's quota for a flavor compiles into the objects of the flavor's scheduler only
(DESIGN.md section 4): a ClusterQueue + LocalQueue for Kueue, a Queue for Volcano.
"""

import math
from collections import defaultdict

from cluster.names import bounded_name
from cluster.quantity import canonical, gib
from gpuplatform.ownership import owned

from .models import Cohort, GpuFlavor, PriorityClass, Quota, Scheduler

KUEUE_API = "kueue.x-k8s.io/v1beta2"
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# What the renderers below can emit, so prune knows which kinds to look through.
CLUSTER_KINDS = [(KUEUE_API, "ResourceFlavor"), (KUEUE_API, "Cohort"), (KUEUE_API, "WorkloadPriorityClass")]
QUEUE_KINDS = [(KUEUE_API, "ClusterQueue"), (KUEUE_API, "LocalQueue"), (VOLCANO_QUEUE_API, "Queue")]


# --- names -------------------------------------------------------------------------------
def cluster_queue_name(namespace: str, flavor: GpuFlavor) -> str:
    """Cluster-scoped queue of one team for one flavor (ClusterQueue or Volcano Queue)."""
    return bounded_name(namespace, flavor.name)


def local_queue_name(flavor: GpuFlavor) -> str:
    """The team's LocalQueue for a Kueue flavor, inside the team's namespace."""
    return flavor.name


# --- quantities ----------------------------------------------------------------------------
def _scaled(amount: int, quota: Quota) -> int:
    """CPU or memory that goes with the GPUs a quota can reach when it borrows."""
    if not quota.nominal_gpus:
        return amount
    return math.ceil(amount * quota.ceiling_gpus / quota.nominal_gpus)


def namespace_ceilings(quotas: list[Quota]) -> dict[str, str]:
    """Hard limits for the team's ResourceQuota, summed over flavors.

    The namespace quota cannot tell an H100 from an A100 when both expose nvidia.com/gpu,
    so flavors sharing a resource name add up; the per-flavor split is the scheduler's job.
    """
    gpus: dict[str, int] = defaultdict(int)
    cpu = memory = 0
    for quota in quotas:
        gpus[quota.flavor.resource_name] += quota.ceiling_gpus
        cpu += _scaled(quota.cpu_cores, quota)
        memory += _scaled(quota.memory_gib, quota)
    hard = {f"requests.{resource}": canonical(total) for resource, total in sorted(gpus.items())}
    hard.update({
        "requests.cpu": canonical(cpu),
        "requests.memory": gib(memory),
        "limits.memory": gib(memory),
        # Room for every GPU to be its own pod, plus services without GPUs.
        "pods": canonical(max(20, 2 * sum(gpus.values()) + 10)),
    })
    return hard


# --- cluster-wide objects ------------------------------------------------------------------
def render_resource_flavor(flavor: GpuFlavor) -> dict:
    spec: dict = {"nodeLabels": dict(flavor.node_labels)}
    if flavor.node_taints:
        spec["nodeTaints"] = [dict(t) for t in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    return owned({"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
                  "metadata": {"name": flavor.name}, "spec": spec})


def render_cohort(cohort: Cohort) -> dict:
    return owned({"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": cohort.name}, "spec": {}})


def render_priority_class(priority: PriorityClass) -> dict:
    obj = {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
           "metadata": {"name": priority.name}, "value": priority.value}
    if priority.description:
        obj["description"] = priority.description
    return owned(obj)


def render_cluster(flavors: list[GpuFlavor], cohorts: list[Cohort], priorities: list[PriorityClass]) -> list[dict]:
    """Cluster-wide objects: ResourceFlavors (Kueue flavors only), Cohorts, priorities."""
    return (
        [render_resource_flavor(f) for f in flavors if f.scheduler == Scheduler.KUEUE]
        + [render_cohort(c) for c in cohorts]
        + [render_priority_class(p) for p in priorities]
    )


# --- per team ------------------------------------------------------------------------------
def render_cluster_queue(quota: Quota, namespace: str, team: str) -> dict:
    flavor = quota.flavor
    gpu = {"name": flavor.resource_name, "nominalQuota": canonical(quota.nominal_gpus)}
    if quota.cohort_id is not None:
        if quota.borrowing_limit_gpus is not None:
            gpu["borrowingLimit"] = canonical(quota.borrowing_limit_gpus)
        if quota.lending_limit_gpus is not None:
            gpu["lendingLimit"] = canonical(quota.lending_limit_gpus)
    spec: dict = {
        # Without a selector a ClusterQueue admits no namespace: match exactly the team's.
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": [flavor.resource_name, "cpu", "memory"],
            "flavors": [{"name": flavor.name, "resources": [
                gpu,
                {"name": "cpu", "nominalQuota": canonical(quota.cpu_cores)},
                {"name": "memory", "nominalQuota": gib(quota.memory_gib)},
            ]}],
        }],
        # Kueue's webhook fills in what we leave out and the filled fields count as ours;
        # stating them keeps a re-apply a no-op.
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never",
                       "borrowWithinCohort": {"policy": "Never"}},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "stopPolicy": "None",
        "fairSharing": {"weight": canonical(quota.weight)},
    }
    if quota.cohort_id is not None:
        spec["cohortName"] = quota.cohort.name
        # Take back lent GPUs from anyone; borrow by preempting only lower priorities.
        spec["preemption"].update(reclaimWithinCohort="Any", borrowWithinCohort={"policy": "LowerPriority"})
    return owned({"apiVersion": KUEUE_API, "kind": "ClusterQueue",
                  "metadata": {"name": cluster_queue_name(namespace, flavor)}, "spec": spec}, team=team)


def render_local_queue(quota: Quota, namespace: str, team: str) -> dict:
    return owned({
        "apiVersion": KUEUE_API, "kind": "LocalQueue",
        "metadata": {"name": local_queue_name(quota.flavor), "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name(namespace, quota.flavor)},
    }, team=team)


def render_volcano_queue(quota: Quota, namespace: str, team: str) -> dict:
    resource = quota.flavor.resource_name
    lends = quota.cohort_id is not None and quota.lending_limit_gpus != 0
    if quota.cohort_id is None:
        guaranteed = quota.nominal_gpus
    else:
        guaranteed = quota.nominal_gpus - (quota.nominal_gpus if quota.lending_limit_gpus is None else quota.lending_limit_gpus)
    share = guaranteed / quota.nominal_gpus if quota.nominal_gpus else 0
    return owned({
        "apiVersion": VOLCANO_QUEUE_API, "kind": "Queue",
        "metadata": {"name": cluster_queue_name(namespace, quota.flavor)},
        "spec": {
            "weight": quota.weight,
            "reclaimable": lends,
            "capability": {resource: canonical(quota.ceiling_gpus), "cpu": canonical(_scaled(quota.cpu_cores, quota)),
                           "memory": gib(_scaled(quota.memory_gib, quota))},
            "deserved": {resource: canonical(quota.nominal_gpus), "cpu": canonical(quota.cpu_cores),
                         "memory": gib(quota.memory_gib)},
            "guarantee": {"resource": {resource: canonical(guaranteed),
                                       "cpu": canonical(math.floor(quota.cpu_cores * share)),
                                       "memory": gib(math.floor(quota.memory_gib * share))}},
        },
    }, team=team)


def render_team_queues(quotas: list[Quota], namespace: str, team: str) -> list[dict]:
    """Each quota as its scheduler's objects: ClusterQueue + LocalQueue, or a Volcano Queue."""
    objects: list[dict] = []
    for quota in quotas:
        if quota.flavor.scheduler == Scheduler.KUEUE:
            objects += [render_cluster_queue(quota, namespace, team), render_local_queue(quota, namespace, team)]
        else:
            objects.append(render_volcano_queue(quota, namespace, team))
    return objects
