"""Read what the cluster shows about a job and say it in the job lifecycle's words.

Pure: the watcher's copy of the job's objects in, a `schedulers.Observation` out (state,
reason, message in plain words, and the GPUs its pods hold on nodes: what the job is
charged for), or ``None`` when nothing can be said yet. The job's workload kind
(`jobs/kinds/`) reads its own objects. `Job.observe` writes the result only when it changed.
"""

from dataclasses import replace

from schedulers import Observation, Phase, Seen, placed_gpus

from .kinds import for_job
from .models import Job


def observe(job: Job, seen: Seen) -> Observation | None:
    found = for_job(job).observe(job, seen)
    if found is None:
        return None
    gpus = placed_gpus(job, seen.pods())
    # Running with no pod seen on a node: the watcher has not seen its pods yet (a LIST still
    # on its way after a restart), not a job that gave its GPUs back; keep what it holds.
    return replace(found, gpus=None if found.state == Phase.RUNNING and not gpus else gpus)
