"""Draining a GPU pool by a deadline for maintenance (docs/drain.md, issue 34 item 1).

A quota manager picks a flavor (or some of its nodes), a deadline and the end of the window.
From the drain's start until it reopens, the flavor admits nothing new: on Kueue its teams'
ClusterQueues carry `stopPolicy: Hold` (admitted workloads run to completion, nothing new is
admitted); Volcano has no declarative hold, so there a new job whose maximum runtime would
outlive the deadline is refused at submission (`Drain.refusal`). Running jobs keep running
and are never stopped by the platform. After ``reopens_at`` the queues are open again (the
sweep renders them so). The platform never writes Nodes: cordoning and draining them is the
cluster admin's, with the commands `Drain.commands` gives.
"""

import re
import shlex

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

import workloads
from core.words import say_seconds

from .flavors import GpuFlavor
from .hardware import node_selector

MAX_DRAIN_NODES = 500
# A Node's name is a DNS-1123 subdomain.
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_node_names(value) -> None:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValidationError("Give the nodes as a list of node names.", code="nodes")
    if len(value) > MAX_DRAIN_NODES:
        raise ValidationError(f"At most {MAX_DRAIN_NODES} nodes; drain the whole flavor instead.", code="nodes")
    bad = [name for name in value if len(name) > 253 or not NODE_NAME.match(name)]
    if bad:
        raise ValidationError(f"Not a node name: {', '.join(bad[:5])} (lowercase letters, digits, '-' and '.').",
                              code="nodes")
    if len(set(value)) != len(value):
        raise ValidationError("Name each node once.", code="nodes")


def when(moment) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z}"


class DrainQuerySet(models.QuerySet):
    def open_at(self, now):
        """Announced and not reopened at ``now`` (nor ended early)."""
        return self.filter(starts_at__lte=now, reopens_at__gt=now, ended_at__isnull=True)

    def not_over(self, now):
        """Still to come or open at ``now``: what a new drain of the same flavor may not overlap."""
        return self.filter(reopens_at__gt=now, ended_at__isnull=True)


