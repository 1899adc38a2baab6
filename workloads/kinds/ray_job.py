"""A Ray job on a Kueue flavor (docs/ray.md): a suspended RayJob (entrypoint, runtime
environment, a head and a GPU worker group, shut down when the job ends); Kueue makes a
Workload for it and admits it, the KubeRay operator makes its cluster and submits the
entrypoint (`workloads.ray`). Its entrypoint is required and its runtime environment is a YAML
mapping of bounded size."""

import yaml

from workloads import kueue, ray
from workloads.pods import object_name

from .. import spec
from .admission import PODS, SERVICES, Admitted, Queue
from .base import GpuShape, Integration, Preset, Soak, WorkKind

NAME = "ray-job"
RAY_IMAGE = "rayproject/ray:2.52.0-py312-gpu"
ENTRYPOINT_MAX_CHARS = 4096
# Ray's heads hold no GPU: what a Ray kind asks is its workers' GPUs, as Kueue counts it.
RAY_SHAPE = GpuShape(most="workers", start="workers")


def ray_worker(pod: dict) -> bool:
    """A Ray pod that holds GPUs: a worker (KubeRay labels its pods by node type); the head and
    a RayJob's submitter hold none."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(ray.NODE_TYPE_LABEL) == "worker"


def _observe(job, seen):
    # KubeRay names the RayJob's cluster itself; it owns it and copies our labels onto it.
    return ray.observe_ray(job, seen.owned(kueue.WORKLOAD), seen.named(ray.RAY_JOB), seen.owned(ray.RAY_CLUSTER))


def _pods(job) -> str:
    # KubeRay names a RayJob's cluster <rayjob>-<5 random characters>, its pods
    # <cluster>-head-<5> and <cluster>-<group>-worker-<5>; the submitter Job's pods <rayjob>-<5>.
    rand = "[a-z0-9]{5}"
    return rf"{object_name(job)}-{rand}(-(head|{ray.WORKER_GROUP}-worker)-{rand})?"


def runtime_env_problem(text: str) -> str:
    """Why `text` is not a runtime environment Ray takes ("" when it is)."""
    if not text:
        return ""
    if len(text.encode()) > spec.TEXT_BOUNDS.total_bytes:
        return f"At most {spec.TEXT_BOUNDS.total_bytes // 1024} KiB of YAML."
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return f"Not valid YAML{where}: give a mapping such as 'pip: [torch]'."
    if not isinstance(value, dict):
        return "Give a YAML mapping such as 'pip: [torch]' or 'env_vars: {A: b}'."
    return ""


def entrypoint_and_environment(job, flavor) -> dict[str, str]:
    errors = {}
    if not (job.ray_entrypoint or "").strip():
        errors["ray_entrypoint"] = "A Ray job needs the command it runs, e.g. python train.py."
    if why := runtime_env_problem(job.ray_runtime_env or ""):
        errors["ray_runtime_env"] = why
    return errors


KIND = WorkKind(
    name=NAME,
    label="Ray job",
    integrations=(Integration(
        name="ray-job",
        scheduler=spec.KUEUE,
        renders=(ray.RAY_JOB,),
        # The RayCluster KubeRay makes for it carries the RayJob's labels (ours): watched by them.
        watched=((ray.RAY_JOB, True), (ray.RAY_CLUSTER, True), (kueue.WORKLOAD, False)),
        fields=ray.RAY_JOB_FIELDS,
        gated=ray.RAY_JOB,
        render=ray.render_ray_job,
        observe=_observe,
        pod_pattern=_pods,
        # KubeRay makes its cluster (with its labels, queue included), the cluster's pods and
        # Services, and a Service of the RayJob's own.
        admits=(Admitted(ray.RAY_JOB, queue=(Queue.KUEUE,), makes=(
            Admitted(ray.RAY_CLUSTER, queue=(Queue.KUEUE,), labelled=True, makes=(PODS, SERVICES)), SERVICES)),),
    ),),
    takes=("workers", "ray_entrypoint", "ray_runtime_env"),
    requires=("ray_entrypoint",),
    shape=RAY_SHAPE,
    head_without_gpus=True,
    holds_gpus=ray_worker,
    presets=(Preset("ray-job", "Ray job", dict(
        name="ray-train", image=RAY_IMAGE, ray_entrypoint="python train.py --epochs 3",
        ray_runtime_env="pip:\n  - torch\n", workers=2, gpus_per_worker=1, cpu_per_worker=8,
        memory_per_worker_gib=64)),),
    checks=(entrypoint_and_environment,),
    idle_words="Ray jobs are never reclaimed: the platform cannot stop a Ray job's workload and keep its "
               "results; cancel it yourself when it is idle.",
    # Nothing runs inside the local cluster's fake pods: it ends only by a cancel.
    soak=Soak(flavors={spec.KUEUE: "h100"}, long_lived=True,
              fields=lambda workers, replicas: {"ray_entrypoint": "python train.py", "workers": workers}),
)
