"""An interactive Ray cluster on a Kueue flavor: a suspended RayCluster (a head and a GPU
worker group) that runs until cancelled, and a Service of its dashboard; Kueue admits it whole,
the KubeRay operator makes its pods (`schedulers.ray`)."""

from schedulers import kueue, ray
from schedulers.workloads import SERVICE, SERVICE_FIELDS, object_name

from .. import spec
from .base import WorkloadKind


def observe(job, seen):
    return ray.observe_ray(job, seen.owned(kueue.WORKLOAD), seen.named(ray.RAY_CLUSTER))


def pod_pattern(job) -> str:
    # KubeRay names a RayCluster's pods <cluster>-head-<5> and <cluster>-<group>-worker-<5>.
    return rf"{object_name(job)}-(head|{ray.WORKER_GROUP}-worker)-[a-z0-9]{{5}}"


def endpoint(job) -> dict:
    """The head's dashboard (and Ray client port) through the Service the kind renders."""
    service, namespace, port = ray.dashboard_service_name(job), job.team.namespace_name, ray.DASHBOARD_PORT
    return {"service": service, "namespace": namespace, "port": port, "local_port": port,
            "address": f"http://{service}.{namespace}.svc.cluster.local:{port}",
            "port_forward": ray.port_forward_line(job)}


KIND = WorkloadKind(
    name="ray-cluster",
    job_kind=spec.RAY_CLUSTER,
    schedulers=(spec.KUEUE,),
    renders=(ray.RAY_CLUSTER, SERVICE),
    watched=((ray.RAY_CLUSTER, True), (kueue.WORKLOAD, False)),
    fields={**ray.RAY_CLUSTER_FIELDS, **SERVICE_FIELDS},
    render=ray.render_ray_cluster,
    observe=observe,
    pod_pattern=pod_pattern,
    endpoint=endpoint,
)
