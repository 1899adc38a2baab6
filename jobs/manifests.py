"""Render a job's cluster objects. Pure: models in, dicts out.

The job's kind (`workloads/kinds/`), through its integration on the flavor's scheduler
(`workloads.kinds.for_job`), renders the whole job and says which fields of its objects belong
to other controllers.
"""

from cluster.fields import FieldRules, Ownership
from cluster.quantity import gib
from core.ownership import owned
from workloads import gates
from workloads.kinds import for_job, rendered_kinds
from workloads.pods import object_name, pod_templates_of

from .models import Job, Volume

__all__ = ["JOB_KINDS", "PVC", "VOLUME_FIELDS", "job_fields", "object_name", "pod_templates_of", "render_job",
           "render_volumes"]

PVC = ("v1", "PersistentVolumeClaim")
# A claim's class and access modes never change; its size could only grow (not offered yet).
# The volume controller binds it (spec.volumeName), a field we never send.
VOLUME_FIELDS: Ownership = {("", "PersistentVolumeClaim"): FieldRules(
    immutable=("spec.storageClassName", "spec.accessModes"))}

# Every kind a job of any workload kind can own, so prune and offboarding look through them all.
JOB_KINDS = rendered_kinds()


def render_job(job: Job) -> list[dict]:
    """The objects of one job, as its workload kind renders them; a job the platform holds
    carries the platform's admission gate on the object Kueue makes its Workload from, where
    its kind has one (`workloads.gates`: kept as created, whatever a later render says)."""
    integration = for_job(job)
    objects = integration.render(job)
    if integration.gated is None:
        return objects
    return gates.gated(objects, integration.gated, job.platform_gates)


def job_fields(job: Job) -> Ownership:
    """Which fields of the job's objects belong to other controllers."""
    return for_job(job).fields


def render_volumes(team, volumes: list[Volume]) -> list[dict]:
    """A team's volumes, one PersistentVolumeClaim each, named as the volume (what jobs mount:
    `workloads.pods.mounts`). ReadWriteOnce: every storage class offers it; a volume
    mounted by two jobs at once needs them on one node, or a class that binds ReadWriteMany."""
    return [owned({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": volume.name, "namespace": team.namespace_name},
                   "spec": {"storageClassName": volume.storage_class, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": gib(volume.size_gib)}}}}, team=team.slug)
            for volume in volumes]
