"""What a kind of work declares, once, in its own module (`workloads.kinds`): the `Kind` a
person picks (its name and label, the spec fields it takes and requires, its presets, its GPU
shape, its own checks, whether it runs until cancelled, how it stops when idle) and, per
scheduler it runs on, an `Integration`: what it renders and watches, which fields of its
objects belong to other controllers, its renderer and status mapping, its pods' names.

What only some kinds have is optional, as Kueue's job framework keeps `JobWithCustomStop`
apart from `GenericJob`: an integration without `stop` is never reclaimed (its kind says why
in `idle_words`), one without `endpoint` answers nowhere. Nothing elsewhere keeps a table
keyed by a kind's name: choices, forms, the API, reclaim, the idle words, gpuctl (through the
API), RBAC, the team namespaces' admission policy and the soak's plan are derived from the
registry.

Pure declarations: jobs are read by attribute, no app is imported.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cluster.fields import Ownership
from workloads import Kind as ObjectKind
from workloads import Observation, Seen

from .. import spec
from .admission import Admitted


class NotStopped(Exception):
    """A workload could not be found to stop (it went meanwhile): nothing is recorded."""


# A kind's own checks: (job, flavor or None) -> {field: error}; every one is asked and every
# error reported (`jobs.models.checks`).
Check = Callable[[object, object], Mapping[str, str]]


@dataclass(frozen=True)
class Integration:
    """How one kind of work runs on one scheduler (Kueue's `pkg/controller/jobs/<kind>`)."""

    name: str
    scheduler: str
    # Kinds it applies and prunes: the platform may get, list, create, patch and delete them
    # (`gpuplatform.rbac`, through the job owner in `jobs.tasks`).
    renders: tuple[ObjectKind, ...]
    # Kinds the status watcher follows for it (list, watch), labelled by us (True) or found
    # through their owner, one of our objects (False).
    watched: tuple[tuple[ObjectKind, bool], ...]
    # Fields of its objects that belong to other controllers (`cluster.fields`).
    fields: Ownership
    render: Callable[[object], list[dict]]
    observe: Callable[[object, Seen], Observation | None]
    # The names its pods get from the controllers that make them, as a regular expression
    # (Python's and Prometheus's RE2 alike, matched whole) that matches this job's pods and no
    # other job's (job "a" never "a-b"'s): how `jobs.use.telemetry` finds a job's GPUs among
    # dcgm-exporter's series, which carry the pod's name and namespace, not our labels.
    pod_pattern: Callable[[object], str]
    # What it puts in a team namespace, as the team namespaces' admission policy knows it
    # (`tenants.admission`): what it renders that makes pods or is a Service, what their
    # controllers make in turn, and the team queue each names (`admission.Admitted`).
    admits: tuple[Admitted, ...] = ()
    # Optional: where the job answers, for its page: {"service", "namespace", "port",
    # "local_port", "address", "port_forward"}, or None (a batch job answers nowhere).
    endpoint: Callable[[object], dict | None] = lambda job: None
    # Optional (JobWithCustomStop): how the idle sweep and a lifetime's end stop its workload,
    # ``stop(cluster, job)``, and what that takes on the cluster, (API group, resource) -> verbs.
    # None: never stopped by the sweep (its kind's `idle_words` say why).
    stop: Callable[[object, object], None] | None = None
    stop_rights: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # Optional (Kueue's AdmissionGatedBy, `workloads.gates`): the kind of its objects that Kueue
    # makes the Workload from and carries the admission gate to it. A job the platform holds (a
    # per-person cap, a reservation) is created at once with the platform's gate on it, and let go
    # by taking the gate away; its field rules keep the gate create-only. None: the integration
    # does not carry a gate (a Deployment's pods, Volcano), and a held job stays off the cluster.
    gated: ObjectKind | None = None


@dataclass(frozen=True)
class GpuShape:
    """What a job asks at most and to start: the replicas named by a field (1 when empty)
    times its GPUs per worker. Declared once, read as a Python property (`at_most`,
    `to_start`) and as a database expression (`jobs.gpus`), held equal by the conformance
    suite on generated jobs."""

    most: str = "workers"
    start: str = "workers"
    # What the replicas are called on the job's page: "2 workers", "1-3 replicas".
    unit: str = "worker"

    def at_most(self, job) -> int:
        return (getattr(job, self.most) or 1) * job.gpus_per_worker

    def to_start(self, job) -> int:
        return (getattr(job, self.start) or 1) * job.gpus_per_worker


@dataclass(frozen=True)
class Preset:
    """A starting point the submission form offers: its key, its label, the fields it fills."""

    key: str
    label: str
    values: Mapping[str, object]


@dataclass(frozen=True)
class Soak:
    """Its place in the soak (`bench/soak/plan.py`): the local cluster's flavor it runs on per
    scheduler (each a variant of the mix, "<scheduler>-<kind>"), the fields of its own a soak
    job sets, and whether it lives until cancelled there (then a quarter as many, at least 2,
    cancelled after a while; ``early``: all at the start, as a notebook must fit the team's own
    free quota). How a variant's jobs end, by themselves or by a cancel, is its kind's
    `runs_until_cancelled`."""

    flavors: Mapping[str, str]
    # (workers, most replicas) -> the kind's own fields of a soak job.
    fields: Callable[[int, int], Mapping[str, object]] = lambda workers, replicas: {}
    long_lived: bool = False
    early: bool = False


@dataclass(frozen=True)
class WorkKind:
    """A kind of work a person submits (a value of `Job.kind`)."""

    name: str
    label: str
    integrations: tuple[Integration, ...]
    # The spec fields beyond the common ones it takes (`spec.Field.common`), and those the form
    # asks for rather than leaving to their defaults.
    takes: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    shape: GpuShape = GpuShape()
    presets: tuple[Preset, ...] = ()
    # Its own rules beyond the fields' validators.
    checks: tuple[Check, ...] = ()
    # What the submission form says of it before its fields, in plain words.
    note: str = ""
    # Runs until cancelled (a server, an interactive cluster): what it is once running, in the
    # words gpuctl prints ("serving"); "" for work that ends by itself.
    runs_until_cancelled: str = ""
    # Removed from the cluster as soon as it ends (a server: nothing to read after); otherwise
    # kept a day so its logs can be read.
    removed_when_ended: bool = False
    # Stopped and started again rather than ended (a notebook): a person's stop, its idle GPUs
    # and its lifetime scale it to nothing and keep it, with its volumes (`jobs.models.notebook`).
    stoppable: bool = False
    # Why the idle sweep leaves it alone, when none of its integrations can be stopped.
    idle_words: str = ""
    # Scaled between its fewest and most replicas by an autoscaler (its page shows the replicas).
    autoscaled: bool = False
    # A head pod beside its workers that holds no GPU (Ray): shown as "head + 2 x 4 GPUs".
    head_without_gpus: bool = False
    # Which of its pods hold GPUs (each its GPUs per worker): what the GPU-hours count.
    holds_gpus: Callable[[dict], bool] = lambda pod: True
    # Its workers are one program across nodes (torchrun): NCCL's rendezvous and fabric
    # settings (`workloads.pods.multi_node`).
    across_nodes: bool = False
    # Waits for a max runtime: a default and a cap from its flavor and priority class.
    has_max_runtime: bool = False
    # Optional: its place in the soak's mix; none, the soak leaves it out.
    soak: Soak | None = None

    @property
    def schedulers(self) -> tuple[str, ...]:
        return tuple(integration.scheduler for integration in self.integrations)

    @property
    def reclaimable(self) -> bool:
        """Whether the idle sweep can stop it (on the schedulers that know how)."""
        return any(integration.stop for integration in self.integrations)

    @property
    def spec_fields(self) -> tuple[spec.Field, ...]:
        """What a person sets on a job of this kind: the common fields and those it takes,
        where they apply on at least one of its schedulers, in the spec's order."""
        mine = set(self.takes)
        return tuple(f for f in spec.FIELDS if (f.common or f.name in mine)
                     and set(f.schedulers) & set(self.schedulers))

    def on(self, scheduler: str) -> Integration | None:
        return next((i for i in self.integrations if i.scheduler == scheduler), None)
