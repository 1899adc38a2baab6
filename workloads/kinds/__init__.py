"""The kinds of work a job can be, registered once, in the explicit list below: training (a
Kueue batch Job or a Volcano gang), inference (Deployment + Service + autoscaler, on every
scheduler), Ray jobs and clusters, notebooks and distributed training as Kubeflow TrainJobs
(Kueue flavors). Each is one module with one
complete declaration (`base.WorkKind`); everything else derives from this list: the model's
choices, the form and its presets, the API's enum, what the job owner prunes and the watcher
watches, the platform's RBAC, the idle sweep's stoppers and words, the team namespaces'
admission policy, the soak's mix. A new kind is one module here and one line in `KINDS`
(docs/architecture.md, "How to add a kind").
"""

from workloads import Kind

from . import inference, notebook, ray_cluster, ray_job, train_job, training
from .base import GpuShape, Integration, NotStopped, Preset, Soak, WorkKind

KINDS: tuple[WorkKind, ...] = (
    training.KIND,
    inference.KIND,
    ray_job.KIND,
    ray_cluster.KIND,
    notebook.KIND,
    train_job.KIND,
)

__all__ = ["KINDS", "GpuShape", "Integration", "NotStopped", "Preset", "Soak", "WorkKind", "by_name", "choices",
           "for_job", "integrations", "presets", "rendered_kinds"]


def by_name(name: str) -> WorkKind:
    """The kind a job's ``kind`` names."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise LookupError(f"no kind of work named {name!r}")


def choices() -> list[tuple[str, str]]:
    """(value, label) of every kind, for the model's field, the form and the API."""
    return [(kind.name, kind.label) for kind in KINDS]


def integrations() -> list[Integration]:
    """Every kind on every scheduler it runs on."""
    return [integration for kind in KINDS for integration in kind.integrations]


def for_job(job) -> Integration:
    """What renders and reads `job`: its kind on its flavor's scheduler."""
    found = by_name(job.kind).on(job.flavor.scheduler)
    if found is None:
        raise LookupError(f"{job.kind} does not run on {job.flavor.scheduler} flavors")
    return found


def presets() -> dict[str, tuple[str, dict]]:
    """The submission form's starting points, key -> (label, initial values with the kind)."""
    return {preset.key: (preset.label, {"kind": kind.name, **preset.values})
            for kind in KINDS for preset in kind.presets}


def rendered_kinds() -> list[Kind]:
    """Every object kind any job can own, without repeats, so prune and offboarding look through them all."""
    found: list[Kind] = []
    for integration in integrations():
        found += [k for k in integration.renders if k not in found]
    return found
