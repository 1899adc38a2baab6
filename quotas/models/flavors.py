"""GPU flavors (hardware pools), the cohorts quotas borrow in, and priority classes; the
maximum runtime a training job on them gets by default and may ask for at most."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

import schedulers
from core.validators import (
    between,
    validate_dns1123_label,
    validate_node_labels,
    validate_resource_name,
    validate_taints,
    validate_tolerations,
)
from core.words import say_seconds

from ..grants import MAX_GPUS_PER_NODE

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

    def clean(self) -> None:
        super().clean()
        default, cap = self.default_max_runtime_seconds, self.max_runtime_cap_seconds
        if default is not None and cap is not None and default > cap:
            raise ValidationError({"default_max_runtime_seconds": (
                f"The default ({say_seconds(default)}) is longer than the cap ({say_seconds(cap)}).")})


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


# Which scheduler governs a flavor: one choice per module in `schedulers/`.
Scheduler = models.TextChoices(
    "Scheduler", [(s.name.upper(), (s.name, s.label)) for s in schedulers.SCHEDULERS.values()])


class Sharing(models.TextChoices):
    """How a flavor's GPUs are shared between pods; dcgm-exporter attributes a GPU (or a MIG
    slice) to one pod, never a time-sliced or MPS GPU, so those are exempt from idle reclaim."""

    EXCLUSIVE = "exclusive", "Whole GPUs, one pod each"
    MIG = "mig", "MIG slices, one pod each"
    TIME_SLICING = "time-slicing", "Time-sliced between pods"
    MPS = "mps", "Shared through MPS"


UNATTRIBUTABLE = frozenset({Sharing.TIME_SLICING, Sharing.MPS})


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
        validators=between(1, MAX_GPU_MEMORY_GIB), help_text="Memory of one GPU (or slice), in GiB.")
    gpus_per_node = models.PositiveSmallIntegerField(validators=between(1, MAX_GPUS_PER_NODE))
    scheduler = models.CharField(max_length=10, choices=Scheduler, default=Scheduler.KUEUE)
    node_labels = models.JSONField(default=dict, blank=True, validators=[validate_node_labels])
    node_taints = models.JSONField(default=list, blank=True, validators=[validate_taints])
    tolerations = models.JSONField(default=list, blank=True, validators=[validate_tolerations])
    gpu_sharing = models.CharField(
        max_length=12, choices=Sharing, default=Sharing.EXCLUSIVE,
        help_text="Time-sliced and MPS GPUs cannot be measured per pod, so their jobs are never reclaimed as idle.")
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
                condition=Q(cost_per_gpu_hour__isnull=True) | Q(cost_per_gpu_hour__gte=0),
                name="flavor_cost_not_negative",
                violation_error_message="A price cannot be negative.",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.name

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


class PriorityClass(RuntimeLimits):
    """A named priority for workloads; higher values may preempt lower ones."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    value = models.IntegerField(validators=between(-1_000_000_000, 1_000_000_000))
    description = models.TextField(blank=True)

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

