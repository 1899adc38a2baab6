"""The periodic sweep: re-reconcile everything so lost messages and hand edits heal."""

import logging

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from core.owners import Scope
from core.reconcile import RETRY_POLICY, NoCluster, current_cluster
from jobs.use import reclaim  # noqa: F401 - registers the idle-GPU sweep's task (beat: "idle-gpus")
from notifications.actions import notice_due
from quotas.actions import apply_grants, drain_windows

from . import heal  # noqa: F401 - registers the heal's task (its hook: the leader's watcher)
from .owners import prune_orphans, send_everything

log = logging.getLogger(__name__)


@shared_task(**RETRY_POLICY)
def sweep(self) -> dict:
    """0. grants that start or end change their quotas (with or without a cluster), drained
    pools hold or reopen, and
    people hear of grants and long waits, 1. every item of every reconciled owner
    (`gpuplatform.owners`): the cluster-wide objects, every team and its quotas, every live
    job (in batches of `jobs.tasks.SWEEP_BATCH` a task), 2. delete the objects of owners
    the database no longer wants (jobs gone or finished long ago)."""
    now = timezone.now()
    failures: list[str] = []  # quotas whose grants could not be applied: logged, retried next sweep
    apply_grants(now, failures=failures)
    drain_windows(now)  # drained pools hold or reopen (docs/drain.md)
    try:
        notice_due(now)  # notifications: grants starting or ending soon or ended, jobs waiting long
    except Exception:  # noqa: BLE001 - a word that cannot be said must not stop the reconciles
        log.exception("notifications failed; the sweep goes on and the next one tries again")
    try:
        cluster = current_cluster()
    except NoCluster:
        return {"skipped": "no cluster", "grant_failures": failures}
    # A sweep's message that waited past the next sweep is replaced by that sweep's own, so
    # it expires: after a broker or API-server outage the queue drains instead of piling up.
    counts = send_everything(expires=settings.SWEEP_INTERVAL_SECONDS)
    pruned = prune_orphans(cluster)
    return {**{f"{scope}s": n for scope, n in counts.items() if scope is not Scope.CLUSTER},
            "pruned": pruned, "grant_failures": failures}
