"""The models of the jobs app, one module per object family:

- ``job``: Job (a training or inference workload), what it asks for and who may see it;
- ``moves``: the moves of a job's lifecycle (mixed into Job) and the JobEvent each records;
- ``intervals``: GpuInterval, what a job's pods hold on nodes, from when until when;
- ``use``: GpuUse, what those GPUs did (measured, used, idle GPU-seconds a day);
- ``idle``: IdleWatch, a running job's idle-GPU warning, grace, exemption and reclaim;
- ``logtails``: LogTail, the last lines of a failed container;
- ``preemptions``: the preemption contract (mixed into Job) and Preemption, each one the
  cluster reported with the GPU-hours it lost and the team charged;
- ``estimates``: EtaEstimate, each start estimate given, for its published accuracy;
- ``idempotency``: IdempotencyKey, so a retried API submission makes one job;
- ``volumes``: Volume, a team's named volume (a PersistentVolumeClaim), and how a job mounts them.

Django finds an app's models in ``<app>.models``, so this package imports them; no module
of the app imports back from here (a submodule imports its sibling, e.g. ``.moves``).
"""

from .checks import RESERVED_ENV_NAMES, gpu_runtime_env_names
from .estimates import EtaEstimate
from .idempotency import IdempotencyKey, KeyConflict
from .idle import IdleWatch
from .intervals import GpuInterval
from .job import (
    JOB_NAME_MAX_LENGTH,
    LIVE_NAME_TAKEN,
    MAX_CPU_PER_WORKER,
    MAX_GPUS_PER_WORKER,
    MAX_MEMORY_PER_WORKER_GIB,
    MAX_PROBE_DELAY_SECONDS,
    MAX_REPLICAS,
    MAX_RUNTIME_SECONDS,
    MAX_WORKERS,
    MIN_RUNTIME_SECONDS,
    RETAIN_FINISHED,
    Job,
    JobQuerySet,
)
from .logtails import LogTail
from .moves import SUBMITTED_BECAUSE, JobEvent
from .preemptions import Preemption
from .use import GpuUse
from .volumes import HOME_PATH, JobVolumes, Volume, VolumeQuerySet, claims_of, mount_problems

__all__ = [
    "JOB_NAME_MAX_LENGTH", "LIVE_NAME_TAKEN", "MAX_CPU_PER_WORKER", "MAX_GPUS_PER_WORKER",
    "MAX_MEMORY_PER_WORKER_GIB", "MAX_PROBE_DELAY_SECONDS", "MAX_REPLICAS", "MAX_RUNTIME_SECONDS",
    "MAX_WORKERS", "MIN_RUNTIME_SECONDS", "RESERVED_ENV_NAMES", "RETAIN_FINISHED", "SUBMITTED_BECAUSE",
    "EtaEstimate", "GpuInterval", "GpuUse", "IdempotencyKey", "IdleWatch", "Job", "JobEvent", "JobQuerySet", "KeyConflict", "LogTail",
    "Preemption", "HOME_PATH", "JobVolumes", "Volume", "VolumeQuerySet", "claims_of", "mount_problems",
    "gpu_runtime_env_names",
]
