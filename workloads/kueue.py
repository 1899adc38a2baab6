"""Kueue: quotas as ClusterQueues + LocalQueues, training as suspended Indexed batch Jobs,
inference as Deployments whose pods Kueue gates and admits one by one.

Kueue facts respected here (shared/DESIGN.md section 4): `kueue.x-k8s.io/v1beta2`,
`cohortName`, a ClusterQueue `namespaceSelector` always set, a Job joins its queue by label
and is created suspended; Kueue unsuspends it on admission and suspends it to preempt.
"""

import re
from dataclasses import replace

from cluster.fields import FieldRules
from cluster.quantity import canonical, gib
from core.ownership import JOB_LABEL, owned
from core.words import say_seconds

from . import gates, kueue_words
from .base import Observation, Phase, Preempted, Scheduler, queue_name, times_of, transition_time
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

API = "kueue.x-k8s.io/v1beta2"
BATCH_JOB = ("batch/v1", "Job")
WORKLOAD = (API, "Workload")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# Topology-aware scheduling (TAS, beta and on by default since Kueue v0.14): a podset asks to
# stay within one domain of a level, required or preferred, by the level's node label.
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# A job inside its minimum runtime runs under this class (docs/preemption.md): Kueue preempts
# only strictly lower priorities (withinClusterQueue and borrowWithinCohort: LowerPriority),
# and no class may be valued above the top of the range, so nothing preempts it that way.
# Kueue v0.17+ follows a changed priority-class label of a running Job onto its Workload
# (jobframework.UpdateWorkloadPriority); the platform raises it at admission and lowers it to
# the job's own class once the minimum runtime has passed. Kueue has no minimum runtime of its own.
PROTECTED_PRIORITY_CLASS = "gpuplatform-minimum-runtime"
PROTECTED_PRIORITY_VALUE = 1_000_000_000


def local_queue_name(flavor) -> str:
    """The team's LocalQueue for a Kueue flavor, inside the team's namespace."""
    return flavor.name


# --- quota objects ------------------------------------------------------------------------------
def render_resource_flavor(flavor) -> dict:
    spec: dict = {"nodeLabels": dict(flavor.node_labels)}
    if flavor.topology_levels:
        spec["topologyName"] = flavor.name
    if flavor.node_taints:
        spec["nodeTaints"] = [dict(t) for t in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    return owned({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor.name}, "spec": spec})


def render_topology(flavor) -> dict:
    """The flavor's levels, widest first, for TAS; named after the flavor, whose ResourceFlavor
    names it (one Topology per flavor: flavors may read different labels)."""
    return owned({"apiVersion": API, "kind": "Topology", "metadata": {"name": flavor.name},
                  "spec": {"levels": [{"nodeLabel": label} for _, label in flavor.topology_levels]}})


def topology_annotations(job) -> dict:
    """The podset topology request of a training job that asks to keep its pods together."""
    asked = job.topology_request
    if asked is None:
        return {}
    return {REQUIRED_TOPOLOGY if asked.required else PREFERRED_TOPOLOGY: asked.label}


def render_cohort(cohort) -> dict:
    return owned({"apiVersion": API, "kind": "Cohort", "metadata": {"name": cohort.name}, "spec": {}})


def render_priority_class(priority) -> dict:
    obj = {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": priority.name},
           "value": priority.value}
    if priority.description:
        obj["description"] = priority.description
    return owned(obj)


def render_protected_priority_class() -> dict:
    return owned({"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": PROTECTED_PRIORITY_CLASS},
                  "value": PROTECTED_PRIORITY_VALUE,
                  "description": "Jobs inside their priority class's minimum runtime, and notebooks: not preempted "
                                 "for priority."})


