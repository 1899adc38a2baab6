"""Training on a Volcano flavor: a Volcano Job of master + worker tasks, started all or
nothing (`minAvailable`); Volcano makes a PodGroup for it (`schedulers.volcano`: the
renderer and the reading of its phases)."""

from schedulers import volcano
from schedulers.workloads import object_name

from .. import spec
from .base import WorkloadKind


def observe(job, seen):
    # Volcano's enqueue step holds a gang beyond the queue's capability without a word.
    return volcano.observe_training(job, seen.named(volcano.JOB), seen.owned(volcano.PODGROUP), seen.ceiling_gpus)


# The tasks `volcano.render_training` names.
TASKS = ("master", "worker")


def pod_pattern(job) -> str:
    # Volcano names a task's pods <job>-<task>-<index>.
    return rf"{object_name(job)}-({'|'.join(TASKS)})-[0-9]+"


KIND = WorkloadKind(
    name="volcano-gang",
    job_kind=spec.TRAINING,
    schedulers=(spec.VOLCANO,),
    renders=(volcano.JOB,),
    watched=((volcano.JOB, True), (volcano.PODGROUP, False)),
    fields=volcano.JOB_FIELDS,
    render=volcano.render_training,
    observe=observe,
    pod_pattern=pod_pattern,
)
