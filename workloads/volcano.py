"""Volcano: quotas as Volcano Queues, training as gang-scheduled Volcano Jobs (master +
workers, all or nothing), inference as Deployments whose pods Volcano's scheduler places.

Volcano facts respected here (shared/DESIGN.md section 4): `batch.volcano.sh/v1alpha1` Job
with `minAvailable`, `queue`, `schedulerName: volcano` and the pytorch/svc/env plugins; a
Queue in `scheduling.volcano.sh/v1beta1` with capability, deserved, guarantee, weight and
reclaimable. Volcano has no `suspend`, so Kueue cannot hold its Jobs. A gang kept in one
rack or block asks it with `spec.networkTopology` (v1.12+: HyperNodes, docs/topology.md).
"""

import math
from collections.abc import Callable

from cluster.fields import FieldRules
from cluster.quantity import canonical, gib
from core.ownership import owned

from .base import EXCEEDS_QUOTA, Observation, Phase, Scheduler, queue_name, times_of
from .pods import (
    FINISHED_TTL_SECONDS,
    LOCAL_MASTER,
    RENDEZVOUS_PORT,
    checkpoint_grace,
    conditions,
    container,
    job_owned,
    object_name,
    pod_labels,
    pod_spec,
    torch_env,
    true_condition,
)

QUEUE_API = "scheduling.volcano.sh/v1beta1"
JOB = ("batch.volcano.sh/v1alpha1", "Job")
PODGROUP = (QUEUE_API, "PodGroup")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# Volcano's admission refuses spec changes to a Job other than its gang size and task
# replicas, which we never change either (the kind: workloads/kinds/training.py).
JOB_FIELDS = {("batch.volcano.sh", "Job"): FieldRules(immutable=("spec",))}


def render_queue(quota, namespace: str, team: str) -> dict:
    resource = quota.flavor.resource_name
    lends = quota.cohort_id is not None and quota.lending_limit_gpus != 0
    if quota.cohort_id is None:
        guaranteed = quota.nominal_gpus
    else:
        guaranteed = quota.nominal_gpus - (quota.nominal_gpus if quota.lending_limit_gpus is None else quota.lending_limit_gpus)
    share = guaranteed / quota.nominal_gpus if quota.nominal_gpus else 0
    # RDMA devices go with GPUs (a multi-node pod holds at least one GPU). A resource missing
    # from the capability counts as none at all (volcano-sh/volcano#3204, with rdma/hca).
    rdma = sorted((quota.flavor.rdma_resources or {}).items())
    return owned({
        "apiVersion": QUEUE_API, "kind": "Queue",
        "metadata": {"name": queue_name(namespace, quota.flavor)},
        "spec": {
            "weight": quota.weight,
            "reclaimable": lends,
            "capability": {resource: canonical(quota.ceiling_gpus), "cpu": canonical(quota.with_ceiling(quota.cpu_cores)),
                           "memory": gib(quota.with_ceiling(quota.memory_gib)),
                           **{name: canonical(quota.ceiling_gpus * count) for name, count in rdma}},
            "deserved": {resource: canonical(quota.nominal_gpus), "cpu": canonical(quota.cpu_cores),
                         "memory": gib(quota.memory_gib), **{name: canonical(quota.nominal_gpus * count) for name, count in rdma}},
            "guarantee": {"resource": {resource: canonical(guaranteed),
                                       "cpu": canonical(math.floor(quota.cpu_cores * share)),
                                       "memory": gib(math.floor(quota.memory_gib * share))}},
        },
    }, team=team)


def network_topology(job) -> dict:
    """The gang's network-topology constraint (docs/topology.md), served by the scheduler's
    network-topology-aware plugin over the HyperNodes Volcano discovers from the nodes' labels:
    required, every pod within one HyperNode of the level's tier or lower (1 a rack, 2 a
    block: `quotas.models.topology.TIERS`), or the gang waits; preferred, Volcano's soft mode,
    as close as the free nodes allow (it takes no tier: a preferred rack and a preferred block
    are one request to Volcano)."""
    asked = job.topology_request
    if asked is None:
        return {}
    if asked.required:
        return {"networkTopology": {"mode": "hard", "highestTierAllowed": asked.tier}}
    return {"networkTopology": {"mode": "soft"}}


