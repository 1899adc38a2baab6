"""Distributed training as a Kubeflow Trainer v2 TrainJob on a Kueue flavor (docs/trainjobs.md):
a suspended TrainJob on one of the ClusterTrainingRuntimes quota managers let the team use
(`quotas.TrainingRuntime`), queued by Kueue's label (`workloads.trainer`: the renderer and
the reading of its conditions, its Workload and its pods). Trainer makes a JobSet named like
it, whose Jobs make the pods; the trainer's own progress and remaining time
(``status.trainerStatus``) reach the job's page and the ETAs of the jobs queued behind it.
Stopped as a batch Job is on Kueue: its Workload's ``spec.active: false``.
"""

from workloads import kueue, trainer
from workloads.pods import object_name

from .. import spec
from .admission import PODS, SERVICES, Admitted, Queue
from .base import Integration, Preset, Soak, WorkKind
from .training import DEACTIVATE_RIGHTS, PYTORCH_IMAGE, deactivate_workload_of, needs_fabric

NAME = "train-job"
# The runtime Trainer ships for PyTorch, which the local cluster and the chart's values seed.
TORCH_RUNTIME = "torch-distributed"


def _observe(job, seen):
    return trainer.observe_train_job(job, seen.owned(kueue.WORKLOAD), seen.named(trainer.TRAIN_JOB),
                                     seen.owned(trainer.JOBSET), seen.pods())


def _pods(job) -> str:
    # JobSet names its Jobs <jobset>-<replicated job>-<index> (the JobSet is named like the
    # TrainJob), an Indexed Job its pods <job>-<completion index>-<5 random characters>.
    return rf"{object_name(job)}-{trainer.NODE_STEP}-[0-9]+-[0-9]+-[a-z0-9]{{5}}"


def trainer_node(pod: dict) -> bool:
    """A TrainJob's pod that holds GPUs: one of its trainer step's (not an initializer's)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(trainer.REPLICATED_JOB_LABEL) == trainer.NODE_STEP


def allowed_runtime(job, flavor) -> dict[str, str]:
    """The runtime must be one quota managers let the job's team use (`Job.training_runtime_problem`)."""
    why = job.training_runtime_problem()
    return {"training_runtime": why} if why else {}


KIND = WorkKind(
    name=NAME,
    label="Distributed training (TrainJob)",
    integrations=(Integration(
        name="train-job",
        scheduler=spec.KUEUE,
        renders=(trainer.TRAIN_JOB,),
        # Its JobSet is Trainer's, owned by the TrainJob: found through its owner.
        watched=((trainer.TRAIN_JOB, True), (trainer.JOBSET, False), (kueue.WORKLOAD, False)),
        fields=trainer.TRAIN_JOB_FIELDS,
        render=trainer.render_train_job,
        observe=_observe,
        pod_pattern=_pods,
        # Trainer makes a JobSet (neither our labels nor a queue: its TrainJob waits in the
        # queue), JobSet a batch Job per replicated job and a headless Service for their host
        # names, and the Jobs their Pods.
        admits=(Admitted(trainer.TRAIN_JOB, queue=(Queue.KUEUE,), makes=(Admitted(trainer.JOBSET, makes=(
            Admitted(kueue.BATCH_JOB, makes=(PODS,)), SERVICES)),)),),
        stop=deactivate_workload_of(trainer.TRAIN_JOB[1]),
        stop_rights=DEACTIVATE_RIGHTS,
    ),),
    takes=("workers", "placement", "max_runtime_seconds", "training_runtime"),
    requires=("training_runtime",),
    presets=(Preset("train-job-torch", "PyTorch TrainJob (torch-distributed)", dict(
        name="trainjob-ddp", training_runtime=TORCH_RUNTIME, image=PYTORCH_IMAGE, command="torchrun",
        args="train.py --epochs 10", env="NCCL_DEBUG=WARN", workers=2, gpus_per_worker=8, cpu_per_worker=32,
        memory_per_worker_gib=256, max_runtime_seconds=48 * 3600)),),
    checks=(needs_fabric, allowed_runtime),
    note="A TrainJob runs on a runtime your quota managers allow (Kubeflow Trainer): Trainer starts torchrun "
         "(or the runtime's launcher) on every node and sets its rendezvous itself.",
    holds_gpus=trainer_node,
    has_max_runtime=True,
    across_nodes=True,
    soak=Soak(flavors={spec.KUEUE: "h100"},
              fields=lambda workers, replicas: {"workers": workers, "training_runtime": TORCH_RUNTIME}),
)
