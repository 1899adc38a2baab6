"""Training on a Kueue flavor: a suspended Indexed batch Job (+ a headless Service for more
than one worker), queued by label; Kueue makes a Workload for it and admits it
(`schedulers.kueue`: the renderer and the reading of Kueue's conditions)."""

from schedulers import kueue
from schedulers.workloads import SERVICE, SERVICE_FIELDS, object_name

from .. import spec
from .base import WorkloadKind


def observe(job, seen):
    return kueue.observe_training(job, seen.owned(kueue.WORKLOAD), seen.named(kueue.BATCH_JOB))


def pod_pattern(job) -> str:
    # An Indexed Job's pods: <job>-<completion index>-<5 random characters>. The job's name
    # ends in its id, and the pattern fixes the segments after it, so no other job's pod fits.
    return rf"{object_name(job)}-[0-9]+-[a-z0-9]{{5}}"


KIND = WorkloadKind(
    name="kueue-training",
    job_kind=spec.TRAINING,
    schedulers=(spec.KUEUE,),
    renders=(kueue.BATCH_JOB, SERVICE),
    watched=((kueue.BATCH_JOB, True), (kueue.WORKLOAD, False)),
    fields={**kueue.BATCH_JOB_FIELDS, **SERVICE_FIELDS},
    render=kueue.render_training,
    observe=observe,
    pod_pattern=pod_pattern,
)
