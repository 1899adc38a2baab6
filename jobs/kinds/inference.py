"""Inference on any flavor: a Deployment + Service (+ an HPA when it may scale), placed in
the team's queue the way the flavor's scheduler says (`Scheduler.inference_placement`;
`schedulers.workloads`: the renderer and the reading of its replicas)."""

import schedulers
from schedulers.workloads import (
    DEPLOYMENT,
    INFERENCE_FIELDS,
    INFERENCE_KINDS,
    object_name,
    observe_inference,
    render_inference,
)

from .. import spec
from .base import WorkloadKind


def render(job) -> list[dict]:
    return render_inference(job, schedulers.for_flavor(job.flavor))


def observe(job, seen):
    return observe_inference(job, seen.named(DEPLOYMENT), seen.pods(), seen.ceiling_gpus)


def pod_pattern(job) -> str:
    # A Deployment's pods: <deployment>-<pod-template-hash, at most 10>-<5 random characters>.
    return rf"{object_name(job)}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"


KIND = WorkloadKind(
    name="inference",
    job_kind=spec.INFERENCE,
    schedulers=spec.SCHEDULERS,
    renders=tuple(INFERENCE_KINDS),
    watched=((DEPLOYMENT, True),),
    fields=INFERENCE_FIELDS,
    render=render,
    observe=observe,
    pod_pattern=pod_pattern,
)