def render_cluster_queue(quota, namespace: str, team: str) -> dict:
    flavor = quota.flavor
    gpu = {"name": flavor.resource_name, "nominalQuota": canonical(quota.nominal_gpus)}
    if quota.cohort_id is not None:
        if quota.borrowing_limit_gpus is not None:
            gpu["borrowingLimit"] = canonical(quota.borrowing_limit_gpus)
        if quota.lending_limit_gpus is not None:
            gpu["lendingLimit"] = canonical(quota.lending_limit_gpus)
    # RDMA devices go with GPUs (a multi-node pod holds at least one GPU): a resource Kueue
    # does not cover would leave the workload inadmissible.
    rdma = sorted((flavor.rdma_resources or {}).items())
    spec: dict = {
        # Without a selector a ClusterQueue admits no namespace: match exactly the team's.
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": [flavor.resource_name, "cpu", "memory", *(name for name, _ in rdma)],
            "flavors": [{"name": flavor.name, "resources": [
                gpu,
                {"name": "cpu", "nominalQuota": canonical(quota.cpu_cores)},
                {"name": "memory", "nominalQuota": gib(quota.memory_gib)},
                *({"name": name, "nominalQuota": canonical(quota.nominal_gpus * count)} for name, count in rdma),
            ]}],
        }],
        # Kueue's webhook fills in what we leave out and the filled fields count as ours;
        # stating them keeps a re-apply a no-op.
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never",
                       "borrowWithinCohort": {"policy": "Never"}},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        # A drained pool (docs/drain.md): admit nothing new, let admitted workloads run on.
        "stopPolicy": "Hold" if flavor.admission_held else "None",
        "fairSharing": {"weight": canonical(quota.weight)},
    }
    if quota.cohort_id is not None:
        spec["cohortName"] = quota.cohort.name
        # Take back lent GPUs from anyone; borrow by preempting only lower priorities.
        spec["preemption"].update(reclaimWithinCohort="Any", borrowWithinCohort={"policy": "LowerPriority"})
    return owned({"apiVersion": API, "kind": "ClusterQueue",
                  "metadata": {"name": queue_name(namespace, flavor)}, "spec": spec}, team=team)


def render_local_queue(quota, namespace: str, team: str) -> dict:
    return owned({
        "apiVersion": API, "kind": "LocalQueue",
        "metadata": {"name": local_queue_name(quota.flavor), "namespace": namespace},
        "spec": {"clusterQueue": queue_name(namespace, quota.flavor)},
    }, team=team)


# --- workloads (the kind that renders and reads them: workloads/kinds/training.py) ---------------
# Kueue unsuspends the Job when it admits it and suspends it again to preempt; it may lower
# parallelism for a partial admission. The pod template (where Kueue injects the flavor's
# placement at admission), completions and completion mode cannot change. A held job's
# admission gate is set at creation and only ever taken away (`workloads.gates`).
BATCH_JOB_FIELDS = {
    ("batch", "Job"): FieldRules(
        create_only=("spec.suspend", "spec.parallelism", gates.FIELD),
        immutable=("spec.template", "spec.completions", "spec.completionMode"),
    ),
}


def _queue_labels(job) -> dict:
    labels = {QUEUE_LABEL: local_queue_name(job.flavor)}
    if job.priority_id:
        labels[PRIORITY_LABEL] = job.priority.name
    return labels


def render_training(job) -> list[dict]:
    """A suspended Indexed batch Job (one pod per worker) + the headless Service torchrun's
    workers find each other through; a job of one worker meets itself on localhost and
    needs no Service."""
    name, namespace = object_name(job), job.team.namespace_name
    alone = job.workers == 1
    master = LOCAL_MASTER if alone else f"{name}-0.{name}.{namespace}.svc"
    grace_env, grace = checkpoint_grace(job)
    main = container(job, torch_env(job, master, COMPLETION_INDEX) + grace_env,
                     [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}])
    labels = _queue_labels(job)
    if job.priority_id and job.is_protected_from_preemption():
        labels[PRIORITY_LABEL] = PROTECTED_PRIORITY_CLASS
    if job.max_runtime_seconds:
        labels[MAX_EXEC_LABEL] = str(job.max_runtime_seconds)
    topology = topology_annotations(job)
    batch_job = job_owned(job, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            # Kueue unsuspends the job once the team's queue admits it.
            "suspend": True,
            "completionMode": "Indexed",
            "completions": job.workers,
            "parallelism": job.workers,
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
            "template": {
                "metadata": {"labels": pod_labels(job, "worker"), **({"annotations": topology} if topology else {})},
                "spec": pod_spec(job, main, restartPolicy="Never", **grace, **({} if alone else {"subdomain": name})),
            },
        },
    }, "worker")
    if alone:
        return [batch_job]
    service = job_owned(job, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "clusterIP": "None",
            # Workers must find each other before they report ready.
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: str(job.pk)},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    }, "worker")
    return [service, batch_job]


