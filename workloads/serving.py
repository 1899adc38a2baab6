"""Inference servers on every scheduler: a Deployment + Service, and when it may scale an HPA
on CPU or a KEDA ScaledObject on GPU utilization; and the reading of its replicas. The pod
template is the hardened one every workload shares (`workloads.pods`).
"""

from collections.abc import Callable
from dataclasses import dataclass

from cluster import MANAGED_BY_LABEL
from cluster.fields import FieldRules
from core.ownership import JOB_LABEL

from .base import EXCEEDS_QUOTA, Observation, Phase
from .pods import SERVICE, SERVICE_FIELDS, container, job_owned, object_name, pod_labels, pod_spec, probes

# The part every object and pod of a server plays (app.kubernetes.io/component).
COMPONENT = "server"
DEPLOYMENT = ("apps/v1", "Deployment")
HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
SCALED_OBJECT = ("keda.sh/v1alpha1", "ScaledObject")
PDB = ("policy/v1", "PodDisruptionBudget")
INFERENCE_KINDS = [DEPLOYMENT, SERVICE, HPA, SCALED_OBJECT, PDB]
# KEDA makes an HPA for each ScaledObject and copies the ScaledObject's labels onto it, but
# not those this annotation names: without our managed-by label that HPA is KEDA's, never
# one of ours to prune (`cluster.objects.prune_victims`).
KEDA_HPA_EXCLUDED_LABELS = "scaledobject.keda.sh/hpa-excluded-labels"
# dcgm-exporter's per-GPU utilization (percent), labelled with the pod that holds the GPU.
GPU_UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"
DEFAULT_TARGET_CPU_PERCENT = 70
DEFAULT_TARGET_GPU_PERCENT = 70
# How long a replica may take to answer its probe path at all (a model loading) before the
# kubelet restarts it: the startup probe's budget, the job's `model_load_seconds`.
DEFAULT_MODEL_LOAD_SECONDS = 900
MODEL_LOAD_SECONDS_BOUNDS = (30, 4 * 3600)
# At most one replica of a server of several away at a time for a node drain; a replica that
# is not ready (crash-looping) never blocks one. A single replica has no budget: it would block
# every drain of its node.
MAX_UNAVAILABLE = 1
# The HPA (ours on CPU, KEDA's on GPU utilization, or `kubectl scale`) sets replicas through
# the scale subresource; we start the Deployment at the minimum. A Deployment's selector
# and a Service's clusterIP cannot change.
INFERENCE_FIELDS = {
    ("apps", "Deployment"): FieldRules(create_only=("spec.replicas",), immutable=("spec.selector",)),
    **SERVICE_FIELDS,
}


@dataclass(frozen=True)
class GpuScaling:
    """What a ScaledObject on GPU utilization needs beyond the job: where KEDA asks Prometheus
    (and with which ClusterTriggerAuthentication), the job's pods as a regular expression of
    their names (dcgm-exporter labels a GPU's series with its pod's name and namespace), the
    most replicas the team's quota lets it run, and how fast KEDA's HPA moves."""

    server_address: str
    pods: str
    max_replicas: int
    polling_seconds: int = 30
    scale_down_window_seconds: int = 300
    authentication: str = ""  # a ClusterTriggerAuthentication's name; empty: none
    auth_modes: str = ""      # KEDA's prometheus authModes for it: bearer, basic, tls, ...


def gpu_utilization_query(namespace: str, pods: str) -> str:
    """The average utilization of every GPU of the pods whose names match ``pods`` (whole)."""
    return f'avg({GPU_UTILIZATION}{{namespace="{namespace}",pod=~"{pods}"}})'


def render_scaled_object(job, name: str, namespace: str, gpu: GpuScaling) -> dict:
    """A KEDA ScaledObject keeping the average GPU utilization of the job's pods at its target.

    metricType Value: the HPA KEDA makes wants ceil(replicas x average / target) replicas, as
    a CPU utilization target does; at most ``gpu.max_replicas``, never below the minimum."""
    trigger = {
        "type": "prometheus",
        "metricType": "Value",
        "metadata": {
            "serverAddress": gpu.server_address,
            "query": gpu_utilization_query(namespace, gpu.pods),
            "threshold": str(job.target_gpu_utilization_percent or DEFAULT_TARGET_GPU_PERCENT),
            # No series yet (no pod placed, Prometheus not scraped it): 0, not an error.
            "ignoreNullValues": "true",
        },
    }
    if gpu.authentication:
        trigger["metadata"]["authModes"] = gpu.auth_modes
        trigger["authenticationRef"] = {"name": gpu.authentication, "kind": "ClusterTriggerAuthentication"}
    return job_owned(job, {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {KEDA_HPA_EXCLUDED_LABELS: MANAGED_BY_LABEL}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicaCount": job.min_replicas,
            "maxReplicaCount": max(job.min_replicas, gpu.max_replicas),
            "pollingInterval": gpu.polling_seconds,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                "scaleDown": {"stabilizationWindowSeconds": gpu.scale_down_window_seconds}}}},
            "triggers": [trigger],
        },
    }, COMPONENT)


