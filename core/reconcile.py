"""What every reconcile task shares: the cluster it talks to, apply-then-prune, and the
retry policy for transient errors.

Tasks follow DESIGN.md section 3: take a primary key, re-read the row, render, apply with
server-side apply, prune what carries our labels but is no longer desired, record.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from cluster import ObjectRef, TransientError, get_cluster
from cluster.fields import Ownership
from cluster.objects import ApplyResult

log = logging.getLogger(__name__)

# Celery options for every reconcile task: retry only transient errors, with capped
# exponential backoff and jitter; a permanent error is recorded on the row instead.
RETRY_POLICY = dict(
    bind=True,
    acks_late=True,
    ignore_result=True,  # callers never wait for a reconcile; the row records the outcome
    autoretry_for=(TransientError,),
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=10,
)


class NoCluster(Exception):
    """No kubeconfig and not in a cluster: the platform runs without one (demo mode)."""


def cluster_configured() -> bool:
    if settings.KUBE_IN_CLUSTER:
        return True
    path = settings.KUBECONFIG or Path("~/.kube/config").expanduser()
    return Path(path).exists()


def current_cluster():
    """The cluster tasks use; tests swap it for a ``FakeCluster``."""
    if not cluster_configured():
        raise NoCluster("No cluster is configured (set KUBECONFIG or run make cluster-up).")
    return get_cluster()


@dataclass
class Outcome:
    applied: list[ApplyResult] = field(default_factory=list)
    pruned: list[ObjectRef] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return sum(result.wrote for result in self.applied) + len(self.pruned)

    @property
    def drift(self) -> list[str]:
        """``Kind name: path`` for each immutable field kept as the cluster has it."""
        return [f"{r.ref}: {path}" for r in self.applied for path in r.drift]

    def lines(self) -> list[str]:
        """One line per object that changed, for commands and logs."""
        return [f"{r.action:<9} {r.ref}" for r in self.applied if r.wrote] + [f"pruned    {ref}" for ref in self.pruned]

    def __add__(self, other: "Outcome") -> "Outcome":
        return Outcome(self.applied + other.applied, self.pruned + other.pruned)


def sync(
    cluster, desired: list[dict], *, selector: str, kinds: list[tuple[str, str]],
    rules: Ownership | None = None, before_write: Callable[[], None] | None = None,
) -> Outcome:
    """Apply ``desired``, then delete what ``selector`` finds of ``kinds`` beyond it.

    One LIST per kind serves both the no-op check of every object and the prune, so an
    unchanged team costs a few reads and no writes. ``rules`` name the fields of existing
    objects that belong to other controllers (``cluster.fields``); ``before_write`` runs
    before each apply that writes (`cluster.Cluster.apply`).
    """
    snapshot = cluster.snapshot(selector, kinds)
    applied = cluster.apply(desired, snapshot=snapshot, rules=rules, before_write=before_write) if desired else []
    pruned = cluster.prune(selector, desired, kinds, snapshot=snapshot)
    return Outcome(applied, pruned)


def enqueue(task, *args) -> None:
    """Send ``task(*args)`` (a row's primary key, or nothing for a task over every row of
    its kind) once the surrounding transaction commits (never from inside it).

    The row is already saved when this runs, so a broker that cannot be reached must not
    fail the user's request: the periodic sweep picks the row up later.
    """
    def send():
        try:
            task.delay(*args)
        except Exception as err:  # noqa: BLE001 - whatever the broker's trouble, the row is safe
            log.warning("could not enqueue %s%s, the sweep will pick it up: %s", task.name, args, err)

    transaction.on_commit(send)
