"""Inference on any flavor: a Deployment + Service, and when it may scale an HPA on CPU or a
KEDA ScaledObject on GPU utilization (`workloads.autoscaling`), placed in the team's queue the
way the flavor's scheduler says (`Scheduler.inference_placement`; `workloads.pods`: the
renderer and the reading of its replicas). It runs until cancelled, scales with replicas (not
workers), and its GPUs wait for traffic by design: the idle sweep never reclaims it."""

import workloads
from workloads.autoscaling import Autoscale, gpu_scaling, unavailable
from workloads.serving import (
    DEPLOYMENT,
    INFERENCE_FIELDS,
    INFERENCE_KINDS,
    object_name,
    observe_inference,
    render_inference,
)

from .. import spec
from .admission import PODS, SERVICES, Admitted, Queue
from .base import GpuShape, Integration, Preset, Soak, WorkKind

NAME = "inference"
# A port-forward to a local port below 1024 needs root; a server on one is reached on this.
LOCAL_PORT = 8080


def replicas_within_quota(job) -> int:
    """The most replicas the team's quota on the flavor can ever run, borrowing included, at
    most the job's maximum: KEDA's HPA never asks for replicas that could only wait."""
    return min(job.max_replicas, job.quota_ceiling_gpus() // job.gpus_per_worker)


def _render(job) -> list[dict]:
    gpu = None
    if job.autoscale_metric == Autoscale.GPU and job.max_replicas > job.min_replicas:
        gpu = gpu_scaling(job, _pods(job), replicas_within_quota(job))
    return render_inference(job, workloads.for_flavor(job.flavor), gpu)


def _observe(job, seen):
    return observe_inference(job, seen.named(DEPLOYMENT), seen.pods(), seen.ceiling_gpus)


def _endpoint(job) -> dict | None:
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


def _pods(job) -> str:
    # A Deployment's pods: <deployment>-<pod-template-hash, at most 10>-<5 random characters>.
    return rf"{object_name(job)}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}"


def replicas(job, flavor) -> dict[str, str]:
    """A server's port and replica bounds; it scales with replicas, not workers."""
    errors = {}
    if job.port is None:
        errors["port"] = "An inference server needs the port it listens on."
    if job.min_replicas is None:
        errors["min_replicas"] = "Give the smallest number of replicas (at least 1)."
    if job.max_replicas is None:
        errors["max_replicas"] = "Give the largest number of replicas."
    elif job.min_replicas and job.max_replicas < job.min_replicas:
        errors["max_replicas"] = "Must be at least the minimum number of replicas."
    if job.workers != 1:
        errors["workers"] = "Inference scales with replicas; leave workers at 1."
    return errors


def scaling_available(job, flavor) -> dict[str, str]:
    if job.autoscale_metric == Autoscale.GPU and (why := unavailable()):
        return {"autoscale_metric": why}
    return {}


# How the shared Deployment waits in the team's queue on each scheduler (`Scheduler.inference_placement`).
QUEUES = {spec.KUEUE: Queue.KUEUE, spec.VOLCANO: Queue.VOLCANO_PODS}
REPLICA_SET = ("apps/v1", "ReplicaSet")


def _integration(scheduler: str) -> Integration:
    return Integration(
        name=NAME,
        scheduler=scheduler,
        renders=tuple(INFERENCE_KINDS),
        watched=((DEPLOYMENT, True),),
        fields=INFERENCE_FIELDS,
        render=_render,
        observe=_observe,
        pod_pattern=_pods,
        admits=(Admitted(DEPLOYMENT, queue=(QUEUES[scheduler],), makes=(Admitted(REPLICA_SET, makes=(PODS,)),)),
                SERVICES),
        endpoint=_endpoint,
    )


KIND = WorkKind(
    name=NAME,
    label="Inference",
    integrations=tuple(_integration(scheduler) for scheduler in spec.SCHEDULERS),
    takes=("port", "min_replicas", "max_replicas", "readiness_path", "readiness_initial_delay_seconds",
           "model_load_seconds", "autoscaling_target_cpu_percent", "autoscale_metric", "target_gpu_utilization_percent"),
    requires=("port", "min_replicas", "max_replicas"),
    shape=GpuShape(most="max_replicas", start="min_replicas", unit="replica"),
    presets=(Preset("inference", "Inference server", dict(
        name="llm-serve", image="vllm/vllm-openai:v0.6.4", command="",
        args="--model /models/llama-3-8b --port 8000", workers=1, gpus_per_worker=1, gpu_memory_gib=18,
        cpu_per_worker=8, memory_per_worker_gib=64, port=8000, min_replicas=1, max_replicas=2,
        readiness_path="/health", model_load_seconds=900, autoscaling_target_cpu_percent=70)),),
    checks=(replicas, scaling_available),
    runs_until_cancelled="serving",
    removed_when_ended=True,
    autoscaled=True,
    idle_words="Inference servers are never reclaimed: their GPUs wait for traffic by design, and the "
               "autoscaler scales them.",
    # A time-sliced T4 and a MIG slice: servers share GPUs.
    soak=Soak(flavors={spec.KUEUE: "t4-shared", spec.VOLCANO: "mig-1g-10gb"}, fields=lambda workers, replicas: dict(
        args=["serve.py"], port=8080, min_replicas=1, max_replicas=replicas, readiness_path="/healthz",
        readiness_initial_delay_seconds=0)),
)
