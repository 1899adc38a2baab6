"""Kubeflow Trainer v2 (`trainer.kubeflow.org/v1alpha1`), queued by Kueue (its
`trainer.kubeflow.org/trainjob` integration): the renderer and reader of TrainJobs.

A TrainJob names a ClusterTrainingRuntime an administrator installed (torch-distributed,
deepspeed, ...), which holds the JobSet template; the TrainJob sets the trainer's image,
command, environment, nodes and resources per node. It is created suspended with the team's
queue label, like a batch Job; Kueue makes a Workload for it from the JobSet Trainer would
make, admits it (adding its placement as a runtime patch of its own, manager
``kueue.x-k8s.io/manager``), unsuspends it and suspends it again to preempt. Trainer then
makes a JobSet named like the TrainJob and owned by it; JobSet makes one batch Job per
replicated job (``<trainjob>-node-0``), whose pods are ``<job>-<index>-<5 characters>``.

The TrainJob carries no pod template: what the platform holds every pod to (the workload
ServiceAccount, the non-root security contexts, the flavor's placement, the team's volumes,
our labels on the pods) goes in a runtime patch of ours, on the runtime's ``node`` step,
which Trainer merges into the JobSet it makes. ``status.trainerStatus`` (Trainer v2.2+, its
TrainJobStatus gate) carries the trainer's own progress and remaining time.
"""

from dataclasses import replace

from cluster.fields import FieldRules

from .base import Observation, Phase, Progress, times_of, transition_time
from .kueue import (
    MAX_EXEC_LABEL,
    PRIORITY_LABEL,
    PROTECTED_PRIORITY_CLASS,
    QUEUE_LABEL,
    local_queue_name,
    observe_training,
    topology_annotations,
)
from .pods import (
    conditions,
    container,
    job_owned,
    object_name,
    pod_labels,
    pod_spec,
    true_condition,
)

GROUP = "trainer.kubeflow.org"
API = f"{GROUP}/v1alpha1"
TRAIN_JOB = (API, "TrainJob")
CLUSTER_TRAINING_RUNTIME = (API, "ClusterTrainingRuntime")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
# The runtimes' trainer step (Trainer's constants.Node): the replicated job and its container.
NODE_STEP = "node"
# Who owns our entry of ``spec.runtimePatches`` (a list keyed by manager; Kueue keeps its own).
PATCH_MANAGER = "gpuplatform.io/platform"
# The label JobSet puts on every pod it makes, naming its replicated job.
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
# The runtime's framework, as Trainer's runtimes label themselves.
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"

# Kueue suspends and unsuspends it, and adds its runtime patch; Trainer refuses a changed
# trainer, runtime reference or patch (CEL: self == oldSelf).
TRAIN_JOB_FIELDS = {
    (GROUP, "TrainJob"): FieldRules(
        create_only=("spec.suspend",),
        immutable=("spec.trainer", "spec.runtimeRef", "spec.runtimePatches"),
    ),
}
# The pod spec fields a runtime patch may set (Trainer's PodSpecPatch), of those we render.
_PATCHABLE_POD = ("serviceAccountName", "securityContext", "volumes", "nodeSelector", "tolerations")
_PATCHABLE_CONTAINER = ("volumeMounts", "securityContext")


def _labels(job) -> dict:
    labels = {QUEUE_LABEL: local_queue_name(job.flavor)}
    if job.priority_id:
        protected = job.is_protected_from_preemption()
        labels[PRIORITY_LABEL] = PROTECTED_PRIORITY_CLASS if protected else job.priority.name
    if job.max_runtime_seconds:
        labels[MAX_EXEC_LABEL] = str(job.max_runtime_seconds)
    return labels


def _node_patch(job, main: dict) -> dict:
    """Our runtime patch: the hardened pod spec and our labels on the ``node`` step's pods."""
    pod = pod_spec(job, main)
    patched = {key: pod[key] for key in _PATCHABLE_POD if key in pod}
    patched["containers"] = [{"name": NODE_STEP, **{key: main[key] for key in _PATCHABLE_CONTAINER}}]
    metadata: dict = {"labels": pod_labels(job, NODE_STEP)}
    if topology := topology_annotations(job):
        metadata["annotations"] = topology
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": NODE_STEP, "template": {"spec": {"template": {"metadata": metadata, "spec": patched}}}},
    ]}}}}


