"""Render what a team's quotas put on the cluster: the namespace's ResourceQuota and each
quota's queue objects, plus the cluster-wide objects of every flavor. Pure: models in, dicts out.

A team's quota for a flavor compiles into the objects of the flavor's scheduler only
(DESIGN.md section 4), asked of `workloads.for_flavor`: a ClusterQueue + LocalQueue for
Kueue, a Queue for Volcano.
"""

from collections import defaultdict

import workloads
from cluster.quantity import canonical, gib
from core.ownership import owned
from tenants.admission import PARAMS_NAME, render_admission_params
from tenants.models import SystemNamespace

from .models import Cohort, GpuFlavor, PriorityClass, Quota, StorageQuota

CLUSTER_KINDS = workloads.all_kinds("cluster_kinds")
# The team's quota objects: a team-quota reconcile prunes these kinds by the team's label.
# The ConfigMap is the admission policy's parameters: the queues the team may name.
QUOTA_KINDS = [("v1", "ResourceQuota"), ("v1", "ConfigMap"), *workloads.all_kinds("queue_kinds")]


# --- quantities ----------------------------------------------------------------------------
def namespace_ceilings(quotas: list[Quota], storage: list[StorageQuota] = ()) -> dict[str, str]:
    """Hard limits for the team's ResourceQuota, summed over flavors, and its storage per
    storage class (a class without a quota stays at 0: its claims are refused).

    The namespace quota cannot tell an H100 from an A100 when both expose nvidia.com/gpu,
    so flavors sharing a resource name add up; the per-flavor split is the scheduler's job.
    """
    gpus: dict[str, int] = defaultdict(int)
    cpu = memory = 0
    for quota in quotas:
        gpus[quota.flavor.resource_name] += quota.ceiling_gpus
        cpu += quota.with_ceiling(quota.cpu_cores)
        memory += quota.with_ceiling(quota.memory_gib)
    hard = {f"requests.{resource}": canonical(total) for resource, total in sorted(gpus.items())}
    hard.update({
        "requests.cpu": canonical(cpu),
        "requests.memory": gib(memory),
        "limits.memory": gib(memory),
        # Room for every GPU to be its own pod, plus services without GPUs.
        "pods": canonical(max(20, 2 * sum(gpus.values()) + 10)),
        # Nothing reaches a team's workloads from outside the cluster.
        "services.loadbalancers": "0",
        "services.nodeports": "0",
        # Volumes only on the classes the team has a storage quota on (the team's volumes,
        # `jobs.models.volumes`); without one, none.
        "persistentvolumeclaims": canonical(sum(s.volumes for s in storage)),
        "requests.storage": gib(sum(s.storage_gib for s in storage)),
    })
    for quota in storage:
        hard[f"{quota.storage_class}{STORAGE_CLASS_SUFFIX}/requests.storage"] = gib(quota.storage_gib)
        hard[f"{quota.storage_class}{STORAGE_CLASS_SUFFIX}/persistentvolumeclaims"] = canonical(quota.volumes)
    return hard


# How a ResourceQuota names what one storage class holds.
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io"


# --- rendering ---------------------------------------------------------------------------
RESOURCE_QUOTA_NAME = "team-quota"


def render_resource_quota(team, quotas: list[Quota], storage: list[StorageQuota] = ()) -> dict:
    return owned({"apiVersion": "v1", "kind": "ResourceQuota",
                  "metadata": {"name": RESOURCE_QUOTA_NAME, "namespace": team.namespace_name},
                  "spec": {"hard": namespace_ceilings(quotas, storage)}}, team=team.slug)


def render_team_queues(quotas: list[Quota], namespace: str, team: str) -> list[dict]:
    """Each quota as its scheduler's queue objects."""
    return [obj for quota in quotas
            for obj in workloads.for_flavor(quota.flavor).queue_objects(quota, namespace, team)]


def render_team_quotas(team, quotas: list[Quota], storage: list[StorageQuota] = ()) -> list[dict]:
    """The team's ResourceQuota, its queues and the admission parameters naming them (its
    namespace comes from ``tenants``). Raises ``SystemNamespace`` rather than put them in a
    namespace of the cluster's."""
    if team.owns_system_namespace:
        raise SystemNamespace(team.namespace_name)
    queues = {workloads.queue_name(team.namespace_name, quota.flavor): quota.flavor.name for quota in quotas}
    return [render_resource_quota(team, quotas, storage), render_admission_params(team, queues, [q.flavor for q in quotas]),
            *render_team_queues(quotas, team.namespace_name, team.slug)]


def job_prerequisites(team, flavor) -> list[tuple[str, str, str | None, str]]:
    """(apiVersion, kind, namespace or None, name) of what a job of ``flavor`` needs from its
    team before it is applied: the namespace, its ResourceQuota, the admission parameters
    (which must name the job's queue) and the queue objects it is queued through."""
    namespace = team.namespace_name
    return [("v1", "Namespace", None, namespace), ("v1", "ResourceQuota", namespace, RESOURCE_QUOTA_NAME),
            ("v1", "ConfigMap", namespace, PARAMS_NAME),
            *workloads.for_flavor(flavor).queue_refs(namespace, flavor)]


def render_cluster(flavors: list[GpuFlavor], cohorts: list[Cohort], priorities: list[PriorityClass]) -> list[dict]:
    """Cluster-wide objects of every scheduler (Kueue: ResourceFlavors, Cohorts, priorities).
    The admission policy that guards team namespaces is the installer's (`tenants.admission`)."""
    return [obj for scheduler in workloads.SCHEDULERS.values()
            for obj in scheduler.cluster_objects(flavors, cohorts, priorities)]