class Drain(models.Model):
    """A flavor (or some of its nodes) emptied by ``deadline`` and closed until ``reopens_at``."""

    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="drains")
    nodes = models.JSONField(
        default=list, blank=True, validators=[validate_node_names],
        help_text="Only these nodes of the flavor (their names); empty: every node of the flavor.")
    starts_at = models.DateTimeField(
        default=timezone.now, help_text="From then on nothing new is admitted to the flavor.")
    deadline = models.DateTimeField(help_text="The pool must be empty by then (maintenance starts).")
    reopens_at = models.DateTimeField(help_text="The end of the maintenance window: the pool reopens by itself.")
    reason = models.CharField(max_length=300, help_text="Said to the owners of the jobs concerned.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Ended early by a quota manager.")
    ended_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    # Written by the sweep when it saw the window open and close (`quotas.actions.drain_windows`).
    held_at = models.DateTimeField(null=True, blank=True)
    reopened_at = models.DateTimeField(null=True, blank=True)

    history = HistoricalRecords()  # the audit trail (quotas/audit.py)
    objects = DrainQuerySet.as_manager()

    class Meta:
        ordering = ["-starts_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(deadline__gte=F("starts_at")), name="drain_deadline_after_start",
                                   violation_error_message="The deadline cannot come before the drain starts."),
            models.CheckConstraint(condition=Q(reopens_at__gt=F("deadline")), name="drain_reopens_after_deadline",
                                   violation_error_message="The pool reopens after the deadline."),
        ]

    def __str__(self) -> str:
        return f"drain of {self.flavor.name} by {when(self.deadline)}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        now = timezone.now()
        if self.deadline and self.starts_at and self.deadline < self.starts_at:
            errors["deadline"] = "The deadline cannot come before the drain starts."
        if self.deadline and self.reopens_at and self.reopens_at <= self.deadline:
            errors["reopens_at"] = "The pool reopens after the deadline."
        if self._state.adding and self.deadline and self.deadline <= now:
            errors["deadline"] = "The deadline must be in the future."
        if self.flavor_id and not self.nodes and not self.flavor.node_labels:
            errors["nodes"] = (f"Flavor {self.flavor.name} has no node labels to find its nodes by: "
                               "name the nodes to drain.")
        if self.flavor_id and self._state.adding and Drain.objects.not_over(now).filter(flavor_id=self.flavor_id).exists():
            errors["flavor"] = f"{self.flavor.name} already has a drain that has not reopened: end it first."
        if errors:
            raise ValidationError(errors)

    def declare_by(self, user) -> None:
        """Save a new drain for ``user`` (a quota manager), checked, in the audit trail."""
        self.created_by = user
        self.full_clean()
        self._history_user = user
        self.save()

    def end_by(self, user, now=None) -> bool:
        """End the drain early (the pool reopens at once); False when it was already over."""
        now = now or timezone.now()
        ended = Drain.objects.filter(pk=self.pk, ended_at__isnull=True, reopens_at__gt=now).update(
            ended_at=now, ended_by=user)
        if ended:
            self.refresh_from_db()
            self._history_user = user
            self.save(update_fields=["ended_at", "ended_by"])  # the audit trail's row
        return bool(ended)

    # --- the window ------------------------------------------------------------------------
    def phase(self, now=None) -> str:
        now = now or timezone.now()
        if self.ended_at is not None and self.ended_at <= now:
            return "ended"
        if now < self.starts_at:
            return "scheduled"
        if now < self.deadline:
            return "draining"
        if now < self.reopens_at:
            return "closed"
        return "reopened"

    def is_open(self, now=None) -> bool:
        return self.phase(now) in ("draining", "closed")

    @property
    def holds_queues(self) -> bool:
        """Kueue holds the flavor's ClusterQueues; Volcano has no such hold."""
        return workloads.for_flavor(self.flavor).holds_queues

    def refusal(self, job, now=None) -> dict[str, str]:
        """A field error for a new ``job`` on a drained flavor that cannot hold its queues
        (Volcano): one whose maximum runtime would outlive the deadline, or any in the window.
        On Kueue nothing is refused: the job waits in the held queue until the pool reopens."""
        now = now or timezone.now()
        if self.holds_queues or not self.is_open(now):
            return {}
        reopen = f"it reopens at {when(self.reopens_at)}"
        if now >= self.deadline:
            return {"flavor": f"{self.flavor.name} is closed for maintenance; {reopen}."}
        if not job.work_kind.has_max_runtime or not job.max_runtime_seconds:
            return {"flavor": (f"{self.flavor.name} drains by {when(self.deadline)} and this job has no maximum "
                               f"runtime, so it could outlive the deadline; {reopen}.")}
        left = int((self.deadline - now).total_seconds())
        if job.max_runtime_seconds > left:
            return {"max_runtime_seconds": (
                f"{self.flavor.name} drains by {when(self.deadline)}: a job started now must end within "
                f"{say_seconds(left)}, and this one may run {say_seconds(job.max_runtime_seconds)}. Ask for at most "
                f"{say_seconds(left)}, or submit after it reopens at {when(self.reopens_at)}.")}
        return {}

    def waiting_message(self) -> str:
        """What a job that waits in a held queue is told (the form's verdict, the API's)."""
        return (f"{self.flavor.name} is draining for maintenance ({self.reason}): nothing new starts on it until "
                f"it reopens at {when(self.reopens_at)}; this job waits until then.")

    # --- what the cluster admin runs ---------------------------------------------------------
    @property
    def node_selector(self) -> str:
        return node_selector(self.flavor)

    def commands(self) -> list[tuple[str, str]]:
        """(when, command) for the cluster admin: the platform never writes Nodes."""
        target = " ".join(shlex.quote(name) for name in self.nodes) if self.nodes \
            else f"-l {shlex.quote(self.node_selector)}"
        return [
            ("At the deadline, or once this page says the pool is empty: keep new pods off the nodes",
             f"kubectl cordon {target}"),
            ("Then evict what is left (jobs that outlived the deadline are stopped here)",
             f"kubectl drain {target} --ignore-daemonsets --delete-emptydir-data --timeout=10m"),
            ("After the maintenance: let pods onto the nodes again (the queues reopen by themselves)",
             f"kubectl uncordon {target}"),
        ]
