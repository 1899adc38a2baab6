"""Read what the cluster shows about a job and say it in the job lifecycle's words.

Pure: the watcher's copy of the job's objects in, a `schedulers.Observation` out (state,
reason, message in plain words), or ``None`` when nothing can be said yet. Training is
read by the flavor's scheduler; inference servers look alike on every scheduler.
`Job.observe` writes the result only when it changed.
"""

import schedulers
from schedulers import Observation, Seen
from schedulers.workloads import DEPLOYMENT, observe_inference

from .models import Job


def observe(job: Job, seen: Seen) -> Observation | None:
    if job.kind == Job.Kind.INFERENCE:
        return observe_inference(job, seen.named(DEPLOYMENT), seen.pods())
    return schedulers.for_flavor(job.flavor).observe_training(job, seen)