def render_training(job) -> list[dict]:
    name, namespace = object_name(job), job.team.namespace_name
    # Volcano has no run-time limit of its own: the kubelet ends pods past their deadline.
    deadline = {"activeDeadlineSeconds": job.max_runtime_seconds} if job.max_runtime_seconds else {}

    alone = job.workers == 1

    def env() -> list[dict]:
        # Volcano's pytorch plugin sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK from the
        # Service its svc plugin makes (with a ConfigMap of hosts and a NetworkPolicy), after
        # the container's own variables (so no variable of ours can be made from them; no
        # NODE_RANK: torchrun's c10d rendezvous numbers the nodes); NNODES and NPROC_PER_NODE
        # are ours. A job of one worker meets itself on localhost, so it gets neither plugin
        # and every variable from us.
        if alone:
            return [*torch_env(job, LOCAL_MASTER, None), {"name": "RANK", "value": "0"}]
        return [{"name": "NNODES", "value": str(job.workers)}, {"name": "NPROC_PER_NODE", "value": str(job.gpus_per_worker)}]

    def task(task_name: str, replicas: int, policies: list[dict]) -> dict:
        # Each task its own objects: shared ones would come back as aliases in YAML.
        # Volcano's preempt and reclaim actions delete the victims' pods with their grace
        # (docs/preemption.md), then the PodEvicted policy below restarts the gang.
        grace_env, grace = checkpoint_grace(job)
        main = container(job, env() + grace_env, [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}])
        return {
            "name": task_name,
            "replicas": replicas,
            "policies": policies,
            "template": {
                "metadata": {"labels": pod_labels(job, task_name)},
                "spec": pod_spec(job, main, restartPolicy="OnFailure", **deadline, **grace),
            },
        }

    tasks = [task("master", 1, [{"event": "TaskCompleted", "action": "CompleteJob"}])]
    if not alone:
        tasks.append(task("worker", job.workers - 1, []))
    plugins = {"env": []} if alone else {
        "pytorch": ["--master=master", "--worker=worker", f"--port={RENDEZVOUS_PORT}"], "svc": [], "env": []}
    spec = {
        "schedulerName": "volcano",
        "queue": queue_name(namespace, job.flavor),
        "minAvailable": job.workers,  # all or nothing: the gang
        **network_topology(job),
        "maxRetry": 3,
        "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
        # An evicted worker breaks the collective: restart the whole gang.
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "plugins": plugins,
        "tasks": tasks,
    }
    return [job_owned(job, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                            "metadata": {"name": name, "namespace": namespace}, "spec": spec}, "gang")]


_PHASES = {
    "Running": (Phase.RUNNING, "Running", "All workers are running."),
    # The master finished and the others are being stopped: still running, not waiting.
    "Completing": (Phase.RUNNING, "Completing", "The workers are finishing."),
    "Completed": (Phase.SUCCEEDED, "Completed", "All workers finished successfully."),
    "Failed": (Phase.FAILED, "Failed", "The job failed."),
    "Aborted": (Phase.FAILED, "Aborted", "The job was aborted."),
    "Terminated": (Phase.FAILED, "Terminated", "The job was terminated."),
    "Restarting": (Phase.PREEMPTED, "Restarting", "A worker was evicted; the whole gang restarts."),
}


def observe_training(job, vcjob: dict | None, podgroup: dict | None,
                     ceiling_gpus: Callable[[], int | None] = lambda: None) -> Observation | None:
    """``ceiling_gpus()``: the most GPUs the team can use on the flavor (None: unknown); asked
    only of a gang still pending, the one observation it changes (the watcher reads it then)."""
    if vcjob is None:
        return None
    state = (vcjob.get("status") or {}).get("state") or {}
    phase = state.get("phase", "Pending")
    if phase in _PHASES:
        target, reason, message = _PHASES[phase]
        # Volcano keeps when the job entered its phase (Inqueue has no time of its own).
        return Observation(target, state.get("reason") or reason, state.get("message") or message,
                           times=times_of(**{target.value: state}))
    group_phase = ((podgroup or {}).get("status") or {}).get("phase")
    waiting = f"Waiting for room for all {job.workers} workers at once"
    why = (true_condition(conditions(podgroup), "Unschedulable") or {}).get("message")
    if group_phase == "Inqueue":
        # Volcano's enqueue step weighs the cluster's free GPUs of every kind; the gang's
        # nodes (the flavor's) may still have no room for all of it.
        if why:
            return Observation(Phase.ADMITTED, "WaitingForResources", f"Admitted by the queue. {waiting}: {why}")
        return Observation(Phase.ADMITTED, "Admitted", "The gang fits; starting all workers together.")
    if group_phase == "Running":
        return Observation(Phase.RUNNING, "Running", "All workers are running.")
    # Volcano's enqueue step holds a gang beyond the queue's capability without a word.
    if (ceiling := ceiling_gpus()) is not None and job.total_gpus > ceiling:
        return Observation(Phase.QUEUED, EXCEEDS_QUOTA,
                           f"Can never start: this job needs {job.total_gpus} {job.flavor.name} GPUs but team "
                           f"{job.team.slug} can use at most {ceiling}, borrowing included.")
    return Observation(Phase.QUEUED, "WaitingForResources", f"{waiting}: {why}" if why else f"{waiting}.")


class Volcano(Scheduler):
    name, label = "volcano", "Volcano"
    queue_kinds = [(QUEUE_API, "Queue")]

    def queue_objects(self, quota, namespace: str, team: str) -> list[dict]:
        return [render_queue(quota, namespace, team)]

    def queue_refs(self, namespace: str, flavor) -> list[tuple[str, str, str | None, str]]:
        return [(QUEUE_API, "Queue", None, queue_name(namespace, flavor))]

    def inference_placement(self, job, namespace: str) -> tuple[dict, dict, dict]:
        return {}, {QUEUE_ANNOTATION: queue_name(namespace, job.flavor)}, {"schedulerName": "volcano"}


VOLCANO = Volcano()
