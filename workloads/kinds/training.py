"""Training: gang-scheduled, multi-node PyTorch that ends by itself.

On a Kueue flavor, a suspended Indexed batch Job (+ a headless Service for more than one
worker), queued by label; Kueue makes a Workload for it and admits it (`workloads.kueue`: the
renderer and the reading of Kueue's conditions). On a Volcano flavor, a Volcano Job of master
+ worker tasks, started all or nothing (`minAvailable`); Volcano makes a PodGroup for it
(`workloads.volcano`). The idle sweep stops it the way each scheduler documents it: Kueue's
Workload ``spec.active: false`` (never the batch Job's ``suspend``, Kueue's after creation),
Volcano's ``AbortJob`` Command (what ``vcctl job suspend`` sends).
"""

from cluster import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NotFound, TransientError
from cluster.objects import Snapshot
from workloads import kueue, volcano
from workloads.pods import SERVICE, SERVICE_FIELDS, object_name

from .. import spec
from .admission import PODS, SERVICES, Admitted, Queue
from .base import Integration, NotStopped, Preset, Soak, WorkKind

NAME = "training"
COMMAND = ("bus.volcano.sh/v1alpha1", "Command")
PYTORCH_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
# torchrun's c10d rendezvous at the platform's MASTER_ADDR:MASTER_PORT numbers the nodes
# itself: no node rank to pass, which Volcano's pytorch plugin does not set (it sets RANK,
# after the job's own variables, so no variable can be made of it).
TORCHRUN_ARGS = (
    "--nnodes=$(NNODES) --nproc-per-node=$(NPROC_PER_NODE) --rdzv-backend=c10d "
    "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT) train.py --epochs 10"
)
# The tasks `volcano.render_training` names.
TASKS = ("master", "worker")


def _observe_kueue(job, seen):
    return kueue.observe_training(job, seen.owned(kueue.WORKLOAD), seen.named(kueue.BATCH_JOB))


def _kueue_pods(job) -> str:
    # An Indexed Job's pods: <job>-<completion index>-<5 random characters>. The job's name
    # ends in its id, and the pattern fixes the segments after it, so no other job's pod fits.
    return rf"{object_name(job)}-[0-9]+-[a-z0-9]{{5}}"


def deactivate_workload_of(owner_kind: str):
    """Kueue's way to stop an admitted workload, for a job whose workload object is of
    ``owner_kind`` (a batch Job, a TrainJob): its Workload's ``spec.active: false``, applied by
    our field manager on that field alone (Kueue evicts it and suspends the owner)."""

    def deactivate(cluster, job) -> None:
        api_version, kind = kueue.WORKLOAD
        namespace, owner = job.team.namespace_name, object_name(job)
        workloads = [w for w in cluster.list(api_version, kind, namespace=namespace)
                     if any(ref.get("kind") == owner_kind and ref.get("name") == owner
                            for ref in w["metadata"].get("ownerReferences") or ())]
        if not workloads:
            raise NotStopped(f"no Kueue Workload owned by {owner_kind} {namespace}/{owner}")
        for live in workloads:
            if (live.get("spec") or {}).get("active") is False:
                continue
            snapshot = Snapshot()
            snapshot.add(api_version, kind, [live])
            cluster.apply([{"apiVersion": api_version, "kind": kind,
                            "metadata": {"name": live["metadata"]["name"], "namespace": namespace},
                            "spec": {"active": False}}], snapshot=snapshot)

    return deactivate


deactivate_workload = deactivate_workload_of("Job")
# Find the Workload among the namespace's and apply its one field.
DEACTIVATE_RIGHTS = {(kueue.API.rpartition("/")[0], "workloads"): frozenset({"list", "patch"})}


def _observe_volcano(job, seen):
    # Volcano's enqueue step holds a gang beyond the queue's capability without a word.
    return volcano.observe_training(job, seen.named(volcano.JOB), seen.owned(volcano.PODGROUP), seen.ceiling_gpus)


def _volcano_pods(job) -> str:
    # Volcano names a task's pods <job>-<task>-<index>.
    return rf"{object_name(job)}-({'|'.join(TASKS)})-[0-9]+"