# --- what the cluster says ------------------------------------------------------------------------
# WaitForPodsReady: an admitted workload whose pods are not all ready in time is evicted for
# this reason and requeued; past the requeuing limit Kueue deactivates it
# ("DeactivatedDueToRequeuingLimitExceeded"), which the platform reports as PODS_NEVER_READY.
PODS_READY_TIMEOUT = "PodsReadyTimeout"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
PODS_NEVER_READY = "PodsNeverReady"
# Kueue v0.19 finishes a Workload whose owner is gone (FinishOrphanedWorkloads) before the
# garbage collector deletes it: not an outcome of the job, which ended some other way.
OWNER_NOT_FOUND = "OwnerNotFound"
_PREEMPTION_REASONS = ("Preempted", "InCohortReclamation", "InClusterQueue", "InCohortReclaimWhileBorrowing")
# "Preempted to accommodate a workload (UID: <uid>, JobUID: <uid>) due to ..." (Kueue's
# preemption.preemptionMessage, v0.17 to v0.19; "UNKNOWN" when it has none).
_PREEMPTOR = re.compile(r"\(UID: (?P<workload>[^,\s)]+), JobUID: (?P<job>[^,\s)]+)\)")


def _preempted_message(kueue_message: str) -> str:
    # "Preempted to accommodate a workload (UID: ..., JobUID: ...) due to prioritization in the
    # ClusterQueue" / "... due to reclamation within the cohort"
    if "cohort" in kueue_message.lower():
        return "Preempted by a higher-priority job in the cohort; it will run again when GPUs free up."
    if "clusterqueue" in kueue_message.lower():
        return "Preempted by a higher-priority job of the same team; it will run again when GPUs free up."
    return "Preempted; it will run again when GPUs free up."


def preempted_by(condition: dict, evicted: dict) -> Preempted:
    """Kueue's Preempted condition (else its Evicted one): why, and the UIDs of the
    preemptor's Workload and job when it names them; when: the eviction's time, which stays
    the same as long as this eviction lasts (what makes a preemption seen twice one)."""
    found = _PREEMPTOR.search(condition.get("message") or "")

    def uid(name: str) -> str | None:
        value = found[name] if found else None
        return None if value in (None, "UNKNOWN") else value

    return Preempted(at=transition_time(evicted), reason=condition.get("reason") or "Preempted",
                     by_workload_uid=uid("workload"), by_job_uid=uid("job"))


def preemption_of(workload: dict) -> Preempted | None:
    """The preemption a Workload shows right now (Evicted for one of the preemption reasons),
    whatever it shows later: Kueue may admit it again within a second, before anyone read it."""
    found = conditions(workload)
    evicted = true_condition(found, "Evicted")
    if not evicted or evicted.get("reason") not in _PREEMPTION_REASONS:
        return None
    return preempted_by(true_condition(found, "Preempted") or evicted, evicted)


def observe_training(job, workload: dict | None, batch_job: dict | None) -> Observation | None:
    job_conditions = conditions(batch_job)
    found = conditions(workload)
    # Kueue keeps when it admitted the workload; the steps after it carry their own times.
    admitted = true_condition(found, "Admitted")

    def seen(phase: Phase, reason: str, message: str, since: dict | None = None) -> Observation:
        return Observation(phase, reason, message, times=times_of(**{"admitted": admitted, phase.value: since}))

    if done := true_condition(job_conditions, "Complete") or true_condition(job_conditions, "SuccessCriteriaMet"):
        return seen(Phase.SUCCEEDED, "Completed", "All workers finished successfully.", done)
    if failed := true_condition(job_conditions, "Failed"):
        return seen(Phase.FAILED, failed.get("reason", "Failed"), failed.get("message", "The job failed."), failed)
    if finished := true_condition(found, "Finished"):
        if finished.get("reason") == OWNER_NOT_FOUND:
            return None  # its Job is gone (a cancel, a prune): nothing of it is left to say how it ended
        ok = finished.get("reason") == "Succeeded"
        return seen(Phase.SUCCEEDED if ok else Phase.FAILED, finished.get("reason", "Finished"),
                    finished.get("message", ""), finished)
    if (evicted := true_condition(found, "Evicted")) and (stopped := _evicted(job, workload, evicted, seen)):
        return stopped
    if admitted:
        active = ((batch_job or {}).get("status") or {}).get("ready", 0) or 0
        if active >= job.workers:
            return seen(Phase.RUNNING, "Running", f"All {job.workers} workers are running.")
        return seen(Phase.ADMITTED, "Admitted", "Quota reserved; starting the workers.", admitted)
    return _waiting(job, workload, found)


