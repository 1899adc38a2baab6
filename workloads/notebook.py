"""Interactive notebooks on a Kueue flavor (docs/notebooks.md): the renderer and the reader of
a notebook's StatefulSet (one replica), its Service and, where settings give a host pattern,
its Ingress.

Kueue's StatefulSet integration (v0.17+: `statefulset` beside `pod` in its frameworks) queues
the StatefulSet by its queue label: its mutating webhook marks the pod template as suspended
by its parent, the pod webhook gates the pod, and Kueue makes one pod-group Workload of all
replicas, admits it and ungates the pod. Kueue allows only two changes of `spec.replicas`
on a queued StatefulSet, to 0 and from 0: the platform's stop and start. At 0 Kueue releases
the Workload's quota (v0.19 keeps it on hold, `QuotaReserved=False` reason `OnHold`; v0.17
deleted it) and the pod is deleted (the GPUs go back; the claim of a volume mounted at
/home/user stays, it is the team's); from 0 the Workload queues again.

A notebook always runs under the top priority class (`kueue.PROTECTED_PRIORITY_CLASS`), so
nothing preempts it for priority, and is let in only when it fits the team's own nominal
quota (`jobs.models.notebook`); Kueue's reclaim of borrowed GPUs takes the lower-priority
workloads of a borrowing ClusterQueue first and stops once it is back within nominal quota,
so it never reaches a notebook that fitted there.
"""

from cluster.fields import FieldRules
from core.ownership import JOB_LABEL

from . import gates
from .base import Observation, Phase, placed_gpus
from .kueue import PRIORITY_LABEL, PROTECTED_PRIORITY_CLASS, QUEUE_LABEL, local_queue_name, observe_training
from .pods import SERVICE, SERVICE_FIELDS, container, job_owned, object_name, pod_labels, pod_spec, probes

STATEFULSET = ("apps/v1", "StatefulSet")
INGRESS = ("networking.k8s.io/v1", "Ingress")
NOTEBOOK_KINDS = (STATEFULSET, SERVICE, INGRESS)
# The part every object and pod of a notebook plays (app.kubernetes.io/component).
COMPONENT = "notebook"
DEFAULT_PORT = 8888
DEFAULT_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-2025-10-20"
# How long JupyterLab may take to listen on its port (its home's volume attached, its server
# started) before the kubelet restarts it: the startup probe's budget.
STARTUP_SECONDS = 300

# Kueue allows no change of a queued StatefulSet's pod template (and Kubernetes none of its
# selector or service name); the replicas are ours for its life: 1 running, 0 stopped. A held
# notebook's admission gate is set at creation and only ever taken away (`workloads.gates`).
NOTEBOOK_FIELDS = {
    ("apps", "StatefulSet"): FieldRules(create_only=(gates.FIELD,),
                                        immutable=("spec.template", "spec.selector", "spec.serviceName")),
    **SERVICE_FIELDS,
}


def replicas(job) -> int:
    """1 while the notebook should run; 0 once stopped (its GPUs go back, its volumes stay)."""
    return 0 if job.state == Phase.STOPPED else 1


def governing_service_name(job) -> str:
    """The headless Service that gives the StatefulSet's pod its stable host name."""
    return f"{object_name(job)}-headless"


def _service(job, name: str, port: int, **spec) -> dict:
    return job_owned(job, {"apiVersion": "v1", "kind": "Service",
                           "metadata": {"name": name, "namespace": job.team.namespace_name},
                           "spec": {**spec, "selector": {JOB_LABEL: str(job.pk)},
                                    "ports": [{"name": "http", "port": port, "targetPort": "http"}]}}, COMPONENT)


def render_notebook(job, ingress_host: str = "", ingress_class: str = "") -> list[dict]:
    """The notebook's StatefulSet (queued, one replica or none), the headless Service that
    governs it, its ClusterIP Service (port-forward, the Ingress) and, with a host, an Ingress
    to that Service. A notebook made before the headless Service existed keeps the ClusterIP
    Service as its ``serviceName`` (immutable): only its pod's DNS name is missing."""
    name, namespace, port = object_name(job), job.team.namespace_name, job.port or DEFAULT_PORT
    main = container(job, [], [{"name": "http", "containerPort": port}],
                     probes({"tcpSocket": {"port": "http"}}, STARTUP_SECONDS))
    main["name"] = "notebook"
    labels = {QUEUE_LABEL: local_queue_name(job.flavor), PRIORITY_LABEL: PROTECTED_PRIORITY_CLASS}
    objects = [
        _service(job, name, port, type="ClusterIP"),
        _service(job, governing_service_name(job), port, clusterIP="None"),
        job_owned(job, {"apiVersion": "apps/v1", "kind": "StatefulSet",
                        "metadata": {"name": name, "namespace": namespace, "labels": labels},
                        "spec": {
                            "replicas": replicas(job),
                            "serviceName": governing_service_name(job),
                            "selector": {"matchLabels": {JOB_LABEL: str(job.pk)}},
                            # The queue labels on the pod too, as Kueue's StatefulSet integration
                            # sets them: without that integration the pod integration would still
                            # queue the pod alone, never let it run outside the quota.
                            "template": {"metadata": {"labels": {**labels, **pod_labels(job, COMPONENT)}},
                                         "spec": pod_spec(job, main, restartPolicy="Always")},
                        }}, COMPONENT),
    ]
    if ingress_host:
        spec: dict = {"rules": [{"host": ingress_host, "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": name, "port": {"name": "http"}}}}]}}]}
        if ingress_class:
            spec["ingressClassName"] = ingress_class
        objects.append(job_owned(job, {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                       "metadata": {"name": name, "namespace": namespace}, "spec": spec}, COMPONENT))
    return objects


def observe_notebook(job, workload: dict | None, statefulset: dict | None, pods: list[dict]) -> Observation | None:
    """A notebook's state: stopped while the platform keeps it so (the pod may still be
    leaving); otherwise Kueue's Workload says queued (and why), admitted or preempted, and
    the StatefulSet's ready replica says the notebook is ready."""
    if job.state == Phase.STOPPED:
        return Observation(Phase.STOPPED, job.reason or "Stopped", job.message or "Stopped.", gpus=0)
    if statefulset is None or (statefulset.get("spec") or {}).get("replicas") == 0:
        return None  # started again, not applied yet: nothing to say
    seen = observe_training(job, workload, None)
    if seen is None or seen.state != Phase.ADMITTED:
        return seen
    ready = ((statefulset.get("status") or {}).get("readyReplicas")) or 0
    if ready >= 1:
        return Observation(Phase.RUNNING, "NotebookReady", "Notebook ready.", gpus=placed_gpus(job, pods),
                           times=seen.times)
    return Observation(Phase.ADMITTED, "Starting", "Quota reserved; the notebook is starting.", times=seen.times)
