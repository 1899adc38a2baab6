"""A watch cache of the objects we own, so a reconcile reads memory instead of the API server.

Per kind one informer (`cluster.informer`, as client-go's shared informers): one LIST and
then one WATCH of the whole cluster under our managed-by label, resumed from its
resourceVersion after a disconnect and relisted after 410 Gone (`cluster.watch.WatchStream`). A kind is started the
first time a reconcile asks for it, in the process that asks (a forked worker starts its
own), and serves snapshots once its first LIST is in.

A cache is always a little behind the cluster, so what is read from it is only trusted
where being behind is harmless; every decision that a stale read could make wrong is
checked by the API server or re-read:

- *No-op check* (`apply`): an object the cache shows as desired is not written. If it was
  changed or deleted behind the cache's back in the last moments, the watch event that
  brings the change calls `on_change`, and the worker reconciles the owner again (level
  triggered, as a controller is): the write is late by the watch lag, never lost.
- *Cache miss*: unknown, not absent. A kind with field rules (`cluster.fields`: what a
  controller writes after creation) is applied as a create only (`objects.create_only`: a
  resourceVersion no object has, so the API server creates it if absent and answers 409 if
  it exists); on 409 it is read with a GET and decided as any existing object, so a
  controller's fields are never taken back. A new job's workload costs one request, not a
  GET and an apply. Other kinds are applied as they are, which is right whether the
  object exists or not.
- *Stale differences*: an apply onto a kind with field rules carries the resourceVersion
  it was computed from; a conflict is re-read and decided again (`Cluster.apply`).
- *Prune*: every delete carries the uid and resourceVersion it was decided on as
  preconditions; a conflict is re-read with a GET and deleted only if it is still ours,
  still selected and still not desired (`sync.SnapshotAndPrune.prune`).

Our own writes are recorded at once (`record`, `forget`), so a reconcile right after one
never reads its own past.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable

from .fields import split_path
from .informer import (  # noqa: F401 - the retry policy is the informer's; named here as before
    FORBIDDEN_RETRY_MAX_SECONDS,
    FORBIDDEN_RETRY_SECONDS,
    RETRY_MAX_SECONDS,
    UNSERVED_RECHECK_SECONDS,
    Informer,
)
from .objects import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    ObjectRef,
    Snapshot,
    matches_selector,
)

log = logging.getLogger(__name__)

OWNED = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
SYNC_TIMEOUT_SECONDS = 30  # a kind not listed by then is read with a LIST, as without a cache
LABELS = "labels"  # the index of each kind's store: (label, value) -> objects carrying it

_IGNORED = ("metadata", "status", "apiVersion", "kind")


def _equality_terms(selector: str) -> list[tuple[str, str]]:
    terms = []
    for term in re.split(r",(?![^(]*\))", selector or ""):
        term = term.strip()
        if "=" in term and "!=" not in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            terms.append((key, value))
    return terms


def _rv(obj: dict | None) -> int | None:
    value = ((obj or {}).get("metadata") or {}).get("resourceVersion") or ""
    return int(value) if value.isdigit() else None


def _newer(obj: dict, than: dict | None) -> bool:
    """Whether `obj` may replace `than`. etcd-backed API servers number versions in order;
    where a version is not a number, the later event wins."""
    new, old = _rv(obj), _rv(than)
    return than is None or new is None or old is None or new >= old


def _labels(obj: dict):
    return ((obj.get("metadata") or {}).get("labels") or {}).items()


def _select(informer: Informer, selector: str) -> list[dict]:
    terms = _equality_terms(selector)
    store = informer.store
    keys = min((store.indexes[LABELS].get(t, {}) for t in terms), key=len) if terms else store.objects.keys()
    return [obj for key in list(keys) if (obj := store.get(key)) is not None
            and matches_selector((obj.get("metadata") or {}).get("labels") or {}, selector)]


def _key(ref: ObjectRef) -> tuple[str, str]:
    return ref.namespace or "", ref.name


class WatchCache:
    """The objects of every kind asked for, under `selector` (our managed-by label), one
    `cluster.informer.Informer` per kind.

    For each kind it holds it asks the API server for `VERBS` (the platform's ClusterRole
    grants them: `gpuplatform.rbac`). A kind it may not list or watch is said once, with
    the verb refused, and tried again rarely (`FORBIDDEN_RETRY_SECONDS`); `states()` shows
    where each kind stands.

    `cluster` is a `Cluster` or `FakeCluster` (its `watch`). With `threaded=False` nothing
    runs in the background: `catch_up()` reads what happened since, which is how unit
    tests on the fake put the cache behind the cluster on purpose.

    `on_change(event_type, obj)` hears changes made behind our back to objects the cache
    knew (deleted, relabelled, annotated, or a field we own edited), so their owner can be
    reconciled again; it runs on a watch thread and must be quick (enqueue, not work).
    `watch(kinds)` starts kinds before any reconcile asks for them (the heal does).
    """

    VERBS = ("list", "watch")

    def __init__(
        self, cluster, *, selector: str = OWNED, threaded: bool = True,
        sync_timeout: float = SYNC_TIMEOUT_SECONDS, on_change: Callable[[str, dict], None] | None = None,
    ):
        self._cluster = cluster
        self.selector = selector
        self.threaded = threaded
        self.sync_timeout = sync_timeout
        self.on_change = on_change
        self.rules: dict[tuple[str, str], object] = {}  # (group, kind) -> FieldRules, learnt from apply
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._kinds: dict[tuple[str, str], Informer] = {}
        self._stopping = threading.Event()

    # --- what reconciles use ------------------------------------------------------------
    def fill(self, snapshot: Snapshot, selector: str, kinds: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Add to `snapshot` what the cache holds of `kinds` under `selector`; return the
        kinds it cannot answer for (not ours to select, not synced, watch failing): the
        caller LISTs those. Kinds the cluster does not serve are left out, as a LIST would."""
        if not set(_equality_terms(self.selector)) <= set(_equality_terms(selector)):
            return list(kinds)  # not a subset of what we watch
        rest = []
        for api_version, kind, informer in self._started(kinds):
            if informer is None:
                continue  # not served
            if not informer.synced.wait(self.sync_timeout if self.threaded else 0) or not informer.live:
                rest.append((api_version, kind))
                continue
            with self._lock:
                snapshot.add(api_version, kind, _select(informer, selector), complete=False)
        return rest

    def watch(self, kinds: list[tuple[str, str]]) -> None:
        """Start `kinds` now, without waiting for their first LIST."""
        self._started(kinds)

    def record(self, obj: dict) -> None:
        """Our own write, as the API server answered it."""
        informer = self._informer_of(obj)
        if informer is not None and matches_selector((obj.get("metadata") or {}).get("labels") or {}, self.selector):
            with self._lock:
                if _newer(obj, informer.store.get(_key(ObjectRef.of(obj)))):
                    informer.store.put(obj)

    def forget(self, ref: ObjectRef) -> None:
        """Our own delete went through."""
        with self._lock:
            informer = self._kinds.get((ref.group, ref.kind))
            if informer is not None:
                informer.store.drop(_key(ref))

    def catch_up(self) -> None:
        """Read every watch up to now (threaded=False only)."""
        for informer in list(self._kinds.values()):
            informer.pump()

    def stop(self) -> None:
        self._stopping.set()
        for informer in list(self._kinds.values()):
            informer.stop()
        for informer in list(self._kinds.values()):
            if informer.thread is not None:
                informer.thread.join(timeout=5)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {f"{i.kind}.{i.api_version}": len(i.objects) for i in self._kinds.values()}

    def states(self) -> dict[tuple[str, str], str]:
        """(apiVersion, kind) -> where its informer stands: "watching" (reads come from
        memory), "starting", "listing" (not in step: reconciles LIST it), "forbidden: <verb>"
        or "not served"."""
        with self._lock:
            return {(i.api_version, i.kind): i.state() for i in self._kinds.values()}

    # --- informers ----------------------------------------------------------------------
    def _informer_of(self, obj: dict) -> Informer | None:
        group = (obj.get("apiVersion") or "").rpartition("/")[0]
        return self._kinds.get((group, obj.get("kind")))

    def _started(self, kinds) -> list[tuple[str, str, Informer | None]]:
        if os.getpid() != self._pid:
            self._reset()  # a forked child: the parent's threads did not come along
        return [(api_version, kind, self._start(api_version, kind)) for api_version, kind in kinds]

    def _start(self, api_version: str, kind: str) -> Informer | None:
        key = (api_version.rpartition("/")[0], kind)
        with self._lock:
            informer = self._kinds.get(key)
            if informer is not None and informer.unserved_until:
                if time.monotonic() < informer.unserved_until:
                    return None
                informer = None  # look again: the CRD may be installed by now
            if informer is None:
                informer = self._kinds[key] = self._informer(api_version, kind)
                if self.threaded:
                    informer.start()
        if not self.threaded and not informer.synced.is_set():
            informer.pump()
        return None if informer.unserved_until else informer

    def _informer(self, api_version: str, kind: str) -> Informer:
        informer: Informer

        def event(event_type: str, obj: dict) -> None:
            self._event(informer, event_type, obj)

        def listed(vanished: list[dict]) -> None:
            for obj in vanished:
                self._tell("DELETED", obj)

        informer = Informer(
            self._cluster, api_version, kind, on_event=event, on_listed=listed, selector=self.selector,
            indexers={LABELS: _labels}, lock=self._lock, stopping=self._stopping, logger=log,
            name="watch cache", retry_unserved=False)
        return informer

    def _event(self, informer: Informer, event: str, obj: dict) -> None:
        obj.setdefault("apiVersion", informer.api_version)
        obj.setdefault("kind", informer.kind)
        with self._lock:
            old = informer.store.get(_key(ObjectRef.of(obj)))
            if not _newer(obj, old) or (old is not None and _rv(old) == _rv(obj) and event != "DELETED"):
                return  # older than what we hold, or the echo of our own write
            informer.store.apply(event, obj)
        if informer.synced.is_set() and self._behind_our_back(event, old, obj):
            self._tell(event, obj)

    def _behind_our_back(self, event: str, old: dict | None, new: dict) -> bool:
        """A change that may need a write from us: something we knew vanished, or its
        labels, annotations or a field we own changed. Status, and fields the kind's rules
        give to controllers (a Job's suspend, a Deployment's replicas), are not ours."""
        if old is None:
            return False  # new to us: strays are pruned by the sweep
        if event == "DELETED":
            return True
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        if new_meta.get("deletionTimestamp"):
            return False  # being deleted; its DELETED event follows
        if any(old_meta.get(k) != new_meta.get(k) for k in ("labels", "annotations")):
            return True
        ref = ObjectRef.of(new)
        paths = getattr(self.rules.get((ref.group, ref.kind)), "paths", ())
        return _owned_part(old, paths) != _owned_part(new, paths)

    def _tell(self, event: str, obj: dict) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(event, obj)
        except Exception:  # the watch must go on
            log.exception("watch cache: on_change failed for %s", ObjectRef.of(obj))


def _owned_part(obj: dict, paths: tuple[str, ...]) -> dict:
    out = {k: v for k, v in obj.items() if k not in _IGNORED}
    for path in paths:
        *parents, last = split_path(path)
        node = out
        for name in parents:
            if not isinstance(node.get(name), dict):
                break
            node[name] = node = dict(node[name])
        else:
            node.pop(last, None)
    return out
