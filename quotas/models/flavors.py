"""GPU flavors (hardware pools), the cohorts quotas borrow in, and priority classes; the
maximum runtime a training job on them gets by default and may ask for at most."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

import workloads
from core.validators import (
    between,
    validate_dns1123_label,
    validate_label_key,
    validate_node_labels,
    validate_resource_name,
    validate_taints,
    validate_tolerations,
)
from core.words import say_seconds

from ..grants import MAX_GPUS_PER_NODE
from .hardware import (
    MAX_REPLICAS_PER_GPU,
    Fabric,
    GdrLevel,
    gib_text,
    nccl_env,
    network_problems,
    sharing_problems,
    validate_hca_list,
    validate_ifname_list,
    validate_rdma_resources,
)
from .topology import topology_description, topology_levels, topology_problems

MAX_GPU_MEMORY_GIB = 4096
# A job's maximum runtime: a minute to a leap year (far inside Kubernetes' int32 seconds).
MIN_RUNTIME_SECONDS = 60
MAX_RUNTIME_SECONDS = 366 * 24 * 3600


class RuntimeLimits(models.Model):
    """What quota managers set on a flavor and on a priority class for training jobs: the
    maximum runtime a job without one gets, and the most a job may ask for. A job on both
    gets the tighter of each (`runtime_limits`)."""

    default_max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=between(MIN_RUNTIME_SECONDS, MAX_RUNTIME_SECONDS),
        verbose_name="default max runtime (seconds)",
        help_text="Given to training jobs that set none; empty: no default.")
    max_runtime_cap_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=between(MIN_RUNTIME_SECONDS, MAX_RUNTIME_SECONDS),
        verbose_name="max runtime cap (seconds)",
        help_text="The longest max runtime a training job may ask for; empty: no cap.")

    class Meta:
        abstract = True

    def runtime_problems(self) -> dict[str, str]:
        default, cap = self.default_max_runtime_seconds, self.max_runtime_cap_seconds
        if default is not None and cap is not None and default > cap:
            return {"default_max_runtime_seconds": (
                f"The default ({say_seconds(default)}) is longer than the cap ({say_seconds(cap)}).")}
        return {}

    def clean(self) -> None:
        super().clean()
        if errors := self.runtime_problems():
            raise ValidationError(errors)


@dataclass(frozen=True)
class Limits:
    """The maximum runtime rules for one job: its default and its cap (seconds, or None),
    and where the cap comes from, in words ("flavor h100")."""

    default: int | None = None
    cap: int | None = None
    cap_from: str = ""

    def refusal(self, asked: int | None) -> str:
        """Why ``asked`` seconds is refused ("" when it is not)."""
        if asked is None or self.cap is None or asked <= self.cap:
            return ""
        return (f"At most {say_seconds(self.cap)} ({self.cap:,} s): the max runtime cap of {self.cap_from}, "
                f"set by quota managers. Ask for less, or ask a quota manager.")


def runtime_limits(flavor, priority) -> Limits:
    """The tighter default and the tighter cap of a job's flavor and priority class (either
    may be None); a default above the cap is the cap."""
    sources = [(f"{kind} {row.name}", row) for kind, row in (("flavor", flavor), ("priority class", priority))
               if row is not None]
    caps = [(row.max_runtime_cap_seconds, name) for name, row in sources if row.max_runtime_cap_seconds]
    defaults = [row.default_max_runtime_seconds for _, row in sources if row.default_max_runtime_seconds]
    cap, cap_from = min(caps) if caps else (None, "")
    default = min(defaults) if defaults else None
    if default is not None and cap is not None:
        default = min(default, cap)
    return Limits(default, cap, cap_from)


# Which scheduler governs a flavor: one choice per scheduler module in `workloads/`.
Scheduler = models.TextChoices(
    "Scheduler", [(s.name.upper(), (s.name, s.label)) for s in workloads.SCHEDULERS.values()])


class Sharing(models.TextChoices):
    """How a flavor's GPUs are shared between pods; dcgm-exporter attributes a GPU (or a MIG
    slice) to one pod, never a time-sliced or MPS GPU, so those are exempt from idle reclaim."""

    EXCLUSIVE = "exclusive", "Whole GPUs, one pod each"
    MIG = "mig", "MIG slices, one pod each"
    TIME_SLICING = "time-slicing", "Time-sliced between pods"
    MPS = "mps", "Shared through MPS"


UNATTRIBUTABLE = frozenset({Sharing.TIME_SLICING, Sharing.MPS})
SHARED = [Sharing.TIME_SLICING.value, Sharing.MPS.value]  # shared by replicas


class GpuFlavor(RuntimeLimits):
    """A pool of identical GPU nodes, governed by exactly one scheduler."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    display_name = models.CharField(max_length=100, blank=True)
    description = models.TextField(blank=True)
    resource_name = models.CharField(
        max_length=253,
        validators=[validate_resource_name],
        help_text="Extended resource the nodes expose, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb.",
    )
    gpu_memory_gib = models.PositiveIntegerField(
        validators=between(1, MAX_GPU_MEMORY_GIB),
        help_text="Memory of one GPU in GiB: of the MIG profile for MIG, of the physical GPU when time-sliced or MPS.")
    gpu_model = models.CharField(
        max_length=60, blank=True, help_text="The GPU in plain words, e.g. T4 or H100 80GB (what one unit is a part of).")
    gpus_per_node = models.PositiveSmallIntegerField(validators=between(1, MAX_GPUS_PER_NODE))
    scheduler = models.CharField(max_length=10, choices=Scheduler, default=Scheduler.KUEUE)
    backfill = models.BooleanField(
        default=False, verbose_name="Reserve for the first waiting job (backfill)",
        help_text="Kueue flavors: the first job of a team's queue that does not fit gets the GPUs its blockers free by "
                  "their maximum runtime, and later jobs start before it only if they end in time (docs/eta.md). "
                  "Give the flavor a default maximum runtime, or nothing is sure and nothing is reserved.")
    node_labels = models.JSONField(default=dict, blank=True, validators=[validate_node_labels])
    node_taints = models.JSONField(default=list, blank=True, validators=[validate_taints])
    tolerations = models.JSONField(default=list, blank=True, validators=[validate_tolerations])
    gpu_sharing = models.CharField(
        max_length=12, choices=Sharing, default=Sharing.EXCLUSIVE,
        help_text="Time-sliced and MPS GPUs cannot be measured per pod, so their jobs are never reclaimed as idle.")
    replicas_per_gpu = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=between(2, MAX_REPLICAS_PER_GPU),
        help_text="Time-sliced or MPS: pods sharing one physical GPU (the device plugin's replicas).")
    # The network multi-node jobs train across, and the NCCL defaults they get (hardware.py).
    network_fabric = models.CharField(
        max_length=12, choices=Fabric, default=Fabric.UNDECLARED, blank=True,
        help_text="Multi-node training is refused until the fabric is declared.")
    nccl_socket_ifname = models.CharField(
        max_length=255, blank=True, validators=[validate_ifname_list],
        help_text="NCCL_SOCKET_IFNAME for multi-node jobs, e.g. eth0 or ^docker0,lo.")
    nccl_ib_hca = models.CharField(
        max_length=255, blank=True, validators=[validate_hca_list],
        help_text="NCCL_IB_HCA (InfiniBand, RoCE), e.g. mlx5_0:1,mlx5_1:1.")
    nccl_ib_gid_index = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=between(0, 255), help_text="NCCL_IB_GID_INDEX (RoCE), often 3.")
    nccl_net_gdr_level = models.CharField(
        max_length=3, choices=GdrLevel, blank=True, help_text="NCCL_NET_GDR_LEVEL (InfiniBand, RoCE).")
    rdma_resources = models.JSONField(
        default=dict, blank=True, validators=[validate_rdma_resources],
        help_text='RDMA devices each pod of a multi-node job gets, e.g. {"rdma/hca": 1} (InfiniBand, RoCE).')
    # The network topology jobs may keep their pods together in (topology.py, docs/topology.md).
    topology_block_label = models.CharField(
        max_length=253, blank=True, validators=[validate_label_key],
        help_text="Node label naming a node's block (a group of racks), e.g. cloud.google.com/gce-topology-block.")
    topology_rack_label = models.CharField(
        max_length=253, blank=True, validators=[validate_label_key],
        help_text="Node label naming a node's rack, e.g. cloud.google.com/gce-topology-subblock. Empty: no topology.")
    cost_per_gpu_hour = models.DecimalField(
        max_digits=8, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(0)],
        help_text="Optional price of one GPU-hour, for accounting.",
    )

    history = HistoricalRecords()  # the audit trail (quotas/audit.py)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(gpus_per_node__gte=1),
                name="flavor_gpus_per_node_positive",
                violation_error_message="A node has at least one GPU.",
            ),
            models.CheckConstraint(
                condition=Q(scheduler__in=["kueue", "volcano"]),
                name="flavor_scheduler_valid",
                violation_error_message="The scheduler must be kueue or volcano.",
            ),
            models.CheckConstraint(
                condition=Q(replicas_per_gpu__isnull=True)
                | Q(gpu_sharing__in=SHARED, replicas_per_gpu__gte=2, replicas_per_gpu__lte=MAX_REPLICAS_PER_GPU),
                name="flavor_replicas_only_when_shared",
                violation_error_message="Only time-sliced and MPS GPUs are shared by 2 or more replicas.",
            ),
            models.CheckConstraint(
                condition=Q(network_fabric__in=Fabric.values),
                name="flavor_fabric_valid",
                violation_error_message="The fabric is InfiniBand, RoCE, TCP or not declared.",
            ),
            models.CheckConstraint(
                condition=Q(cost_per_gpu_hour__isnull=True) | Q(cost_per_gpu_hour__gte=0),
                name="flavor_cost_not_negative",
                violation_error_message="A price cannot be negative.",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.name

    def clean(self) -> None:
        errors = {**self.runtime_problems(), **sharing_problems(self), **network_problems(self),
                  **topology_problems(self)}
        if self.backfill and self.scheduler != Scheduler.KUEUE:
            errors["backfill"] = "Reservations are the platform's for Kueue flavors; Volcano keeps its own queue order."
        if errors:
            raise ValidationError(errors)

    # --- what one unit of quota is --------------------------------------------------------
    def open_drain(self, now=None):
        """The drain that holds this pool now (announced and not reopened), if any (docs/drain.md)."""
        return self.drains.open_at(now or timezone.now()).first()

    @property
    def admission_held(self) -> bool:
        """Whether its queues admit nothing new now (a drain, on a scheduler that can hold them)."""
        return workloads.for_flavor(self).holds_queues and self.open_drain() is not None

    @property
    def shared_by(self) -> int:
        """Pods one physical GPU is handed to (1 unless time-sliced or MPS)."""
        return self.replicas_per_gpu if self.gpu_sharing in SHARED and self.replicas_per_gpu else 1

    @property
    def unit_memory_mib(self) -> int:
        """GPU memory one unit may count on: the GPU or MIG slice, or an even share of a shared
        GPU (what MPS enforces; what time-slicing only hopes for), in MiB as the device plugin
        computes it."""
        return self.gpu_memory_gib * 1024 // self.shared_by

    @property
    def unit_description(self) -> str:
        """What one unit of quota on this flavor means, in plain words."""
        gpu = self.gpu_model or self.display_name or self.name
        memory = f"{self.gpu_memory_gib} GiB"
        share = gib_text(self.unit_memory_mib)
        if self.gpu_sharing == Sharing.MIG:
            profile = self.resource_name.removeprefix("nvidia.com/mig-")
            return (f"One MIG {profile} slice of a {gpu} ({memory}): its own memory and compute, "
                    "isolated by the hardware; a fault stays in the slice.")
        if self.gpu_sharing == Sharing.TIME_SLICING:
            return (f"1/{self.shared_by} of a {gpu} ({memory}) by time-slicing: no memory isolation (plan on "
                    f"{share} each), and one pod's crash can take down the others on the GPU.")
        if self.gpu_sharing == Sharing.MPS:
            return (f"1/{self.shared_by} of a {gpu} ({memory}) through MPS: at most {share} of memory and "
                    f"{100 // self.shared_by}% of the compute, enforced; a GPU fault ends every client.")
        return f"One whole {gpu} ({memory}), not shared with other pods."

    @property
    def mps_limits(self) -> dict[str, str]:
        """The per-client limits the device plugin's MPS daemon sets for one unit, as the CUDA
        client variables that state them (device 0: an MPS container sees its one GPU)."""
        if self.gpu_sharing != Sharing.MPS:
            return {}
        return {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={self.unit_memory_mib}M",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(100 // self.shared_by)}

    # --- the network multi-node jobs train across -----------------------------------------
    @property
    def trains_across_nodes(self) -> bool:
        return self.network_fabric != Fabric.UNDECLARED

    @property
    def nccl_defaults(self) -> dict[str, str]:
        return nccl_env(self)

    @property
    def network_description(self) -> str:
        if not self.trains_across_nodes:
            return "No fabric declared: single-node jobs only."
        parts = [Fabric(self.network_fabric).label]
        parts += [f"{k}={v}" for k, v in self.nccl_defaults.items()]
        parts += [f"{name}: {count} per pod" for name, count in sorted((self.rdma_resources or {}).items())]
        return "; ".join(parts)

    # --- the network topology ----------------------------------------------------------
    @property
    def topology_levels(self) -> list[tuple[str, str]]:
        return topology_levels(self)

    @property
    def topology_description(self) -> str:
        return topology_description(self)

    @property
    def idle_exempt_because(self) -> str:
        """Why jobs on this flavor are never reclaimed as idle ("" when they may be)."""
        if self.gpu_sharing in UNATTRIBUTABLE:
            return (f"Exempt from idle reclaim: {self.get_gpu_sharing_display().lower()} GPUs cannot be "
                    "attributed to one pod by dcgm-exporter.")
        return ""


class Cohort(models.Model):
    """Teams whose quotas sit in one cohort may borrow each other's unused GPUs."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


# The preemption contract (docs/preemption.md): how long a preempted job's pods have between
# SIGTERM and SIGKILL to checkpoint, and how long a job runs before Kueue may preempt it.
DEFAULT_GRACE_SECONDS = 30  # Kubernetes' own terminationGracePeriodSeconds
MAX_GRACE_SECONDS = 3600
MAX_MINIMUM_RUNTIME_SECONDS = 7 * 24 * 3600


def validate_not_reserved_priority(name: str) -> None:
    if name == workloads.kueue.PROTECTED_PRIORITY_CLASS:
        raise ValidationError(f"{name} is the platform's own class for jobs inside their minimum runtime.")


class PriorityClass(RuntimeLimits):
    """A named priority for workloads; higher values may preempt lower ones, after the
    preempted job's minimum runtime, and its pods get the checkpoint grace to stop."""

    name = models.CharField(max_length=63, unique=True,
                            validators=[validate_dns1123_label, validate_not_reserved_priority])
    value = models.IntegerField(validators=between(-1_000_000_000, 1_000_000_000))
    description = models.TextField(blank=True)
    checkpoint_grace_seconds = models.PositiveIntegerField(
        default=DEFAULT_GRACE_SECONDS, validators=between(0, MAX_GRACE_SECONDS),
        help_text="Seconds a preempted job's pods have between SIGTERM and SIGKILL to save a checkpoint "
                  "(their terminationGracePeriodSeconds).")
    minimum_runtime_seconds = models.PositiveIntegerField(
        default=0, validators=between(0, MAX_MINIMUM_RUNTIME_SECONDS),
        help_text="Seconds a job of this class runs before a higher priority may preempt it (0: at once). "
                  "It does not hold back a lender reclaiming GPUs it lent.")

    class Meta:
        ordering = ["-value"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.CheckConstraint(
                condition=Q(value__gte=-1_000_000_000, value__lte=1_000_000_000),
                name="priority_value_in_range",
                violation_error_message="Priority values lie between -1e9 and 1e9.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"