def render_train_job(job) -> list[dict]:
    """A suspended TrainJob on the job's runtime: ``workers`` nodes of the job's GPUs, CPU and
    memory, the job's image, command and environment (with the flavor's NCCL defaults)."""
    name, namespace = object_name(job), job.team.namespace_name
    main = container(job, [], [])
    trainer = {"image": job.image, "env": main["env"], "numNodes": job.workers, "resourcesPerNode": main["resources"]}
    if job.command:
        trainer["command"] = list(job.command)
    if job.args:
        trainer["args"] = list(job.args)
    return [job_owned(job, {
        "apiVersion": API, "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(job)},
        "spec": {
            "runtimeRef": {"name": job.training_runtime, "apiGroup": GROUP, "kind": CLUSTER_TRAINING_RUNTIME[1]},
            "trainer": trainer,
            # Kueue unsuspends it once the team's queue admits it.
            "suspend": True,
            "runtimePatches": [_node_patch(job, main)],
        },
    }, "trainer")]


def pod_template_of(train_job: dict) -> dict:
    """The pod template our runtime patch gives the ``node`` step (what the tests hold hardened)."""
    for patch in train_job["spec"].get("runtimePatches") or []:
        if patch.get("manager") == PATCH_MANAGER:
            [node] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            return node["template"]["spec"]["template"]
    raise LookupError("no runtime patch of the platform's")


# --- what the cluster says ------------------------------------------------------------------------
def progress(train_job: dict | None) -> Progress | None:
    """The trainer's own progress (``status.trainerStatus``), when it publishes any."""
    status = ((train_job or {}).get("status") or {}).get("trainerStatus") or {}
    percent, remaining = status.get("progressPercentage"), status.get("estimatedRemainingSeconds")
    if percent is None and remaining is None:
        return None
    return Progress(percent=None if percent is None else min(100, max(0, int(percent))),
                    remaining_seconds=None if remaining is None else min(2**31 - 1, max(0, int(remaining))),
                    updated_at=transition_time({"lastTransitionTime": status.get("lastUpdatedTime")}))


def _running_nodes(pods: list[dict]) -> int:
    return sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Running"
               and ((pod.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_LABEL) == NODE_STEP)


def observe_train_job(job, workload: dict | None, train_job: dict | None, jobset: dict | None,
                      pods: list[dict]) -> Observation | None:
    """A TrainJob's state: its own Complete and Failed conditions say how it ended; Kueue's
    Workload says queued, admitted, preempted or stopped (as for a batch Job); its running
    ``node`` pods (made by its JobSet's Jobs) say whether all its nodes run."""
    found = conditions(train_job)
    said = progress(train_job)
    if done := true_condition(found, "Complete"):
        return Observation(Phase.SUCCEEDED, "Completed", done.get("message") or "The training finished successfully.",
                           times=times_of(succeeded=done), progress=said)
    if failed := true_condition(found, "Failed"):
        return Observation(Phase.FAILED, failed.get("reason") or "Failed",
                           failed.get("message") or "Trainer marked the TrainJob failed.", times=times_of(failed=failed),
                           progress=said)
    seen = observe_training(job, workload, None)
    if seen is None:
        return Observation(Phase.QUEUED, "Queued", "Waiting for Kueue to queue it.") if train_job else None
    if seen.state != Phase.ADMITTED:
        return replace(seen, progress=said)  # Kueue's own words (why it waits) kept with ours
    running = _running_nodes(pods)
    if running >= job.workers:
        return Observation(Phase.RUNNING, "Running", f"All {job.workers} nodes are running.", times=seen.times,
                           progress=said)
    made = "its JobSet made, " if jobset is not None else ""
    return Observation(Phase.ADMITTED, "Admitted", f"Quota reserved; starting the nodes ({made}{running}/{job.workers} "
                       "running).", times=seen.times, progress=said)
