"""Ray on the KubeRay operator, queued by Kueue (its `ray.io/rayjob` and `ray.io/raycluster`
integrations; docs/ray.md): the renderers and readers of RayJobs and RayClusters.

A Ray object is created with `spec.suspend: true` and the team's queue label, like a batch
Job; Kueue admits it whole (the head and each worker group are pod sets of one Workload),
unsuspends it, and suspends it again to preempt. KubeRay then makes the head and worker pods
(a RayJob's entrypoint it submits to the head's dashboard itself, HTTPMode). Kueue (v0.17 to v0.19) refuses a queued
RayJob that keeps its cluster after the job (`shutdownAfterJobFinishes` must be true) and a
queued RayCluster with the Ray autoscaler on (only with its alpha ElasticJobsViaWorkloadSlices
gate), so the worker count is fixed: what Kueue admitted is what runs.
"""

from dataclasses import replace

from cluster.fields import FieldRules
from cluster.quantity import gib
from core.ownership import JOB_LABEL

from . import gates
from .base import Observation, Phase, times_of
from .kueue import (
    MAX_EXEC_LABEL,
    PRIORITY_LABEL,
    PROTECTED_PRIORITY_CLASS,
    QUEUE_LABEL,
    local_queue_name,
    observe_training,
)
from .pods import FINISHED_TTL_SECONDS, container, job_owned, object_name, pod_labels, pod_spec, with_local_disk

API = "ray.io/v1"
RAY_JOB = (API, "RayJob")
RAY_CLUSTER = (API, "RayCluster")
WORKER_GROUP = "workers"
DASHBOARD_PORT = 8265
GCS_PORT = 6379
CLIENT_PORT = 10001
# The head runs Ray's control plane (GCS, dashboard, the driver of a RayJob), no GPU work.
HEAD_CPU, HEAD_MEMORY_GIB = 2, 8
# KubeRay's labels on the pods it makes.
CLUSTER_LABEL, NODE_TYPE_LABEL = "ray.io/cluster", "ray.io/node-type"

# Kueue unsuspends an admitted Ray object and suspends it to preempt; it injects the flavor's
# placement into the pod templates at admission. KubeRay rejects changes to a RayJob's
# cluster spec once it runs, and a RayCluster's groups are what Kueue admitted. A held job's
# admission gate is set at creation and only ever taken away (`workloads.gates`).
RAY_JOB_FIELDS = {
    ("ray.io", "RayJob"): FieldRules(
        create_only=("spec.suspend", gates.FIELD),
        immutable=("spec.rayClusterSpec", "spec.entrypoint", "spec.runtimeEnvYAML"),
    ),
}
RAY_CLUSTER_FIELDS = {
    ("ray.io", "RayCluster"): FieldRules(
        create_only=("spec.suspend", gates.FIELD),
        immutable=("spec.headGroupSpec", "spec.workerGroupSpecs"),
    ),
}


def _queue_labels(job) -> dict:
    labels = {QUEUE_LABEL: local_queue_name(job.flavor)}
    if job.priority_id:
        protected = job.is_protected_from_preemption()
        labels[PRIORITY_LABEL] = PROTECTED_PRIORITY_CLASS if protected else job.priority.name
    return labels


def _template(job, pod: dict, component: str) -> dict:
    """The hardened pod spec with the job's labels, as a pod template. KubeRay keeps them on the
    pods and puts the head's app.kubernetes.io/name in its head Service's selector."""
    return {"metadata": {"labels": pod_labels(job, component)}, "spec": pod}


