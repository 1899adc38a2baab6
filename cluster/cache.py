"""A watch cache of the objects we own, so a reconcile reads memory instead of the API server.

Informer-style, as client-go's shared informers: per kind, one LIST and then one WATCH of
the whole cluster under our managed-by label, resumed from its resourceVersion after a
disconnect and relisted after 410 Gone (`cluster.watch.WatchStream`). A kind is started the
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
from collections import defaultdict
from collections.abc import Callable

from .errors import ClusterError, UnknownKind
from .objects import MANAGED_BY_LABEL, MANAGED_BY_VALUE, ObjectRef, Snapshot, matches_selector

log = logging.getLogger(__name__)

OWNED = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
SYNC_TIMEOUT_SECONDS = 30  # a kind not listed by then is read with a LIST, as without a cache
UNSERVED_RECHECK_SECONDS = 60  # a CRD installed later is found again after this long
RETRY_MAX_SECONDS = 30
# A kind the platform may not list or watch (403): said once, then tried again this rarely,
# because RBAC changes when somebody changes it, not by waiting. Reconciles LIST it meanwhile.
FORBIDDEN_RETRY_SECONDS = 60
FORBIDDEN_RETRY_MAX_SECONDS = 600
_REFUSED_VERB = re.compile(r"cannot (\w+) resource")

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


class _Kind:
    """One informer: the objects of one kind, and where its watch stands."""

    def __init__(self, api_version: str, kind: str):
        self.api_version, self.kind = api_version, kind
        self.objects: dict[tuple, dict] = {}
        self.index: dict[tuple[str, str], set[tuple]] = defaultdict(set)
        self.synced = threading.Event()  # the first LIST is in
        self.live = False  # synced, and the watch is open (not failing)
        self.unserved_until = 0.0
        self.stream = None
        self.thread: threading.Thread | None = None
        self.resource_version: str | None = None
        self.forbidden: str | None = None  # the verb the API server refuses us (403), if any

    def state(self) -> str:
        if self.unserved_until:
            return "not served"
        if self.forbidden:
            return f"forbidden: {self.forbidden}"
        if self.live:
            return "watching"
        return "listing" if self.synced.is_set() else "starting"

    def put(self, key, obj) -> None:
        self.drop(key)
        self.objects[key] = obj
        for label in ((obj.get("metadata") or {}).get("labels") or {}).items():
            self.index[label].add(key)

    def drop(self, key) -> dict | None:
        old = self.objects.pop(key, None)
        if old is not None:
            for label in ((old.get("metadata") or {}).get("labels") or {}).items():
                self.index[label].discard(key)
        return old

    def select(self, selector: str) -> list[dict]:
        terms = _equality_terms(selector)
        keys = min((self.index.get(t, set()) for t in terms), key=len) if terms else self.objects.keys()
        return [obj for key in list(keys) if (obj := self.objects.get(key)) is not None
                and matches_selector((obj.get("metadata") or {}).get("labels") or {}, selector)]


class WatchCache:
    """The objects of every kind asked for, under `selector` (our managed-by label).

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
        self._kinds: dict[tuple[str, str], _Kind] = {}
        self._stopping = threading.Event()

    # --- what reconciles use ------------------------------------------------------------
    def fill(self, snapshot: Snapshot, selector: str, kinds: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Add to `snapshot` what the cache holds of `kinds` under `selector`; return the
        kinds it cannot answer for (not ours to select, not synced, watch failing): the
        caller LISTs those. Kinds the cluster does not serve are left out, as a LIST would."""
        if not set(_equality_terms(self.selector)) <= set(_equality_terms(selector)):
            return list(kinds)  # not a subset of what we watch
        if os.getpid() != self._pid:
            self._reset()  # a forked child: the parent's threads did not come along
        informers = [(api_version, kind, self._start(api_version, kind)) for api_version, kind in kinds]
        rest = []
        for api_version, kind, informer in informers:
            if informer is None:
                continue  # not served
            if not informer.synced.wait(self.sync_timeout if self.threaded else 0) or not informer.live:
                rest.append((api_version, kind))
                continue
            with self._lock:
                snapshot.add(api_version, kind, informer.select(selector), complete=False)
        return rest

    def record(self, obj: dict) -> None:
        """Our own write, as the API server answered it."""
        informer = self._informer_of(obj)
        if informer is not None and matches_selector((obj.get("metadata") or {}).get("labels") or {}, self.selector):
            key = ObjectRef.of(obj).identity
            with self._lock:
                if _newer(obj, informer.objects.get(key)):
                    informer.put(key, obj)

    def forget(self, ref: ObjectRef) -> None:
        """Our own delete went through."""
        with self._lock:
            informer = self._kinds.get((ref.group, ref.kind))
            if informer is not None:
                informer.drop(ref.identity)

    def catch_up(self) -> None:
        """Read every watch up to now (threaded=False only)."""
        for informer in list(self._kinds.values()):
            self._pump(informer)

    def stop(self) -> None:
        self._stopping.set()
        for informer in list(self._kinds.values()):
            if informer.stream is not None:
                informer.stream.stop()
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
    def _informer_of(self, obj: dict) -> _Kind | None:
        group = (obj.get("apiVersion") or "").rpartition("/")[0]
        return self._kinds.get((group, obj.get("kind")))

    def _start(self, api_version: str, kind: str) -> _Kind | None:
        key = (api_version.rpartition("/")[0], kind)
        with self._lock:
            informer = self._kinds.get(key)
            if informer is not None and informer.unserved_until:
                if time.monotonic() < informer.unserved_until:
                    return None
                informer = None  # look again: the CRD may be installed by now
            if informer is None:
                informer = self._kinds[key] = _Kind(api_version, kind)
                if self.threaded:
                    informer.thread = threading.Thread(
                        target=self._run, args=(informer,), daemon=True, name=f"watch-cache-{kind}")
                    informer.thread.start()
        if not self.threaded and not informer.synced.is_set():
            self._pump(informer)
        return None if informer.unserved_until else informer

    def _stream(self, informer: _Kind):
        def listed(items):
            self._listed(informer, items)

        def watching():
            informer.live = informer.synced.is_set()
            self._allowed(informer, "watch")

        return self._cluster.watch(
            informer.api_version, informer.kind, label_selector=self.selector,
            resource_version=informer.resource_version, on_listed=listed, on_watching=watching)

    def _pump(self, informer: _Kind) -> None:
        """One pass over a finite stream (the fake's), from where the informer stands."""
        try:
            stream = self._stream(informer)
            for event, obj in stream:
                self._event(informer, event, obj)
            informer.resource_version = stream.resource_version
        except UnknownKind:
            informer.unserved_until = time.monotonic() + UNSERVED_RECHECK_SECONDS
            informer.synced.set()
        except ClusterError as exc:
            informer.live = False
            if exc.status == 403:
                self._forbidden(informer, exc, FORBIDDEN_RETRY_SECONDS)
            else:
                log.warning("watch cache: %s: %s", informer.kind, exc)

    def _run(self, informer: _Kind) -> None:
        delay = 1.0
        while not self._stopping.is_set():
            try:
                if informer.stream is None:
                    informer.stream = self._stream(informer)
                for event, obj in informer.stream:
                    self._event(informer, event, obj)
                    delay = 1.0
                return  # stopped
            except UnknownKind:
                informer.unserved_until = time.monotonic() + UNSERVED_RECHECK_SECONDS
                informer.synced.set()
                return
            except ClusterError as exc:
                # The stream keeps its place: iterating again resumes without losing events.
                # Meanwhile the kind is read with a LIST.
                informer.live = False
                if exc.status == 403:
                    delay = max(delay, FORBIDDEN_RETRY_SECONDS)
                    self._forbidden(informer, exc, delay)
                else:
                    log.warning("watch cache: %s: %s; again in %.0f s", informer.kind, exc, delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, FORBIDDEN_RETRY_MAX_SECONDS if informer.forbidden else RETRY_MAX_SECONDS)
            except Exception:  # noqa: BLE001 - a bug must not leave a silently stale cache
                informer.live = False
                log.exception("watch cache: %s stopped", informer.kind)
                return

    def _forbidden(self, informer: _Kind, exc: ClusterError, retry: float) -> None:
        """The platform's identity may not list or watch the kind: said once per kind and
        verb (an error, with what to grant), then quietly tried again every `retry` s or
        more. Nothing waits for the kind meanwhile: reconciles LIST it themselves."""
        found = _REFUSED_VERB.search(exc.message or "")
        listing = informer.stream is None or informer.stream.resource_version is None
        verb = found.group(1) if found else ("list" if listing else "watch")
        first, informer.forbidden = informer.forbidden != verb, verb
        informer.synced.set()
        (log.error if first else log.debug)(
            "watch cache: the platform may not %s %s (%s), so every reconcile lists it from the "
            "API server; grant %s on it (gpuplatform/rbac.py, the chart's ClusterRole). Trying "
            "again in %.0f s. The API server said: %s",
            verb, informer.kind, informer.api_version, verb, retry, exc.message)

    def _allowed(self, informer: _Kind, verb: str) -> None:
        """A request of `verb` went through: its refusal is over (a watch needs the LIST first)."""
        if informer.forbidden is not None and verb in (informer.forbidden, "watch"):
            log.info("watch cache: the platform may %s %s (%s) now", informer.forbidden, informer.kind,
                     informer.api_version)
            informer.forbidden = None

    def _listed(self, informer: _Kind, items: list[dict]) -> None:
        # After a relist (first start, or 410 Gone): what the list lacks is gone.
        self._allowed(informer, "list")
        listed = {ObjectRef.of(obj).identity for obj in items}
        with self._lock:
            vanished = [informer.drop(key) for key in list(informer.objects) if key not in listed]
        if informer.synced.is_set():
            for obj in vanished:
                self._tell("DELETED", obj)
        informer.live = True  # before `synced`: a reconcile waiting on it reads `live` next
        informer.synced.set()

    def _event(self, informer: _Kind, event: str, obj: dict) -> None:
        obj.setdefault("apiVersion", informer.api_version)
        obj.setdefault("kind", informer.kind)
        key = ObjectRef.of(obj).identity
        with self._lock:
            old = informer.objects.get(key)
            if not _newer(obj, old) or (old is not None and _rv(old) == _rv(obj) and event != "DELETED"):
                return  # older than what we hold, or the echo of our own write
            if event == "DELETED":
                informer.drop(key)
            else:
                informer.put(key, obj)
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
        except Exception:  # noqa: BLE001 - the watch must go on
            log.exception("watch cache: on_change failed for %s", ObjectRef.of(obj))


def _owned_part(obj: dict, paths: tuple[str, ...]) -> dict:
    out = {k: v for k, v in obj.items() if k not in _IGNORED}
    for path in paths:
        *parents, last = path.split(".")
        node = out
        for name in parents:
            if not isinstance(node.get(name), dict):
                break
            node[name] = node = dict(node[name])
        else:
            node.pop(last, None)
    return out
