"""An interactive notebook on a Kueue flavor: a one-replica StatefulSet queued by Kueue's
StatefulSet integration, a ClusterIP Service to its port and, where settings give a host
pattern, an Ingress (`schedulers.notebook`: the renderer and the reading of its state).
Stopped and started again (`jobs.models.notebook`), never preempted, within the team's own
quota only (docs/notebooks.md)."""

from django.conf import settings

from schedulers import kueue, notebook
from schedulers.workloads import object_name

from .. import spec
from .base import WorkloadKind


def ingress_host(job) -> str:
    """The notebook's host from ``NOTEBOOK_INGRESS_HOST`` ("" without a pattern)."""
    pattern = settings.NOTEBOOK_INGRESS_HOST
    return pattern.format(job=object_name(job), team=job.team.slug) if pattern else ""


def render(job) -> list[dict]:
    return notebook.render_notebook(job, ingress_host(job), settings.NOTEBOOK_INGRESS_CLASS)


def observe(job, seen):
    return notebook.observe_notebook(job, seen.owned(kueue.WORKLOAD), seen.named(notebook.STATEFULSET), seen.pods())


def pod_pattern(job) -> str:
    # A StatefulSet's pods: <statefulset>-<ordinal>; one replica, so ordinal 0.
    return rf"{object_name(job)}-0"


def endpoint(job) -> dict:
    """The notebook's Service, by port-forward (and its Ingress host when there is one)."""
    service, namespace = object_name(job), job.team.namespace_name
    port = job.port or notebook.DEFAULT_PORT
    local = port if port >= 1024 else 8080
    found = {"service": service, "namespace": namespace, "port": port, "local_port": local,
             "address": f"http://{service}.{namespace}.svc.cluster.local:{port}",
             "port_forward": f"kubectl -n {namespace} port-forward service/{service} {local}:{port}"}
    if host := ingress_host(job):
        found["url"] = f"https://{host}/"
    return found


KIND = WorkloadKind(
    name="notebook",
    job_kind=spec.NOTEBOOK,
    schedulers=(spec.KUEUE,),
    renders=notebook.NOTEBOOK_KINDS,
    watched=((notebook.STATEFULSET, True), (kueue.WORKLOAD, False)),
    fields=notebook.NOTEBOOK_FIELDS,
    render=render,
    observe=observe,
    pod_pattern=pod_pattern,
    endpoint=endpoint,
    stoppable=True,
)