def _evicted(job, workload: dict, evicted: dict, seen) -> Observation | None:
    """Preempted, evicted for pods not ready in time, or stopped for good by Kueue; None for
    another eviction (it queues again)."""
    found = conditions(workload)
    if evicted.get("reason") in _PREEMPTION_REASONS:
        preempted = true_condition(found, "Preempted") or evicted
        return replace(seen(Phase.PREEMPTED, "Preempted", _preempted_message(preempted.get("message", "")), evicted),
                       preempted=preempted_by(preempted, evicted))
    # Kueue deactivates a workload past its maximum execution time: evicted with reason
    # "DeactivatedDueToMaximumExecutionTimeExceeded" (older releases: the bare cause).
    reason = evicted.get("reason", "")
    if reason.endswith("MaximumExecutionTimeExceeded"):
        limit = f" of {say_seconds(job.max_runtime_seconds)}" if job.max_runtime_seconds else ""
        return seen(Phase.FAILED, "MaxRuntimeExceeded", f"Stopped: the job ran longer than its max runtime{limit}.",
                    evicted)
    if reason == PODS_READY_TIMEOUT:
        return seen(Phase.PREEMPTED, PODS_READY_TIMEOUT, _pods_ready_message(workload), evicted)
    if reason.endswith(REQUEUING_LIMIT_EXCEEDED):
        return seen(Phase.FAILED, PODS_NEVER_READY,
                    "Stopped by Kueue: its workers were not all running in time after admission, again after every "
                    f"retry ({evicted.get('message') or reason}); it will not run again. Its pods' events say why "
                    "(image, volumes, node selector).", evicted)
    if reason.startswith("Deactivated"):
        return seen(Phase.FAILED, "Deactivated",
                    f"Stopped by Kueue: {evicted.get('message') or reason}; it will not run again.", evicted)
    return None


def _pods_ready_message(workload: dict) -> str:
    # WaitForPodsReady (deploy/local-cluster/config/kueue-config.yaml, docs/queues.md): Kueue
    # evicts an admitted workload whose pods are not all ready in time and requeues it after a
    # backoff, counted in status.requeueState.
    requeue = (workload.get("status") or {}).get("requeueState") or {}
    at = transition_time({"lastTransitionTime": requeue.get("requeueAt")})
    when = f"from {at:%H:%M} UTC" if at else "after a backoff"
    retry = f" (retry {requeue['count']})" if requeue.get("count") else ""
    return ("Evicted and requeued: its workers were not all running within Kueue's time limit after admission, "
            f"so its GPUs went back to the queue; it queues again {when}{retry}.")


def _waiting(job, workload: dict | None, found: dict) -> Observation | None:
    """Queued (for quota, or for the scheduler) while not admitted; None without a Workload."""
    reserved = found.get("QuotaReserved")
    if reserved is not None and reserved.get("status") == "False":
        if reserved.get("reason") == gates.ADMISSION_GATED:  # held by its gates: ours, or somebody's
            return gates.held(reserved)
        return kueue_words.waiting(job, reserved)  # Kueue's reason and message, then ours
    if workload is not None:
        return Observation(Phase.QUEUED, "Queued", "Waiting for the scheduler.")
    return None


class Kueue(Scheduler):
    name, label = "kueue", "Kueue"
    cluster_kinds = [(API, "Topology"), (API, "ResourceFlavor"), (API, "Cohort"), (API, "WorkloadPriorityClass")]
    queue_kinds = [(API, "ClusterQueue"), (API, "LocalQueue")]
    holds_queues = True

    def cluster_objects(self, flavors, cohorts, priorities) -> list[dict]:
        # Cohorts and priorities are Kueue objects whatever governs a flavor: a cohort's
        # members may be Kueue quotas only, and priorities order Kueue's queues.
        # The protected class exists with the first class, before any job could be raised to it,
        # and with the first Kueue flavor: notebooks run under it (`workloads.notebook`).
        ours = [f for f in flavors if f.scheduler == self.name]
        protected = [render_protected_priority_class()] if priorities or ours else []
        return ([render_topology(f) for f in ours if f.topology_levels] + [render_resource_flavor(f) for f in ours]
                + [render_cohort(c) for c in cohorts] + [render_priority_class(p) for p in priorities] + protected)

    def queue_objects(self, quota, namespace: str, team: str) -> list[dict]:
        return [render_cluster_queue(quota, namespace, team), render_local_queue(quota, namespace, team)]

    def queue_refs(self, namespace: str, flavor) -> list[tuple[str, str, str | None, str]]:
        return [(API, "ClusterQueue", None, queue_name(namespace, flavor)),
                (API, "LocalQueue", namespace, local_queue_name(flavor))]

    def inference_placement(self, job, namespace: str) -> tuple[dict, dict, dict]:
        # Kueue's pod integration gates each replica until the team's queue admits it.
        return _queue_labels(job), {}, {}


KUEUE = Kueue()
