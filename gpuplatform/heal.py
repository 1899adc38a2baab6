"""Changes made behind our back reconcile their owner again.

The worker's watch cache (`cluster.cache`) lets a reconcile skip objects it shows as
desired. An edit or a delete by somebody else that the cache has not seen yet could make
such a skip wrong; when the watch brings that change, `on_cluster_change` enqueues the
reconcile of the item its labels name, by every owner of that scope (`gpuplatform.owners`),
so the write is late by the watch lag and never lost. Each worker process installs it on
its own cache (`worker_process_init`; `worker_init` for a solo pool).
"""

import logging
import threading
import time

from celery import shared_task
from celery.signals import worker_init, worker_process_init

from core.owners import Scope
from core.reconcile import RETRY_POLICY, cluster_configured, get_cluster

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


@worker_init.connect
@worker_process_init.connect
def install(**_) -> None:
    if not cluster_configured():
        return
    cache = get_cluster().cache
    if cache is not None:
        cache.on_change = on_cluster_change