def abort_volcano_job(cluster, job) -> None:
    """Volcano's way: a Command with the action ``AbortJob`` aimed at the Job (Volcano kills its
    pods and keeps the Job ``Aborted``)."""
    api_version, kind = volcano.JOB
    namespace, name = job.team.namespace_name, object_name(job)
    try:
        live = cluster.get(api_version, kind, name, namespace)
    except NotFound as err:
        raise NotStopped(f"no Volcano Job {namespace}/{name}") from err
    target = {"apiVersion": api_version, "kind": kind, "name": name, "uid": live["metadata"]["uid"],
              "controller": True}
    command = {
        "apiVersion": COMMAND[0], "kind": COMMAND[1],
        "metadata": {"name": f"{name}-reclaim", "namespace": namespace, "ownerReferences": [target],
                     "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},  # the chart's write-confining policy
        "action": "AbortJob", "target": target, "reason": "IdleGpus",
        "message": "GPU Platform reclaimed the job: its GPUs were idle.",
    }
    try:
        cluster.create(command)
    except TransientError as err:
        if err.status != 409:  # 409: the command is there already, waiting for Volcano
            raise


def _group(kind) -> str:
    return kind[0].rpartition("/")[0]


def needs_fabric(job, flavor):
    """Multi-node training without the right NCCL network settings runs 10-100x slower."""
    if flavor and (job.workers or 1) > 1 and not flavor.trains_across_nodes:
        return {"workers": (
            f"Flavor {flavor.name} declares no network fabric, and multi-node training without the right NCCL "
            "network settings runs 10-100x slower: run 1 worker, or ask a quota manager to declare its fabric.")}
    return {}


KUEUE = Integration(
    name="kueue-training",
    scheduler=spec.KUEUE,
    renders=(kueue.BATCH_JOB, SERVICE),
    watched=((kueue.BATCH_JOB, True), (kueue.WORKLOAD, False)),
    fields={**kueue.BATCH_JOB_FIELDS, **SERVICE_FIELDS},
    gated=kueue.BATCH_JOB,
    render=kueue.render_training,
    observe=_observe_kueue,
    pod_pattern=_kueue_pods,
    # The batch Job's pods; the headless Service gives them host names.
    admits=(Admitted(kueue.BATCH_JOB, queue=(Queue.KUEUE,), makes=(PODS,)), SERVICES),
    stop=deactivate_workload,
    stop_rights=DEACTIVATE_RIGHTS,
)

VOLCANO = Integration(
    name="volcano-gang",
    scheduler=spec.VOLCANO,
    renders=(volcano.JOB,),
    watched=((volcano.JOB, True), (volcano.PODGROUP, False)),
    fields=volcano.JOB_FIELDS,
    render=volcano.render_training,
    observe=_observe_volcano,
    pod_pattern=_volcano_pods,
    # Volcano makes the gang's pods and a Service for their host names.
    admits=(Admitted(volcano.JOB, queue=(Queue.VOLCANO,), makes=(PODS, SERVICES), called="Volcano Job"),),
    stop=abort_volcano_job,
    # Read the Volcano Job's uid and create the Command.
    stop_rights={(_group(volcano.JOB), "jobs"): frozenset({"get"}),
                 (_group(COMMAND), "commands"): frozenset({"create"})},
)

KIND = WorkKind(
    name=NAME,
    label="Training",
    integrations=(KUEUE, VOLCANO),
    takes=("workers", "placement", "max_runtime_seconds"),
    presets=(
        Preset("single", "Single-GPU training", dict(
            name="train-single", image=PYTORCH_IMAGE, command="python", args="train.py --epochs 10", workers=1,
            gpus_per_worker=1, cpu_per_worker=8, memory_per_worker_gib=64, max_runtime_seconds=24 * 3600)),
        Preset("ddp", "Multi-node PyTorch DDP", dict(
            name="train-ddp", image=PYTORCH_IMAGE, command="torchrun", args=TORCHRUN_ARGS, env="NCCL_DEBUG=WARN",
            workers=2, gpus_per_worker=8, cpu_per_worker=32, memory_per_worker_gib=256,
            max_runtime_seconds=48 * 3600)),
    ),
    checks=(needs_fabric,),
    has_max_runtime=True,
    across_nodes=True,
    soak=Soak(flavors={spec.KUEUE: "h100", spec.VOLCANO: "a100"}, fields=lambda workers, replicas: {"workers": workers}),
)
