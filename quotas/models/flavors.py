"""GPU flavors (hardware pools), the cohorts quotas borrow in, and priority classes."""

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

from ..grants import MAX_GPUS_PER_NODE

MAX_GPU_MEMORY_GIB = 4096


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


class GpuFlavor(models.Model):
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


# The preemption contract (docs/preemption.md): how long a preempted job's pods have between
# SIGTERM and SIGKILL to checkpoint, and how long a job runs before Kueue may preempt it.
DEFAULT_GRACE_SECONDS = 30  # Kubernetes' own terminationGracePeriodSeconds
MAX_GRACE_SECONDS = 3600
MAX_MINIMUM_RUNTIME_SECONDS = 7 * 24 * 3600


def validate_not_reserved_priority(name: str) -> None:
    if name == schedulers.kueue.PROTECTED_PRIORITY_CLASS:
        raise ValidationError(f"{name} is the platform's own class for jobs inside their minimum runtime.")


class PriorityClass(models.Model):
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

