"""Read what the cluster shows about a job and say it in the job lifecycle's words.

Pure functions: observed objects (plain dicts from ``cluster/``) in, an ``Observation``
out (state, reason, message in plain words), or ``None`` when nothing can be said yet.
The watcher feeds them; ``Job.observe`` writes the result only when it changed.
"""

import re
from dataclasses import dataclass

from .lifecycle import State
from .models import Job


@dataclass(frozen=True)
class Observation:
    state: str
    reason: str
    message: str


def _conditions(obj: dict | None) -> dict[str, dict]:
    if not obj:
        return {}
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _true(conditions: dict, kind: str) -> dict | None:
    condition = conditions.get(kind)
    return condition if condition and condition.get("status") == "True" else None


# Kueue says, e.g. "couldn't assign flavors to pod set main: insufficient quota for
# nvidia.com/gpu in flavor h100, previously considered podsets requests (0) + current podset
# request (32) > maximum capacity (16)" or "insufficient unused quota for nvidia.com/gpu in
# flavor h100, 8 more needed".
_OVER_CAPACITY = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>[^,\s]+).*?"
    r"request \((?P<need>\d+)\) > maximum capacity \((?P<cap>\d+)\)"
)
_MORE_NEEDED = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>[^,\s]+), (?P<more>\d+) more needed"
)


def quota_message(job: Job, kueue_message: str) -> str:
    """Kueue's wording for a pending workload, in the words a researcher uses."""
    team, gpus = job.team.slug, job.total_gpus
    if match := _OVER_CAPACITY.search(kueue_message):
        if match["resource"] in ("cpu", "memory"):
            return f"Can never start: it needs more {match['resource']} than team {team} may ever use on {match['flavor']}."
        return (f"Can never start: this job needs {match['need']} {match['flavor']} GPUs but team {team} "
                f"can use at most {match['cap']}, borrowing included.")
    if match := _MORE_NEEDED.search(kueue_message):
        return (f"Waiting for quota: team {team} has too few free {match['flavor']} GPUs for this job "
                f"({gpus} needed, {match['more']} more must free up).")
    if "Inadmissible" in kueue_message or "doesn't exist" in kueue_message:
        return f"Cannot be queued: {kueue_message}"
    return f"Waiting for quota: {kueue_message}" if kueue_message else "Waiting for quota."


def observe_kueue_training(job: Job, workload: dict | None, batch_job: dict | None) -> Observation | None:
    job_conditions = _true_types(batch_job)
    if "Complete" in job_conditions or "SuccessCriteriaMet" in job_conditions:
        return Observation(State.SUCCEEDED, "Completed", "All workers finished successfully.")
    if failed := _true(_conditions(batch_job), "Failed"):
        return Observation(State.FAILED, failed.get("reason", "Failed"), failed.get("message", "The job failed."))
    conditions = _conditions(workload)
    if finished := _true(conditions, "Finished"):
        ok = finished.get("reason") == "Succeeded"
        return Observation(State.SUCCEEDED if ok else State.FAILED, finished.get("reason", "Finished"),
                           finished.get("message", ""))
    if evicted := _true(conditions, "Evicted"):
        if evicted.get("reason") in ("Preempted", "InCohortReclamation", "InClusterQueue", "InCohortReclaimWhileBorrowing"):
            preempted = _true(conditions, "Preempted") or evicted
            return Observation(State.PREEMPTED, "Preempted", _preempted_message(preempted.get("message", "")))
        if evicted.get("reason") == "MaximumExecutionTimeExceeded":
            return Observation(State.FAILED, "MaxRuntimeExceeded", "Stopped: the job ran longer than its max runtime.")
    if _true(conditions, "Admitted"):
        active = ((batch_job or {}).get("status") or {}).get("ready", 0) or 0
        if active >= job.workers:
            return Observation(State.RUNNING, "Running", f"All {job.workers} workers are running.")
        return Observation(State.ADMITTED, "Admitted", "Quota reserved; starting the workers.")
    reserved = conditions.get("QuotaReserved")
    if reserved is not None and reserved.get("status") == "False":
        return Observation(State.QUEUED, "WaitingForQuota", quota_message(job, reserved.get("message", "")))
    if workload is not None:
        return Observation(State.QUEUED, "Queued", "Waiting for the scheduler.")
    return None


