"""What every workload kind declares, once: the job spec it takes, the schedulers it runs on,
what it renders and watches (so prune, offboarding, the watcher and the platform's RBAC know
its kinds), which fields of its objects belong to other controllers, its renderer and its
status mapping. Pure: jobs in, dicts (or an `Observation`) out.
"""

from collections.abc import Callable
from dataclasses import dataclass

from cluster.fields import Ownership
from schedulers import Kind, Observation, Seen

from .. import spec


@dataclass(frozen=True)
class WorkloadKind:
    name: str
    # The job kind it serves (`jobs.spec.KINDS`, the values of `Job.Kind`) and the schedulers
    # (`jobs.spec.SCHEDULERS`, a flavor's `scheduler`) it serves it on.
    job_kind: str
    schedulers: tuple[str, ...]
    # Kinds it applies and prunes: the platform may get, list, create, patch and delete them
    # (`gpuplatform.rbac`, through the job owner in `jobs.tasks`).
    renders: tuple[Kind, ...]
    # Kinds the status watcher follows for it (list, watch), labelled by us (True) or found
    # through their owner, one of our objects (False).
    watched: tuple[tuple[Kind, bool], ...]
    # Fields of its objects that belong to other controllers (`cluster.fields`).
    fields: Ownership
    render: Callable[[object], list[dict]]
    observe: Callable[[object, Seen], Observation | None]
    # The names its pods get from the controllers that make them, as a regular expression
    # (Python's and Prometheus's RE2 alike, matched whole) that matches this job's pods and no
    # other job's (job "a" never "a-b"'s): how `jobs.telemetry` finds a job's GPUs among
    # dcgm-exporter's series, which carry the pod's name and namespace, not our labels.
    pod_pattern: Callable[[object], str]
    # Where the job answers, for its page: {"service", "namespace", "port", "local_port",
    # "address", "port_forward"}, or None (a batch job answers nowhere).
    endpoint: Callable[[object], dict | None] = lambda job: None
    # Stopped and started again rather than ended (a notebook): a person's stop, its idle GPUs
    # and its lifetime scale it to nothing and keep it, with its volumes (`jobs.models.notebook`).
    stoppable: bool = False

    @property
    def spec_fields(self) -> tuple[spec.Field, ...]:
        """What a person sets on a job of this kind: `jobs.spec`'s fields for its job kind that
        apply on at least one of its schedulers (declared there, never here)."""
        return tuple(field for field in spec.for_kind(self.job_kind)
                     if set(field.schedulers) & set(self.schedulers))
