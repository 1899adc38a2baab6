"""What every scheduler module provides, and the words it reports in.

A scheduler (Kueue, Volcano, ...) turns a team's quota on one of its flavors into queue
objects and says how a workload joins its queues. Its modules also hold the pure renderers
and readers of its own workload objects, which the workload kinds (`workloads/kinds/`, one module
per kind) declare and dispatch to; what the cluster shows comes back as an `Observation`.
It works on what it is given (rows of GpuFlavor, Quota and Job, read by attribute) and
imports no app: the apps ask `workloads.for_flavor(flavor)` or `workloads.kinds.for_job(job)`
and never branch on the scheduler's name themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from cluster.names import bounded_name

Kind = tuple[str, str]  # (apiVersion, kind)


class Phase(StrEnum):
    """Where the cluster says a workload is; the job lifecycle (`jobs.lifecycle.State`)
    uses the same values and adds what only the platform knows (draft, cancelling...)."""

    QUEUED = "queued"
    ADMITTED = "admitted"
    RUNNING = "running"
    PREEMPTED = "preempted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # Scaled to nothing on purpose and kept (a notebook: its StatefulSet at 0 replicas).
    STOPPED = "stopped"


# The reason every scheduler gives a waiting job that can never start (it needs more than
# its team can ever use, borrowing included): such a job is nobody's "ahead", is not queued
# demand, and says it cannot start (`jobs.lifecycle.NEVER_STARTS_REASONS`).
EXCEEDS_QUOTA = "ExceedsQuota"
# The same for a job no flavor of its queue can take as it asks (Kueue's `NoMatchingFlavor`:
# a resource the queue does not cover, a taint it does not tolerate): it never starts as is.
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
NEVER_STARTS = frozenset({EXCEEDS_QUOTA, NO_MATCHING_FLAVOR})


@dataclass(frozen=True)
class Preempted:
    """What a scheduler says of a preemption: when, why (its reason), and the workload that
    took the GPUs (Kueue names its Workload's UID and its job's UID; None when unsaid)."""

    at: datetime | None
    reason: str
    by_workload_uid: str | None = None
    by_job_uid: str | None = None


@dataclass(frozen=True)
class Progress:
    """What a trainer says of its own run (Kubeflow Trainer's ``status.trainerStatus``): how far
    it is (percent) and how long it expects still to run (seconds), each None when unsaid, and
    when it last said so."""

    percent: int | None
    remaining_seconds: int | None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class Observation:
    state: Phase
    reason: str
    message: str
    # GPUs the job's pods hold on nodes right now (`placed_gpus`); None: not read.
    gpus: int | None = None
    # When the cluster says the workload entered a phase (a condition's lastTransitionTime),
    # for the phases it keeps a time of: the job's timestamps, timeline and GPU-hours follow
    # the cluster's clock, not the moment the watcher read it (late after a restart).
    times: dict[Phase, datetime] = field(default_factory=dict)
    # A preemption's details (Kueue), with the job's last checkpoint its containers reported
    # in their termination message (`workloads.last_checkpoint`): the lost GPU-hours' start.
    preempted: Preempted | None = None
    checkpoint: datetime | None = None
    # The trainer's own progress, where its kind publishes one (a TrainJob's trainerStatus).
    progress: Progress | None = None
    # Kueue's own words for a workload it has not admitted (its QuotaReserved=False condition's
    # reason and message, verbatim; "" when it says none): shown before the platform's
    # ``reason`` and ``message``, which say what the platform adds (`workloads.kueue_words`).
    kueue_reason: str = ""
    kueue_message: str = ""


def transition_time(condition: dict | None) -> datetime | None:
    """A condition's (or Volcano state's) ``lastTransitionTime``, or None."""
    stamp = (condition or {}).get("lastTransitionTime")
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None


def times_of(**found: dict | None) -> dict[Phase, datetime]:
    """``times_of(admitted=condition, succeeded=condition)``: the phases whose time is known."""
    return {Phase(name): at for name, condition in found.items() if (at := transition_time(condition))}


class Seen(Protocol):
    """The watcher's copy of what the cluster shows about one job."""

    def named(self, kind: Kind) -> dict | None:
        """The object of `kind` named after the job (its workload, Service...)."""

    def owned(self, kind: Kind) -> dict | None:
        """The object of `kind` whose owner is the job's workload (a Kueue Workload...)."""

    def pods(self) -> list[dict]:
        """The job's pods."""

    def ceiling_gpus(self) -> int | None:
        """The most GPUs the job's team can use on its flavor (None: no quota)."""


# Pod phases after which a pod no longer holds what it asked for.
_POD_ENDED = ("Succeeded", "Failed")


def pod_ended(pod: dict) -> bool:
    """Whether the pod's run is over for good: it holds nothing and never runs again."""
    return (pod.get("status") or {}).get("phase") in _POD_ENDED


def placed_gpus(job, pods: list[dict]) -> int:
    """GPUs a job's pods hold right now: pods a scheduler bound to a node (``nodeName`` set, no
    scheduling gate left) that have not ended, each with the job's GPUs per worker. What ran,
    whatever the job asked for at most: one replica of a 1-3 replica server holds one
    replica's GPUs, a gang that waits for room holds none. A pod being deleted holds its GPUs
    until it is gone. Only the pods its kind gives GPUs count (`WorkKind.holds_gpus`: a Ray
    head or a RayJob's submitter holds none, as Kueue counts it)."""
    holds_gpus = job.work_kind.holds_gpus
    placed = sum(1 for pod in pods
                 if (pod.get("spec") or {}).get("nodeName") and not (pod.get("spec") or {}).get("schedulingGates")
                 and not pod_ended(pod) and holds_gpus(pod))
    return placed * job.gpus_per_worker


def queue_name(namespace: str, flavor) -> str:
    """The cluster-scoped queue of one team for one flavor (ClusterQueue or Volcano Queue)."""
    return bounded_name(namespace, flavor.name)


class Scheduler:
    """The interface; each scheduler module defines one subclass and one instance."""

    name: str
    label: str
    # What the renderers below can emit, so prune knows which kinds to look through. Job
    # workloads are not the scheduler's: each workload kind declares its own (`workloads.kinds`).
    cluster_kinds: list[Kind] = []
    queue_kinds: list[Kind] = []
    # Whether its queues can be told to admit nothing new while admitted work runs on (Kueue's
    # ClusterQueue `stopPolicy: Hold`); a pool drained without it refuses at submission what
    # would outlive the deadline (docs/drain.md).
    holds_queues: bool = False

    def cluster_objects(self, flavors, cohorts, priorities) -> list[dict]:
        """Cluster-wide objects for the flavors this scheduler governs."""
        return []

    def queue_objects(self, quota, namespace: str, team: str) -> list[dict]:
        raise NotImplementedError

    def queue_refs(self, namespace: str, flavor) -> list[tuple[str, str, str | None, str]]:
        """(apiVersion, kind, namespace or None, name) of the queue objects a job of
        `flavor` in `namespace` is queued through: those `queue_objects` renders for the
        team's quota on that flavor. A job's reconcile checks they are in place."""
        raise NotImplementedError

    def inference_placement(self, job, namespace: str) -> tuple[dict, dict, dict]:
        """(Deployment labels, pod annotations, extra pod spec) that queue a server here: the
        one thing a workload kind shared by every scheduler asks of it (workloads/kinds/inference.py)."""
        raise NotImplementedError
