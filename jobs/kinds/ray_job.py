"""A Ray job on a Kueue flavor: a suspended RayJob (entrypoint, runtime environment, a head and
a GPU worker group, shut down when the job ends); Kueue makes a Workload for it and admits it,
the KubeRay operator makes its cluster and submits the entrypoint (`schedulers.ray`)."""

from schedulers import kueue, ray
from schedulers.workloads import object_name

from .. import spec
from .base import WorkloadKind


def observe(job, seen):
    # KubeRay names the RayJob's cluster itself; it owns it and copies our labels onto it.
    return ray.observe_ray(job, seen.owned(kueue.WORKLOAD), seen.named(ray.RAY_JOB), seen.owned(ray.RAY_CLUSTER))


def pod_pattern(job) -> str:
    # KubeRay names a RayJob's cluster <rayjob>-<5 random characters>, its pods
    # <cluster>-head-<5> and <cluster>-<group>-worker-<5>; the submitter Job's pods <rayjob>-<5>.
    rand = "[a-z0-9]{5}"
    return rf"{object_name(job)}-{rand}(-(head|{ray.WORKER_GROUP}-worker)-{rand})?"


KIND = WorkloadKind(
    name="ray-job",
    job_kind=spec.RAY_JOB,
    schedulers=(spec.KUEUE,),
    renders=(ray.RAY_JOB,),
    # The RayCluster KubeRay makes for it carries the RayJob's labels (ours): watched by them.
    watched=((ray.RAY_JOB, True), (ray.RAY_CLUSTER, True), (kueue.WORKLOAD, False)),
    fields=ray.RAY_JOB_FIELDS,
    render=ray.render_ray_job,
    observe=observe,
    pod_pattern=pod_pattern,
)