def _head(job) -> dict:
    main = container(job, [], [{"name": "gcs", "containerPort": GCS_PORT},
                               {"name": "dashboard", "containerPort": DASHBOARD_PORT},
                               {"name": "client", "containerPort": CLIENT_PORT}])
    main["name"] = "ray-head"
    # No GPU on the head: its GPUs would sit idle under the team's quota.
    memory = gib(HEAD_MEMORY_GIB)
    main["resources"] = with_local_disk({"requests": {"cpu": str(HEAD_CPU), "memory": memory},
                                         "limits": {"memory": memory}})
    template = _template(job, pod_spec(job, main), "head")
    # Ray's dashboard listens on localhost unless told otherwise.
    return {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": template}


def _workers(job) -> list[dict]:
    main = container(job, [], [])
    main["name"] = "ray-worker"
    template = _template(job, pod_spec(job, main), "worker")
    return [{
        "groupName": WORKER_GROUP,
        "replicas": job.workers, "minReplicas": job.workers, "maxReplicas": job.workers,
        "rayStartParams": {},
        "template": template,
    }]


def _cluster_spec(job) -> dict:
    return {"headGroupSpec": _head(job), "workerGroupSpecs": _workers(job)}


def render_ray_job(job) -> list[dict]:
    """A suspended RayJob: its entrypoint on a cluster of one head and `workers` GPU workers,
    shut down when the job ends."""
    name, namespace = object_name(job), job.team.namespace_name
    labels = _queue_labels(job)
    if job.max_runtime_seconds:
        labels[MAX_EXEC_LABEL] = str(job.max_runtime_seconds)
    spec = {
        "suspend": True,
        "entrypoint": job.ray_entrypoint,
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
        # The operator submits the entrypoint to the head's dashboard itself: no submitter
        # Job, whose pod KubeRay labels as its own and the team's admission policy refuses.
        "submissionMode": "HTTPMode",
        "rayClusterSpec": _cluster_spec(job),
    }
    if job.ray_runtime_env:
        spec["runtimeEnvYAML"] = job.ray_runtime_env
    return [job_owned(job, {"apiVersion": API, "kind": "RayJob",
                            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}, "ray")]


def dashboard_service_name(job) -> str:
    return f"{object_name(job)}-dashboard"


def render_ray_cluster(job) -> list[dict]:
    """A suspended RayCluster (interactive, until cancelled) and the Service of its head's
    dashboard and client ports, which `kubectl port-forward` reaches."""
    name, namespace = object_name(job), job.team.namespace_name
    cluster = job_owned(job, {"apiVersion": API, "kind": "RayCluster",
                              "metadata": {"name": name, "namespace": namespace, "labels": _queue_labels(job)},
                              "spec": {"suspend": True, **_cluster_spec(job)}}, "ray")
    service = job_owned(job, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": dashboard_service_name(job), "namespace": namespace},
        "spec": {
            "selector": {JOB_LABEL: str(job.pk), CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head"},
            "ports": [{"name": "dashboard", "port": DASHBOARD_PORT, "targetPort": DASHBOARD_PORT},
                      {"name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT}],
        },
    }, "head")
    return [service, cluster]


def port_forward_line(job) -> str:
    """The command that opens a Ray cluster's dashboard on http://localhost:8265."""
    return (f"kubectl -n {job.team.namespace_name} port-forward "
            f"svc/{dashboard_service_name(job)} {DASHBOARD_PORT}:{DASHBOARD_PORT}")


# --- what the cluster says ------------------------------------------------------------------------
def _cluster_status(obj: dict | None, cluster: dict | None) -> dict:
    """The Ray cluster's status: its own (a RayCluster's, or the one KubeRay made for a RayJob),
    else the copy in the RayJob's status, which KubeRay refreshes only on its way through."""
    if cluster is not None or (obj or {}).get("kind") == "RayCluster":
        return ((cluster if cluster is not None else obj).get("status")) or {}
    return ((obj or {}).get("status") or {}).get("rayClusterStatus") or {}


def _head_ready(status: dict) -> bool:
    found = {c.get("type"): c for c in status.get("conditions") or []}
    if "HeadPodReady" in found:
        return found["HeadPodReady"].get("status") == "True"
    return status.get("state") == "ready"


def progress(job, obj: dict | None, cluster: dict | None = None) -> str:
    """"head ready, 3/4 workers" (and Ray's own job status when the operator reports one)."""
    kind = (obj or {}).get("kind", "")
    status = _cluster_status(obj, cluster)
    ready = status.get("readyWorkerReplicas") or 0
    head = "head ready" if _head_ready(status) else "head starting"
    said = f"{head}, {ready}/{job.workers} workers"
    ray_status = ((obj or {}).get("status") or {}).get("jobStatus") if kind == "RayJob" else None
    return f"{said}, Ray job {ray_status}" if ray_status else said


def observe_ray(job, workload: dict | None, obj: dict | None, cluster: dict | None = None) -> Observation | None:
    """A Ray object's state: Kueue's Workload says queued, admitted, preempted or stopped
    (as for a batch Job); KubeRay's status says whether the head and workers are ready
    (`cluster`: the RayCluster KubeRay made for a RayJob) and, for a RayJob, how the job
    ended (`jobDeploymentStatus`, Ray's `jobStatus`)."""
    status = (obj or {}).get("status") or {}
    deployment = status.get("jobDeploymentStatus")
    ended_at = {"lastTransitionTime": status.get("endTime")} if status.get("endTime") else None
    if deployment == "Complete":
        if status.get("jobStatus") == "SUCCEEDED":
            return Observation(Phase.SUCCEEDED, "Completed", "The Ray job succeeded.", times=times_of(succeeded=ended_at))
        return Observation(Phase.FAILED, status.get("reason") or "RayJobFailed",
                           f"The Ray job ended {status.get('jobStatus') or 'without success'}."
                           + (f" {status['message']}" if status.get("message") else ""), times=times_of(failed=ended_at))
    if deployment == "Failed":
        return Observation(Phase.FAILED, status.get("reason") or "RayJobFailed",
                           status.get("message") or "KubeRay marked the Ray job failed.", times=times_of(failed=ended_at))
    seen = observe_training(job, workload, None)
    if seen is None or seen.state != Phase.ADMITTED:
        return seen
    status = _cluster_status(obj, cluster)
    if _head_ready(status) and (status.get("readyWorkerReplicas") or 0) >= job.workers:
        return Observation(Phase.RUNNING, "Running", f"Running: {progress(job, obj, cluster)}.", times=seen.times)
    return replace(seen, message=f"Quota reserved; starting: {progress(job, obj, cluster)}.")
