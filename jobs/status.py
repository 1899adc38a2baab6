"""Read what the cluster shows about a job and say it in the job lifecycle's words.

Pure: the watcher's copy of the job's objects in, a `workloads.Observation` out (state,
reason, message in plain words, and the GPUs its pods hold on nodes: what the job is
charged for), or ``None`` when nothing can be said yet. The job's workload kind
(`workloads/kinds/`) reads its own objects. `Job.observe` writes the result only when it changed.
"""

from collections.abc import Callable
from dataclasses import replace

from workloads import Kind, Observation, Phase, Seen, placed_gpus, pod_ended
from workloads.kinds import for_job
from workloads.pods import last_checkpoint

from .manifests import render_job
from .models import Job


def observe(job: Job, seen: Seen) -> Observation | None:
    found = for_job(job).observe(job, seen)
    if found is None:
        return None
    pods = seen.pods()
    gpus = placed_gpus(job, pods)
    # A preempted job's pods stop with its checkpoint in their termination message (docs/preemption.md).
    checkpoint = last_checkpoint(pods) if found.preempted is not None else None
    # Running with no pod seen on a node: the watcher has not seen its pods yet (a LIST still
    # on its way after a restart), not a job that gave its GPUs back; keep what it holds.
    return replace(found, gpus=None if found.state == Phase.RUNNING and not gpus else gpus, checkpoint=checkpoint)


def leaving_gpus(job: Job, seen: Seen) -> int:
    """GPUs the pods of a job being cancelled still hold on nodes once its workload is gone
    (`for_job(job).observe` said nothing): the garbage collector deletes them after it."""
    return placed_gpus(job, seen.pods())


def workload_kinds(job: Job) -> list[Kind]:
    """The kinds of the job's objects that make its pods and carry its labels (what the watcher
    follows it by): a Deployment, a batch or Volcano Job, a RayJob and its RayCluster, ..."""
    return [kind for kind, labelled in for_job(job).watched if labelled]


def nothing_left(objects: list[dict], pods: list[dict]) -> bool:
    """Whether nothing is left of a job being cancelled that runs or could still run: none of
    its objects of `workload_kinds`, and no pod that has not ended (a pod still waiting for a
    node may get one). What ends a cancel (`Job.end_cancel`), seen in the watcher's cache or
    listed by the sweep; its bookkeeping objects (a Kueue Workload, a Volcano PodGroup) make no
    pods and the garbage collector removes them after it."""
    return not objects and all(pod_ended(pod) for pod in pods)


def labels_due(job: Job, live: Callable[[tuple[str, str], str], dict | None]) -> bool:
    """Whether a label the job's objects should carry now differs from the one the cluster
    shows (``live(kind, name)``: the object in the watcher's cache). The priority class a job
    inside its minimum runtime runs under changes with time, not with its row
    (docs/preemption.md): raised at admission, lowered once the minimum runtime has passed."""
    for desired in render_job(job):
        found = live((desired["apiVersion"], desired["kind"]), desired["metadata"]["name"])
        labels = (found or {}).get("metadata", {}).get("labels") or {}
        if found is not None and any(labels.get(k) != v for k, v in desired["metadata"].get("labels", {}).items()):
            return True
    return False
