"""One informer: the objects of one kind in memory, kept in step by one watch.

Informer-style, as client-go's: a LIST, then a WATCH from its resourceVersion, resumed after
a disconnect and relisted after 410 Gone (`cluster.watch.WatchStream`); a store of what it
shows, keyed by (namespace, name), with indexers (name -> function of an object -> the index
values it files the object under); and one loop that retries failures with one backoff.
A kind the platform may not list or watch (403) is said once, with the kind and the verb
refused and what to grant, then tried again rarely; a kind the API server does not serve
(a CRD not installed) is marked, so a reader knows it is absent rather than behind.

What an event means is its owner's business: `on_event(event, obj)` runs on the watch
thread for every event (it writes the store with `Store.apply`, under the owner's lock);
the worker's watch cache (`cluster.cache`) and the status watcher (`jobs.watch.watcher`) are the
two owners.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable

from .errors import ClusterError, UnknownKind

UNSERVED_RECHECK_SECONDS = 60  # a CRD installed later is found again after this long
RETRY_MAX_SECONDS = 30
# A kind the platform may not list or watch (403): said once, then tried again this rarely,
# because RBAC changes when somebody changes it, not by waiting. Readers LIST it meanwhile.
FORBIDDEN_RETRY_SECONDS = 60
FORBIDDEN_RETRY_MAX_SECONDS = 600
_REFUSED_VERB = re.compile(r"cannot (\w+) resource")

Key = tuple[str, str]  # (namespace, name)
Indexer = Callable[[dict], Iterable]


def key_of(obj: dict) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name", "")


class Store:
    """The objects of one kind by (namespace, name), and indexes into them: index name ->
    value -> keys (a dict as an ordered set: an object that stays under a value keeps its
    place). Not locked itself: its owner holds its lock around reads and writes."""

    def __init__(self, indexers: dict[str, Indexer] | None = None):
        self.objects: dict[Key, dict] = {}
        self.indexers = indexers or {}
        self.indexes: dict[str, dict] = {name: {} for name in self.indexers}

    def get(self, key: Key) -> dict | None:
        return self.objects.get(key)

    def by(self, index: str, value) -> list[Key]:
        return list(self.indexes[index].get(value, ()))

    def put(self, obj: dict) -> dict | None:
        key = key_of(obj)
        old = self.objects.get(key)
        self.objects[key] = obj
        self._reindex(key, old, obj)
        return old

    def drop(self, key: Key) -> dict | None:
        old = self.objects.pop(key, None)
        if old is not None:
            self._reindex(key, old, None)
        return old

    def apply(self, event: str, obj: dict) -> dict | None:
        """Put or drop `obj` as `event` says; the object held before, if any."""
        return self.drop(key_of(obj)) if event == "DELETED" else self.put(obj)

    def drop_missing(self, listed: Iterable[dict]) -> list[dict]:
        """After a relist: drop and return what the list lacks."""
        keep = {key_of(obj) for obj in listed}
        return [self.drop(key) for key in list(self.objects) if key not in keep]

    def _reindex(self, key: Key, old: dict | None, new: dict | None) -> None:
        for name, values_of in self.indexers.items():
            index = self.indexes[name]
            before = set(values_of(old)) if old is not None else set()
            after = list(dict.fromkeys(values_of(new))) if new is not None else []
            for value in before.difference(after):
                keys = index.get(value)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[value]
            for value in after:
                if value not in before:
                    index.setdefault(value, {})[key] = None


class Informer:
    """One kind under `selector` (and `field_selector`), read through `transform`.

    `run()` watches until `stopping` is set (on a thread of its own: `start()`); `pump()`
    reads what happened since, once (a finite stream, as the fake's). `retry` is the first
    wait after a failure, doubled up to `retry_max`; `on_error(exc)` hears each failure.
    With `retry_unserved` a kind the API server does not serve is looked for again, with the
    same backoff; without, the loop ends and its owner looks again when it wants the kind
    (`UNSERVED_RECHECK_SECONDS` later).
    """

    def __init__(
        self, cluster, api_version: str, kind: str, *, on_event: Callable[[str, dict], None],
        selector: str | None = None, field_selector: str | None = None,
        transform: Callable[[dict], dict] | None = None, indexers: dict[str, Indexer] | None = None,
        lock=None, stopping: threading.Event | None = None, logger: logging.Logger | None = None,
        name: str = "informer", retry: float = 1.0, retry_max: float = RETRY_MAX_SECONDS,
        retry_unserved: bool = True, on_listed: Callable[[list[dict]], None] | None = None,
        on_error: Callable[[ClusterError], None] | None = None,
    ):
        self.cluster, self.api_version, self.kind = cluster, api_version, kind
        self.selector, self.field_selector, self.transform = selector, field_selector, transform
        self.store = Store(indexers)
        self.on_event, self.on_listed, self.on_error = on_event, on_listed, on_error
        self.lock = lock if lock is not None else threading.RLock()
        self.stopping = stopping if stopping is not None else threading.Event()
        self.log = logger or logging.getLogger(__name__)
        self.name, self.retry, self.retry_max, self.retry_unserved = name, retry, retry_max, retry_unserved
        self.synced = threading.Event()  # the first LIST is in (or the kind is known absent)
        self.live = False  # synced, and the watch is open (not failing)
        self.unserved_until = 0.0
        self.forbidden: str | None = None  # the verb the API server refuses us (403), if any
        self.stream = None
        self.resource_version: str | None = None
        self.thread: threading.Thread | None = None
        self._delay = retry  # the wait before the next attempt after a failure (`run`)

    @property
    def objects(self) -> dict[Key, dict]:
        return self.store.objects

    def state(self) -> str:
        if self.unserved_until:
            return "not served"
        if self.forbidden:
            return f"forbidden: {self.forbidden}"
        if self.live:
            return "watching"
        return "listing" if self.synced.is_set() else "starting"

    # --- running --------------------------------------------------------------------------
    def start(self) -> Informer:
        self.thread = threading.Thread(target=self.run, daemon=True, name=f"{self.name}-{self.kind}")
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.stream is not None:
            self.stream.stop()

    def pump(self) -> None:
        """One pass over a finite stream (the fake's), from where the informer stands."""
        try:
            stream = self._open()
            for event, obj in stream:
                self.on_event(event, obj)
            self.resource_version = stream.resource_version
        except UnknownKind:
            self._unserved()
        except ClusterError as exc:
            self._failed(exc, FORBIDDEN_RETRY_SECONDS)

    def run(self) -> None:
        self._delay = self.retry
        while not self.stopping.is_set():
            try:
                self._follow()
            except UnknownKind as exc:
                if not self._wait_until_served(exc):
                    return
            except ClusterError as exc:
                self._back_off(exc)
            except Exception:  # a bug must not leave a silently stale informer
                self.live = False
                self.log.exception("%s: %s stopped", self.name, self.kind)
                return

    # --- the loop's steps -------------------------------------------------------------------
    def _follow(self) -> None:
        """Hand every event of the stream to the owner, (re)opening it first if it stopped."""
        if self.stream is None or self.stream.stopped:
            # A stream keeps what it has seen, so a later relist can tell deletions
            # that happened while away; only a stopped one is replaced, from its version.
            if self.stream is not None:
                self.resource_version = self.stream.resource_version
            self.stream = self._open()
        for event, obj in self.stream:
            self.on_event(event, obj)
            self._delay = self.retry
        self.stopping.wait(self.retry)  # a finite stream ran out (the fake's)

    def _wait_until_served(self, exc: UnknownKind) -> bool:
        """The kind is not served (a CRD not installed yet): wait and look again, or give up
        (False) when this informer does not look again."""
        if not self.unserved_until:
            self.log.info("%s: %s %s is not served (%s); looking again", self.name, self.api_version,
                          self.kind, exc)
        self._unserved()
        if not self.retry_unserved:
            return False
        self.stream = None
        self.stopping.wait(self._delay)
        self._delay = min(self._delay * 2, self.retry_max)
        return True

    def _back_off(self, exc: ClusterError) -> None:
        # The stream keeps its place: iterating again resumes without losing events.
        if exc.status == 403:
            self._delay = max(self._delay, FORBIDDEN_RETRY_SECONDS)
        self._failed(exc, self._delay)
        self.stopping.wait(self._delay)
        self._delay = min(self._delay * 2, FORBIDDEN_RETRY_MAX_SECONDS if self.forbidden else self.retry_max)

    # --- what the loop learns ---------------------------------------------------------------
    def _open(self):
        return self.cluster.watch(
            self.api_version, self.kind, label_selector=self.selector, field_selector=self.field_selector,
            resource_version=self.resource_version, transform=self.transform,
            on_listed=self._listed, on_watching=self._watching)

    def _unserved(self) -> None:
        self.unserved_until = time.monotonic() + UNSERVED_RECHECK_SECONDS
        self.synced.set()

    def _watching(self) -> None:
        self.live = self.synced.is_set()
        self._allowed("watch")
        # A watch is open again: the outage is over, so the next one starts from the first
        # wait, not from where this one's backoff had grown (a quiet kind sees no event that
        # would reset it, and an API-server restart fails every kind at once).
        self._delay = self.retry

    def _listed(self, items: list[dict]) -> None:
        # After a relist (first start, or 410 Gone): what the list lacks is gone, also what
        # the owner put in the store without the stream seeing it.
        self._allowed("list")
        self.unserved_until = 0.0  # served after all (a CRD installed since)
        with self.lock:
            vanished = [obj for obj in self.store.drop_missing(items) if obj is not None]
        if self.on_listed is not None and self.synced.is_set():
            self.on_listed(vanished)
        self.live = True  # before `synced`: a reader waiting on it reads `live` next
        self.synced.set()

    def _failed(self, exc: ClusterError, retry: float) -> None:
        self.live = False
        if self.on_error is not None:
            self.on_error(exc)
        if exc.status == 403:
            self._forbidden(exc, retry)
        else:
            self.log.warning("%s: %s %s: %s; again in %.1f s", self.name, self.api_version, self.kind, exc, retry)

    def _forbidden(self, exc: ClusterError, retry: float) -> None:
        """The platform's identity may not list or watch the kind: said once per kind and
        verb (an error, with what to grant), then quietly tried again every `retry` s or more.
        Nothing waits for the kind meanwhile: readers LIST it themselves."""
        found = _REFUSED_VERB.search(exc.message or "")
        listing = self.stream is None or self.stream.resource_version is None
        verb = found.group(1) if found else ("list" if listing else "watch")
        first, self.forbidden = self.forbidden != verb, verb
        self.synced.set()
        (self.log.error if first else self.log.debug)(
            "%s: the platform may not %s %s (%s), so it is read from the API server instead; "
            "grant %s on it (gpuplatform/rbac.py, the chart's ClusterRole). Trying again in %.0f s. "
            "The API server said: %s",
            self.name, verb, self.kind, self.api_version, verb, retry, exc.message)

    def _allowed(self, verb: str) -> None:
        """A request of `verb` went through: its refusal is over (a watch needs the LIST first)."""
        if self.forbidden is not None and verb in (self.forbidden, "watch"):
            self.log.info("%s: the platform may %s %s (%s) now", self.name, self.forbidden, self.kind,
                          self.api_version)
            self.forbidden = None
