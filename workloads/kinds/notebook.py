"""An interactive notebook on a Kueue flavor: a one-replica StatefulSet queued by Kueue's
StatefulSet integration, a ClusterIP Service to its port and, where settings give a host
pattern, an Ingress (`workloads.notebook`: the renderer and the reading of its state).
Stopped and started again (`jobs.models.notebook`), never preempted, within the team's own
quota only (docs/notebooks.md). A person's stop, its idle GPUs and its lifetime scale it to
nothing and keep it, with its volumes."""

from django.conf import settings

from workloads import kueue, notebook
from workloads.pods import object_name

from .. import spec
from .admission import PODS, SERVICES, Admitted, Queue
from .base import Integration, Preset, Soak, WorkKind

NAME = "notebook"


def ingress_host(job) -> str:
    """The notebook's host from ``NOTEBOOK_INGRESS_HOST`` ("" without a pattern)."""
    pattern = settings.NOTEBOOK_INGRESS_HOST
    return pattern.format(job=object_name(job), team=job.team.slug) if pattern else ""


def _render(job) -> list[dict]:
    return notebook.render_notebook(job, ingress_host(job), settings.NOTEBOOK_INGRESS_CLASS)


def _observe(job, seen):
    return notebook.observe_notebook(job, seen.owned(kueue.WORKLOAD), seen.named(notebook.STATEFULSET), seen.pods())


def _pods(job) -> str:
    # A StatefulSet's pods: <statefulset>-<ordinal>; one replica, so ordinal 0.
    return rf"{object_name(job)}-0"


def _endpoint(job) -> dict:
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


def scale_to_nothing(cluster, job) -> None:
    """A stopped notebook's objects as it renders them now (its StatefulSet at 0 replicas), with
    its field rules: the reconcile's own apply, done at once."""
    cluster.apply(_render(job), rules=notebook.NOTEBOOK_FIELDS)


def one_pod_that_fits(job, flavor) -> dict[str, str]:
    """A notebook is one pod, and about to join the queue it must fit the team's own free
    quota (`Job.nominal_refusal`: never on borrowed GPUs)."""
    errors = {}
    if job.port is None:
        job.port = notebook.DEFAULT_PORT
    if job.workers != 1:
        errors["workers"] = "A notebook is one pod; leave workers at 1."
    if job.is_starting and flavor and job.team_id and (why := job.nominal_refusal()):
        errors["gpus_per_worker"] = why
    return errors


KIND = WorkKind(
    name=NAME,
    label="Notebook",
    integrations=(Integration(
        name=NAME,
        scheduler=spec.KUEUE,
        renders=notebook.NOTEBOOK_KINDS,
        watched=((notebook.STATEFULSET, True), (kueue.WORKLOAD, False)),
        fields=notebook.NOTEBOOK_FIELDS,
        gated=notebook.STATEFULSET,
        render=_render,
        observe=_observe,
        pod_pattern=_pods,
        admits=(Admitted(notebook.STATEFULSET, queue=(Queue.KUEUE,), makes=(PODS,)), SERVICES),
        endpoint=_endpoint,
        stop=scale_to_nothing,
    ),),
    takes=("port", "max_runtime_seconds"),
    presets=(Preset("notebook", "JupyterLab notebook", dict(
        name="notebook", image=notebook.DEFAULT_IMAGE, command="", args="", gpus_per_worker=1,
        cpu_per_worker=4, memory_per_worker_gib=32, port=8888, max_runtime_seconds=12 * 3600)),),
    checks=(one_pod_that_fits,),
    note="A notebook is never preempted and runs only within your team's own (nominal) quota, never on "
         "borrowed GPUs: it is refused when the team's own free GPUs on the flavor cannot hold it. Stop it "
         "to give its GPUs back and start it again later; a volume mounted at /home/user keeps your files. "
         "An idle notebook is stopped, not deleted.",
    runs_until_cancelled="ready (its port-forward line: see the job page)",
    stoppable=True,
    has_max_runtime=True,
    # It fits its team's own free quota or is refused: the T4 pool, early, one GPU.
    soak=Soak(flavors={spec.KUEUE: "t4-shared"}, long_lived=True, early=True,
              fields=lambda workers, replicas: {"port": 8888}),
)
