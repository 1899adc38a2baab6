"""Inference on any flavor: a Deployment + Service, and when it may scale an HPA on CPU or a
KEDA ScaledObject on GPU utilization (`jobs.autoscaling`), placed in the team's queue the way
the flavor's scheduler says (`Scheduler.inference_placement`; `schedulers.workloads`: the
renderer and the reading of its replicas)."""

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
from ..autoscaling import gpu_scaling
from ..models import Job
from ..queueing import ceiling_of
from .base import WorkloadKind


def replicas_within_quota(job) -> int:
    """The most replicas the team's quota on the flavor can ever run, borrowing included, at
    most the job's maximum: KEDA's HPA never asks for replicas that could only wait."""
    return min(job.max_replicas, ceiling_of(job.team, job.flavor) // job.gpus_per_worker)


def render(job) -> list[dict]:
    gpu = None
    if job.autoscale_metric == Job.Autoscale.GPU and job.max_replicas > job.min_replicas:
        gpu = gpu_scaling(job, pod_pattern(job), replicas_within_quota(job))
    return render_inference(job, schedulers.for_flavor(job.flavor), gpu)


def observe(job, seen):
    return observe_inference(job, seen.named(DEPLOYMENT), seen.pods(), seen.ceiling_gpus)


# A port-forward to a local port below 1024 needs root; a server on one is reached on this.
LOCAL_PORT = 8080


def endpoint(job) -> dict | None:
    """Where the server answers: its Service, in the cluster and by port-forward."""
    if job.port is None:
        return None
    service, namespace = object_name(job), job.team.namespace_name
    local = job.port if job.port >= 1024 else LOCAL_PORT
    return {
        "service": service, "namespace": namespace, "port": job.port, "local_port": local,
        "address": f"http://{service}.{namespace}.svc.cluster.local:{job.port}",
        "port_forward": f"kubectl -n {namespace} port-forward service/{service} {local}:{job.port}",
    }


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
    endpoint=endpoint,
)
