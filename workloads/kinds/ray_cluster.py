"""An interactive Ray cluster on a Kueue flavor (docs/ray.md): a suspended RayCluster (a head
and a GPU worker group) that runs until cancelled, and a Service of its dashboard; Kueue admits
it whole, the KubeRay operator makes its pods (`workloads.ray`)."""

from workloads import kueue, ray
from workloads.pods import SERVICE, SERVICE_FIELDS, object_name

from .. import spec
from .admission import PODS, SERVICES, Admitted, Queue
from .base import Integration, Preset, Soak, WorkKind
from .ray_job import RAY_IMAGE, RAY_SHAPE, ray_worker

NAME = "ray-cluster"


def _observe(job, seen):
    return ray.observe_ray(job, seen.owned(kueue.WORKLOAD), seen.named(ray.RAY_CLUSTER))


def _pods(job) -> str:
    # KubeRay names a RayCluster's pods <cluster>-head-<5> and <cluster>-<group>-worker-<5>.
    return rf"{object_name(job)}-(head|{ray.WORKER_GROUP}-worker)-[a-z0-9]{{5}}"


def _endpoint(job) -> dict:
    """The head's dashboard (and Ray client port) through the Service the kind renders."""
    service, namespace, port = ray.dashboard_service_name(job), job.team.namespace_name, ray.DASHBOARD_PORT
    return {"service": service, "namespace": namespace, "port": port, "local_port": port,
            "address": f"http://{service}.{namespace}.svc.cluster.local:{port}",
            "port_forward": ray.port_forward_line(job)}


KIND = WorkKind(
    name=NAME,
    label="Ray cluster",
    integrations=(Integration(
        name="ray-cluster",
        scheduler=spec.KUEUE,
        renders=(ray.RAY_CLUSTER, SERVICE),
        watched=((ray.RAY_CLUSTER, True), (kueue.WORKLOAD, False)),
        fields={**ray.RAY_CLUSTER_FIELDS, **SERVICE_FIELDS},
        gated=ray.RAY_CLUSTER,
        render=ray.render_ray_cluster,
        observe=_observe,
        pod_pattern=_pods,
        # KubeRay makes its pods and Services; the dashboard's Service is ours.
        admits=(Admitted(ray.RAY_CLUSTER, queue=(Queue.KUEUE,), makes=(PODS, SERVICES)), SERVICES),
        endpoint=_endpoint,
    ),),
    takes=("workers",),
    shape=RAY_SHAPE,
    head_without_gpus=True,
    holds_gpus=ray_worker,
    presets=(Preset("ray-cluster", "Interactive Ray cluster", dict(
        name="ray-dev", image=RAY_IMAGE, workers=2, gpus_per_worker=1, cpu_per_worker=8,
        memory_per_worker_gib=64)),),
    runs_until_cancelled="up (its dashboard: see the job page)",
    idle_words="Ray clusters are never reclaimed: they are interactive and hold their state in memory; cancel "
               "yours when you are done with it.",
    soak=Soak(flavors={spec.KUEUE: "h100"}, long_lived=True, fields=lambda workers, replicas: {"workers": workers}),
)
