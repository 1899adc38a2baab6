"""Read what the cluster shows about a job and say it in the job lifecycle's words.

Pure: the watcher's copy of the job's objects in, a `schedulers.Observation` out (state,
reason, message in plain words, and the GPUs its pods hold on nodes: what the job is
charged for), or ``None`` when nothing can be said yet. Training is read by the flavor's
scheduler; inference servers look alike on every scheduler. `Job.observe` writes the result
only when it changed.
"""

from dataclasses import replace

import schedulers
from schedulers import Observation, Phase, Seen, placed_gpus
from schedulers.workloads import DEPLOYMENT, observe_inference

from .models import Job


def observe(job: Job, seen: Seen) -> Observation | None:
    pods = seen.pods()
    if job.kind == Job.Kind.INFERENCE:
        found = observe_inference(job, seen.named(DEPLOYMENT), pods, seen.ceiling_gpus)
    else:
        found = schedulers.for_flavor(job.flavor).observe_training(job, seen)
    if found is None:
        return None
    gpus = placed_gpus(job, pods)
    # Running with no pod seen on a node: the watcher has not seen its pods yet (a LIST still
    # on its way after a restart), not a job that gave its GPUs back; keep what it holds.
    return replace(found, gpus=None if found.state == Phase.RUNNING and not gpus else gpus)
