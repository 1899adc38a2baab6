"""Why Kueue has not admitted a workload, in Kueue's own words first, then the platform's.

Kueue v0.19 says why in its Workload's ``QuotaReserved=False`` condition: a reason of its own
(`REASONS`, apis/kueue/v1beta2/workload_types.go, with the feature gate
UnadmittedWorkloadsObservability on) and a message (e.g. "couldn't assign flavors to pod set
main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"). Without
the gate, or before v0.19, the reason is "Pending" and only the message says why.

The job keeps Kueue's reason and message verbatim (`Observation.kueue_reason`,
`kueue_message`); its own reason and message are what GPU Platform adds: the reason in the
lifecycle's words (a job that can never start says so), and a sentence with the numbers and
what to do next. One table (`NEXT`) maps each Kueue reason to them.
"""

import re
from dataclasses import dataclass

from . import gates
from .base import EXCEEDS_QUOTA, NO_MATCHING_FLAVOR, Observation, Phase

# Kueue's reasons for QuotaReserved=False (v0.19.2, KEP-10852).
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
KUEUE_NO_MATCHING_FLAVOR = "NoMatchingFlavor"
TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
PENDING_EVALUATION = "PendingEvaluation"
WAITING_FOR_PODS_READY = "WaitingForPodsReady"
ADMISSION_GATED = gates.ADMISSION_GATED  # the platform holds its jobs with it (`workloads.gates`)
# Kueue's reason without the gate (and before v0.19): only its message says why.
PENDING = "Pending"

# Kueue says, e.g. "couldn't assign flavors to pod set main: insufficient quota for
# nvidia.com/gpu in flavor h100, previously considered podsets requests (0) + current podset
# request (32) > maximum capacity (16)" or "insufficient unused quota for nvidia.com/gpu in
# flavor h100, 8 more needed" (flavorassigner.fitsResourceQuota).
OVER_CAPACITY = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>[^,\s]+).*?"
    r"request \((?P<need>\d+)\) > maximum capacity \((?P<cap>\d+)\)"
)
_MORE_NEEDED = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>[^,\s]+), (?P<more>\d+) more needed"
)


def quota_message(job, kueue_message: str) -> str:
    """Kueue's wording for a pending workload, in the words a researcher uses (with the numbers
    its message gives); Kueue's message itself when it says something this does not know."""
    if read := _read(job, kueue_message):
        return read
    return f"Waiting for quota: {kueue_message}" if kueue_message else "Waiting for quota."


def _read(job, kueue_message: str) -> str | None:
    team, gpus = job.team.slug, job.total_gpus
    if match := OVER_CAPACITY.search(kueue_message):
        if match["resource"] in ("cpu", "memory"):
            return f"Can never start: it needs more {match['resource']} than team {team} may ever use on {match['flavor']}."
        return (f"Can never start: this job needs {match['need']} {match['flavor']} GPUs but team {team} "
                f"can use at most {match['cap']}, borrowing included.")
    if match := _MORE_NEEDED.search(kueue_message):
        return (f"Waiting for quota: team {team} has too few free {match['flavor']} GPUs for this job "
                f"({gpus} needed, {match['more']} more must free up).")
    if "is inactive" in kueue_message:  # "ClusterQueue <name> is inactive": held (docs/drain.md)
        return (f"Waiting: the {job.flavor.name} pool admits nothing new now (drained for maintenance); this job "
                "starts when it reopens.")
    if "Inadmissible" in kueue_message or "doesn't exist" in kueue_message:
        return f"Cannot be queued: {kueue_message}"
    return None


@dataclass(frozen=True)
class Next:
    """What the platform says of a job Kueue has not admitted for one reason: the job's reason
    (`Job.reason`), its own sentence (``None``: read from Kueue's message's numbers), and
    its advice."""

    reason: str
    says: str | None
    advice: str = ""

    def message(self, job, kueue_message: str) -> str:
        # Kueue's message is shown verbatim beside this: a sentence of ours that would only
        # repeat it says the reason in plain words instead.
        if self.says is None:
            said = _read(job, kueue_message) or "Waiting for quota."
        else:
            said = self.says.format(team=job.team.slug, flavor=job.flavor.name)
        return f"{said} {self.advice}".strip()


NEXT: dict[str, Next] = {
    WAITING_FOR_QUOTA: Next(WAITING_FOR_QUOTA, None,
                            "It starts when the team's running jobs free enough GPUs; a smaller job may start sooner."),
    EXCEEDS_MAX_QUOTA: Next(EXCEEDS_QUOTA, None,
                            "As it is, it will never start: ask for less, or ask a quota manager for more quota."),
    KUEUE_NO_MATCHING_FLAVOR: Next(
        NO_MATCHING_FLAVOR, "Can never start as it is: team {team}'s {flavor} queue offers nothing that fits it.",
        "Change what it asks for (a resource, a node selector, a toleration), or tell the platform administrators."),
    TOPOLOGY_PLACEMENT_FAILED: Next(
        TOPOLOGY_PLACEMENT_FAILED, "Waiting for room: its pods do not fit together on the {flavor} nodes now.",
        "It starts when enough nodes in one place free up; asking to keep the pods together only if possible "
        "(preferred) may start it sooner."),
    WAITING_FOR_PREEMPTED: Next(
        WAITING_FOR_PREEMPTED, "About to start: lower-priority work is being preempted to make room for it.",
        "It starts once their pods are gone."),
    SUSPENDED: Next(SUSPENDED, "Waiting: the {flavor} pool admits nothing new now (drained for maintenance).",
                    "This job starts when it reopens."),
    MISCONFIGURED: Next(
        MISCONFIGURED, "Cannot be queued: team {team}'s {flavor} queue is not set up as Kueue expects.",
        "The platform re-applies the team's queues at its next sweep; tell the administrators if this lasts."),
    PENDING_EVALUATION: Next(PENDING_EVALUATION, "Waiting for the scheduler.", ""),
    WAITING_FOR_PODS_READY: Next(
        WAITING_FOR_PODS_READY, "Waiting: Kueue starts the next job once the pods of those it admitted are ready.",
        ""),
    # ADMISSION_GATED: held by an admission gate (the platform's own: per-person caps,
    # reservations); what the platform says of it is its gates' (docs/ui.md).
}


def waiting(job, reserved: dict) -> Observation:
    """A queued job, from its Workload's QuotaReserved=False condition: Kueue's words kept
    verbatim, the platform's reason and message from `NEXT`; for "Pending" or a reason newer
    than `NEXT`, read from Kueue's message as before v0.19."""
    kueue_reason, said = reserved.get("reason") or "", reserved.get("message") or ""
    found = NEXT.get(kueue_reason)
    if found is not None:
        reason, message = found.reason, found.message(job, said)
    else:
        # More than the queue can ever hold: Kueue keeps it among the inadmissible, where it
        # blocks no one (BestEffortFIFO), and so does the platform.
        reason = EXCEEDS_QUOTA if OVER_CAPACITY.search(said) else WAITING_FOR_QUOTA
        message = quota_message(job, said)
    return Observation(Phase.QUEUED, reason, message, kueue_reason=kueue_reason, kueue_message=said)
