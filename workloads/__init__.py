"""The schedulers GPU flavors can be governed by, behind one interface (`base.Scheduler`).

Each flavor names its scheduler; everything scheduler-specific about quotas (cluster and
queue objects, how a workload joins a queue) is asked of `for_flavor(flavor)`. A job's
workload objects, their status and owned fields are its workload kind's (`workloads/kinds/`).
A third scheduler is one more module registered below.
"""

from .base import (
    EXCEEDS_QUOTA,
    NEVER_STARTS,
    Kind,
    Observation,
    Phase,
    Preempted,
    Progress,
    Scheduler,
    Seen,
    placed_gpus,
    pod_ended,
    queue_name,
)
from .kueue import KUEUE
from .volcano import VOLCANO

SCHEDULERS: dict[str, Scheduler] = {s.name: s for s in (KUEUE, VOLCANO)}

__all__ = ["EXCEEDS_QUOTA", "NEVER_STARTS", "SCHEDULERS", "Kind", "Observation", "Phase", "Preempted", "Progress", "Scheduler", "Seen", "all_kinds",
           "for_flavor", "placed_gpus", "pod_ended", "queue_name"]


def for_flavor(flavor) -> Scheduler:
    return SCHEDULERS[flavor.scheduler]


def all_kinds(attribute: str) -> list[Kind]:
    """One attribute's kinds (e.g. "queue_kinds") over every scheduler, without repeats."""
    kinds: list[Kind] = []
    for scheduler in SCHEDULERS.values():
        kinds += [kind for kind in getattr(scheduler, attribute) if kind not in kinds]
    return kinds