def spread(job) -> dict:
    """A server that may run several replicas spreads them over nodes where it can (one node
    lost takes one replica, not all); never a reason to leave one unscheduled. Per rollout
    (``pod-template-hash``), so a new revision spreads on its own."""
    if job.max_replicas <= 1:
        return {}
    return {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {JOB_LABEL: str(job.pk)}}, "matchLabelKeys": ["pod-template-hash"]}]}


def render_disruption_budget(job, name: str, namespace: str) -> dict:
    """Voluntary disruptions (a node drain) take at most one replica of the server at a time."""
    return job_owned(job, {
        "apiVersion": PDB[0], "kind": PDB[1],
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"maxUnavailable": MAX_UNAVAILABLE, "selector": {"matchLabels": {JOB_LABEL: str(job.pk)}},
                 "unhealthyPodEvictionPolicy": "AlwaysAllow"},
    }, COMPONENT)


def render_inference(job, scheduler, gpu: GpuScaling | None = None) -> list[dict]:
    """Deployment + Service, queued the way `scheduler` says, and when it may scale an HPA on
    CPU, or with ``gpu`` a KEDA ScaledObject on GPU utilization (KEDA owns the HPA it makes)."""
    name, namespace = object_name(job), job.team.namespace_name
    checks = probes({"httpGet": {"path": job.readiness_path or "/", "port": job.port}}, job.model_load_seconds,
                    readiness_delay_seconds=job.readiness_initial_delay_seconds)
    main = container(job, [], [{"name": "http", "containerPort": job.port}], checks)
    deployment_labels, pod_annotations, extra = scheduler.inference_placement(job, namespace)
    # The queue labels on the pods too (Kueue's webhook would copy them; stated, the pods'
    # queue and priority class are ours and shown in the preview).
    pod_meta: dict = {"labels": {**deployment_labels, **pod_labels(job, COMPONENT)}}
    if pod_annotations:
        pod_meta["annotations"] = pod_annotations
    objects = [
        job_owned(job, {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name, "namespace": namespace, "labels": deployment_labels},
         "spec": {
             "replicas": job.min_replicas,
             "selector": {"matchLabels": {JOB_LABEL: str(job.pk)}},
             "template": {"metadata": pod_meta, "spec": pod_spec(job, main, restartPolicy="Always", **extra,
                                                                  **spread(job))},
         }}, COMPONENT),
        job_owned(job, {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"type": "ClusterIP", "selector": {JOB_LABEL: str(job.pk)},
                  "ports": [{"name": "http", "port": job.port, "targetPort": "http"}]}}, COMPONENT),
    ]
    if job.max_replicas > 1:
        objects.append(render_disruption_budget(job, name, namespace))
    if job.max_replicas > job.min_replicas and gpu is not None:
        objects.append(render_scaled_object(job, name, namespace, gpu))
    elif job.max_replicas > job.min_replicas:
        objects.append(job_owned(job, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": job.min_replicas,
                "maxReplicas": job.max_replicas,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                    "type": "Utilization",
                    "averageUtilization": job.autoscaling_target_cpu_percent or DEFAULT_TARGET_CPU_PERCENT}}}],
            },
        }, COMPONENT))
    return objects


def observe_inference(job, deployment: dict | None, pods: list[dict],
                      ceiling_gpus: Callable[[], int | None] = lambda: None) -> Observation | None:
    """``ceiling_gpus()``: the most GPUs the team can use on the flavor (None: unknown); asked
    only of a server with no replica placed yet."""
    if deployment is None:
        return None
    ready = ((deployment.get("status") or {}).get("readyReplicas")) or 0
    if ready >= (job.min_replicas or 1):
        return Observation(Phase.RUNNING, "Serving", f"{ready} replica{'s' if ready != 1 else ''} ready.")
    gated = [p for p in pods if (p.get("spec") or {}).get("schedulingGates")]
    placed = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    if placed and not gated:
        return Observation(Phase.ADMITTED, "Starting", "Replicas are starting; waiting for the readiness probe.")
    if not placed and (ceiling := ceiling_gpus()) is not None and job.gpus_to_start > ceiling:
        return Observation(Phase.QUEUED, EXCEEDS_QUOTA,
                           f"Can never start: its {job.min_replicas} replica{'s' if job.min_replicas != 1 else ''} "
                           f"need {job.gpus_to_start} {job.flavor.name} GPUs but team {job.team.slug} can use at "
                           f"most {ceiling}, borrowing included.")
    return Observation(Phase.QUEUED, "WaitingForQuota", "Waiting for quota to start the first replica.")

