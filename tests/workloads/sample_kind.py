"""A kind of work that exists only in the tests: a hyperparameter sweep that starts with its
fewest trials and grows to its workers, renders a Sweep (an operator's kind, queued by Kueue's
label, whose controller makes the trials' Pods) plus a PodTemplate (kinds no other kind renders,
so RBAC, prune and the team namespaces' admission policy must learn them from here), runs until
cancelled, is stopped by the idle sweep the way Kueue training is, and has a place in the soak. `test_conformance.py` registers it, and
only it, and sees it reach every derived place."""

from workloads import kueue
from workloads.kinds import GpuShape, Integration, Preset, Soak, WorkKind, training
from workloads.kinds.admission import PODS, Admitted, Queue
from workloads.pods import job_owned, object_name

NAME = "sweep"
POD_TEMPLATE = ("v1", "PodTemplate")
SWEEP = ("sweep.example.org/v1", "Sweep")


def _render(job) -> list[dict]:
    template = job_owned(job, {"apiVersion": "v1", "kind": "PodTemplate",
                          "metadata": {"name": object_name(job), "namespace": job.team.namespace_name},
                          "template": {"spec": {"containers": [{"name": "trial", "image": job.image}]}}}, "trial")
    [batch_job, *_] = kueue.render_training(job)
    return [{**batch_job, "apiVersion": SWEEP[0], "kind": SWEEP[1]}, template]


KIND = WorkKind(
    name=NAME,
    label="Sweep",
    integrations=(Integration(
        name="kueue-sweep",
        scheduler="kueue",
        renders=(SWEEP, POD_TEMPLATE),
        watched=((SWEEP, True), (kueue.WORKLOAD, False), (POD_TEMPLATE, True)),
        fields=kueue.BATCH_JOB_FIELDS,
        render=_render,
        observe=training.KUEUE.observe,
        pod_pattern=training.KUEUE.pod_pattern,
        admits=(Admitted(SWEEP, queue=(Queue.KUEUE,), makes=(PODS,)),),
        stop=training.deactivate_workload,
        stop_rights=training.KUEUE.stop_rights,
    ),),
    takes=("workers", "min_replicas"),
    requires=("min_replicas",),
    shape=GpuShape(most="workers", start="min_replicas", unit="trial"),
    presets=(Preset("sweep", "Hyperparameter sweep", dict(
        name="sweep", image="ghcr.io/example/sweep:1", command="python", args="sweep.py", workers=8,
        min_replicas=2, gpus_per_worker=1)),),
    runs_until_cancelled="sweeping",
    soak=Soak(flavors={"kueue": "h100"}, fields=lambda workers, replicas: {"workers": workers, "min_replicas": 1}),
)
