"""Render a job's cluster objects for its flavor's scheduler. Pure: models in, dicts out.

Training is the scheduler's own (a Kueue batch Job + headless Service, or a Volcano Job
gang); inference is a Deployment + Service + HPA that the scheduler queues
(`schedulers.workloads.render_inference`). See `schedulers/` for each.
"""

import schedulers
from cluster.fields import Ownership
from schedulers.workloads import object_name, pod_templates_of, render_inference

from .models import Job

__all__ = ["JOB_KINDS", "job_fields", "object_name", "pod_templates_of", "render_job"]

# Every kind a job of any scheduler can own, so prune and offboarding look through them all.
JOB_KINDS = schedulers.all_kinds("workload_kinds")


def render_job(job: Job) -> list[dict]:
    """The objects of one job, for its kind and its flavor's scheduler."""
    scheduler = schedulers.for_flavor(job.flavor)
    if job.kind == Job.Kind.INFERENCE:
        return render_inference(job, scheduler)
    return scheduler.render_training(job)


def job_fields(job: Job) -> Ownership:
    """Which fields of the job's objects belong to its scheduler's controllers."""
    return schedulers.for_flavor(job.flavor).fields
