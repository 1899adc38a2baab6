"""The models of the quotas app, one module per object family:

- ``flavors``: GpuFlavor (a hardware pool and its scheduler), Cohort, PriorityClass;
- ``quotas``: Quota, a team's GPUs on one flavor;
- ``requests``: QuotaRequest and the dated QuotaGrant it may become;
- ``idle``: IdlePolicy, when idle GPUs are warned of and reclaimed (a flavor's, a team's);
- ``caps``: MemberCap, what one person of a team may hold of a flavor at once;
- ``drains``: Drain, a flavor emptied by a deadline and closed for maintenance (docs/drain.md).
- ``storage``: StorageQuota, what a team's volumes may claim of one storage class;
- ``runtimes``: TrainingRuntime, a Kubeflow Trainer runtime teams may run TrainJobs on.

Django finds an app's models in ``<app>.models``, so this package imports them; no module
of the app imports back from here (a submodule imports its sibling, e.g. ``.flavors``).
"""

from .caps import MAX_CAP_JOBS, MemberCap, MemberCapQuerySet
from .drains import Drain, DrainQuerySet
from .flavors import (
    MAX_GPU_MEMORY_GIB,
    MAX_RUNTIME_SECONDS,
    MIN_RUNTIME_SECONDS,
    Cohort,
    GpuFlavor,
    Limits,
    PriorityClass,
    Scheduler,
    Sharing,
    runtime_limits,
    say_seconds,
)
from .hardware import Fabric, GdrLevel
from .idle import Action, IdlePolicy, IdleRules
from .quotas import Quota, QuotaQuerySet
from .requests import QuotaGrant, QuotaGrantQuerySet, QuotaRequest, QuotaRequestQuerySet
from .runtimes import TrainingRuntime, TrainingRuntimeQuerySet
from .storage import MAX_STORAGE_GIB, MAX_VOLUMES, StorageQuota, StorageQuotaQuerySet

__all__ = [
    "MAX_CAP_JOBS", "MAX_GPU_MEMORY_GIB", "MAX_RUNTIME_SECONDS", "MIN_RUNTIME_SECONDS", "Action", "Cohort", "Drain", "DrainQuerySet", "Fabric",
    "GdrLevel", "GpuFlavor", "IdlePolicy", "IdleRules", "Limits", "MemberCap", "MemberCapQuerySet", "PriorityClass",
    "Quota", "TrainingRuntime", "TrainingRuntimeQuerySet",
    "QuotaGrant", "QuotaGrantQuerySet", "QuotaQuerySet", "QuotaRequest", "QuotaRequestQuerySet", "Scheduler",
    "Sharing", "runtime_limits", "say_seconds",
    "MAX_STORAGE_GIB", "MAX_VOLUMES", "StorageQuota", "StorageQuotaQuerySet",
]