def _true_types(obj: dict | None) -> set[str]:
    return {kind for kind, c in _conditions(obj).items() if c.get("status") == "True"}


def _preempted_message(kueue_message: str) -> str:
    # "Preempted to accommodate a workload (UID: ..., JobUID: ...) due to prioritization in the
    # ClusterQueue" / "... due to reclamation within the cohort"
    if "cohort" in kueue_message.lower():
        return "Preempted by a higher-priority job in the cohort; it will run again when GPUs free up."
    if "clusterqueue" in kueue_message.lower():
        return "Preempted by a higher-priority job of the same team; it will run again when GPUs free up."
    return "Preempted; it will run again when GPUs free up."


_VOLCANO_PHASES = {
    "Running": (State.RUNNING, "Running", "All workers are running."),
    "Completed": (State.SUCCEEDED, "Completed", "All workers finished successfully."),
    "Failed": (State.FAILED, "Failed", "The job failed."),
    "Aborted": (State.FAILED, "Aborted", "The job was aborted."),
    "Terminated": (State.FAILED, "Terminated", "The job was terminated."),
    "Restarting": (State.PREEMPTED, "Restarting", "A worker was evicted; the whole gang restarts."),
}


def observe_volcano_training(job: Job, vcjob: dict | None, podgroup: dict | None,
                             ceiling_gpus: int | None = None) -> Observation | None:
    """``ceiling_gpus``: the most GPUs the team can use on the flavor (None: unknown)."""
    if vcjob is None:
        return None
    state = (vcjob.get("status") or {}).get("state") or {}
    phase = state.get("phase", "Pending")
    if phase in _VOLCANO_PHASES:
        target, reason, message = _VOLCANO_PHASES[phase]
        return Observation(target, state.get("reason") or reason, state.get("message") or message)
    group_phase = ((podgroup or {}).get("status") or {}).get("phase")
    if group_phase == "Inqueue":
        return Observation(State.ADMITTED, "Admitted", "The gang fits; starting all workers together.")
    if group_phase == "Running":
        return Observation(State.RUNNING, "Running", "All workers are running.")
    # Volcano's enqueue step holds a gang beyond the queue's capability without a word.
    if ceiling_gpus is not None and job.total_gpus > ceiling_gpus:
        return Observation(State.QUEUED, "ExceedsQuota",
                           f"Can never start: this job needs {job.total_gpus} {job.flavor.name} GPUs but team "
                           f"{job.team.slug} can use at most {ceiling_gpus}, borrowing included.")
    waiting = f"Waiting for room for all {job.workers} workers at once"
    unschedulable = _conditions(podgroup).get("Unschedulable")
    if unschedulable and unschedulable.get("status") == "True" and unschedulable.get("message"):
        return Observation(State.QUEUED, "WaitingForResources", f"{waiting}: {unschedulable['message']}")
    return Observation(State.QUEUED, "WaitingForResources", f"{waiting}.")


def observe_inference(job: Job, deployment: dict | None, pods: list[dict]) -> Observation | None:
    if deployment is None:
        return None
    ready = ((deployment.get("status") or {}).get("readyReplicas")) or 0
    if ready >= (job.min_replicas or 1):
        return Observation(State.RUNNING, "Serving", f"{ready} replica{'s' if ready != 1 else ''} ready.")
    gated = [p for p in pods if (p.get("spec") or {}).get("schedulingGates")]
    placed = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    if placed and not gated:
        return Observation(State.ADMITTED, "Starting", "Replicas are starting; waiting for the readiness probe.")
    return Observation(State.QUEUED, "WaitingForQuota", "Waiting for quota to start the first replica.")
