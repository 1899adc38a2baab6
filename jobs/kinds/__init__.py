"""The workload kinds a job can be, registered once, in the list below (`base.WorkloadKind`):
Kueue training (a batch Job), Volcano gangs (a Volcano Job), inference (Deployment +
Service + HPA), Ray on Kueue flavors (a RayJob; a RayCluster + dashboard Service) and
notebooks on Kueue flavors (a StatefulSet + Service, an Ingress where configured). `for_job(job)` is the one dispatch, by the job's kind and its flavor's
scheduler; rendering, status, field ownership, prune, the watcher and RBAC all ask it or
the list. A new kind is one module here and one line in `KINDS`.
"""

from schedulers import Kind

from . import inference, kueue_training, notebook, ray_cluster, ray_job, volcano_gang
from .base import WorkloadKind

KINDS: tuple[WorkloadKind, ...] = (
    kueue_training.KIND,
    volcano_gang.KIND,
    inference.KIND,
    ray_job.KIND,
    ray_cluster.KIND,
    notebook.KIND,
)

_BY_JOB = {(scheduler, kind.job_kind): kind for kind in KINDS for scheduler in kind.schedulers}

__all__ = ["KINDS", "WorkloadKind", "for_job", "rendered_kinds"]


def for_job(job) -> WorkloadKind:
    """The kind that renders and reads `job`: its kind on its flavor's scheduler."""
    return _BY_JOB[(job.flavor.scheduler, job.kind)]


def rendered_kinds() -> list[Kind]:
    """Every kind any job can own, without repeats, so prune and offboarding look through them all."""
    kinds: list[Kind] = []
    for kind in KINDS:
        kinds += [k for k in kind.renders if k not in kinds]
    return kinds
