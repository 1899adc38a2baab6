"""Changes made behind our back reconcile their owner again, once for the platform.

The workers' watch caches (`cluster.cache`) let a reconcile skip objects they show as
desired. An edit or a delete by somebody else that a cache has not seen yet could make such
a skip wrong; when the watch brings that change, `on_cluster_change` enqueues the reconcile
of the item its labels name, by every owner of that scope (`gpuplatform.owners`), so the
write is late by the watch lag and never lost.

It runs in one process: the status watcher that holds the Lease (`jobs.watch.watcher.leading`,
sent by `manage.py watch_cluster`), which watches every kind of every owner with a watch
cache of its own (on `cluster.informer`, as the workers' are) from the start. Worker
processes no longer hear changes themselves, so N worker replicas do not enqueue N
reconciles of one change. This cache learns no field rules from applies (the leader applies
nothing), so a controller's write to a field it shares with us (Kueue unsuspending a Job,
the HPA's replicas) is heard too: it costs one reconcile that finds the object as desired
and writes nothing.
"""

import logging
import threading
import time

from celery import shared_task
from django.dispatch import receiver

from cluster.cache import WatchCache
from core.owners import Scope, registered
from core.reconcile import RETRY_POLICY
from jobs.watch.watcher import StatusWatcher, leading

from .owners import send_for

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 2.0  # a burst of changes to one owner (a namespace's contents) is one reconcile
_recent: dict[str, float] = {}
_recent_lock = threading.Lock()


def owner_of(labels: dict) -> str:
    """The item to reconcile, as ``job:<pk>``, ``team:<slug>`` or ``cluster``."""
    scope, label = Scope.of(labels)
    return f"{scope}:{label}" if label else str(scope)


def on_cluster_change(event: str, obj: dict) -> None:
    owner = owner_of((obj.get("metadata") or {}).get("labels") or {})
    now = time.monotonic()
    with _recent_lock:
        if now - _recent.get(owner, -DEBOUNCE_SECONDS) < DEBOUNCE_SECONDS:
            return
        _recent[owner] = now
    log.info("%s %s/%s behind our back: reconciling %s", event, obj.get("kind"),
             (obj.get("metadata") or {}).get("name"), owner)
    try:
        reconcile_owner.apply_async((owner,), countdown=1)
    except Exception as err:  # noqa: BLE001 - the sweep heals it later
        log.warning("could not enqueue the reconcile of %s: %s", owner, err)


@shared_task(**RETRY_POLICY)
def reconcile_owner(self, owner: str) -> None:
    scope, _, label = owner.partition(":")
    send_for(Scope(scope), label)


def healed_kinds() -> list[tuple[str, str]]:
    """Every kind a reconcile applies: what the heal watches."""
    kinds: list[tuple[str, str]] = []
    for owner in registered():
        for kind in (*owner.kinds, *owner.also_applies):
            if kind not in kinds:
                kinds.append(kind)
    return kinds


@receiver(leading, sender=StatusWatcher, dispatch_uid="gpuplatform-heal")
def start(watcher: StatusWatcher, **_) -> WatchCache:
    """Watch every owner's kinds for the leader, until its watcher stops."""
    cache = WatchCache(watcher.cluster, on_change=on_cluster_change)
    cache.watch(healed_kinds())
    watcher.on_stop(cache.stop)
    log.info("healing changes made behind our back to %d kinds", len(healed_kinds()))
    return cache
