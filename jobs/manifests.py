"""Render a job's cluster objects. Pure: models in, dicts out.

The job's workload kind (`jobs/kinds/`: Kueue training, Volcano gang, inference), found by
its kind and its flavor's scheduler, renders the whole job and says which fields of its
objects belong to other controllers.
"""

from cluster.fields import Ownership
from schedulers.workloads import object_name, pod_templates_of

from .kinds import for_job, rendered_kinds
from .models import Job

__all__ = ["JOB_KINDS", "job_fields", "object_name", "pod_templates_of", "render_job"]

# Every kind a job of any workload kind can own, so prune and offboarding look through them all.
JOB_KINDS = rendered_kinds()


def render_job(job: Job) -> list[dict]:
    """The objects of one job, as its workload kind renders them."""
    return for_job(job).render(job)


def job_fields(job: Job) -> Ownership:
    """Which fields of the job's objects belong to other controllers."""
    return for_job(job).fields
