"""A watch that does not lose events: resume from the last resourceVersion after a
disconnect, relist after 410 Gone.

A Kubernetes watch is a long HTTP response that ends whenever the API server, a proxy or
the network says so. What a caller wants is different: every change, once, in order. The
state machine here gets that from two callables, so it is tested with stubs and used with
the real client unchanged:

- ``lister()`` returns ``(items, resource_version)`` of a consistent LIST;
- ``opener(resource_version, timeout_seconds)`` returns an event source: an iterable of
  raw watch events (``{"type": ..., "object": ...}``) with a ``close()`` that also
  unblocks a read in progress. It raises `Gone` when the version is too old.

A ``transform`` (optional) is applied to every object as it enters: each watch event's
object, before the stream remembers or hands it out. The lister applies the same
transform to what it lists (page by page, so a LIST never holds every full object at
once): a long-lived cache that reads a few fields keeps only those. It must keep
``metadata.name``, ``namespace`` and ``resourceVersion``, which the stream itself reads.

After a relist the stream emits synthetic events that turn what the caller has seen into
the current state: ADDED for new objects, MODIFIED for changed ones, DELETED for objects
that vanished while we were away. It can only know about objects it has seen, so a
stream started from a caller's resourceVersion learns its objects from its events.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator

from .errors import TransientError, from_status_object

DEFAULT_WINDOW_SECONDS = 300  # one watch request; the server ends it, we open the next


class Gone(Exception):
    """The resourceVersion we asked for is no longer in the API server's history (410)."""


class WatchStream:
    """Iterate for ``(event_type, object)``; `stop()` from any thread ends the iteration.

    A `TransientError` raised while (re)opening leaves the stream's position intact:
    iterate again later and it carries on from where it was, without replaying events.
    """

    def __init__(
        self,
        *,
        lister: Callable[[], tuple[list[dict], str]],
        opener: Callable[[str, int], object],
        resource_version: str | None = None,
        timeout: float | None = None,
        window: int = DEFAULT_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_listed: Callable[[list[dict]], None] | None = None,
        on_watching: Callable[[], None] | None = None,
        transform: Callable[[dict], dict] | None = None,
    ):
        self._list = lister
        self._open = opener
        self._rv = resource_version or None
        self._window = window
        self._clock = clock
        self._deadline = None if timeout is None else clock() + timeout
        self._known: dict[tuple[str, str], dict] = {}
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._source = None
        self.relists = 0
        # For a cache built on the stream: told when a relist has been handed out in full
        # (with the listed items: the caller now holds the whole state) and when a watch
        # response is open.
        self._on_listed = on_listed
        self._on_watching = on_watching
        self._transform = transform

    @property
    def resource_version(self) -> str | None:
        """The last version seen; pass it to a new watch to continue from here."""
        return self._rv

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def stop(self) -> None:
        self._stopped.set()
        self._drop_connection()

    def _drop_connection(self) -> None:
        """Close the current watch response; unless stopped, iteration resumes from
        the last resourceVersion (this is also how tests simulate a network cut)."""
        with self._lock:
            source = self._source
        if source is not None:
            source.close()

    def _remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - self._clock()

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        while not self._stopped.is_set():
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                return
            if self._rv is None:
                yield from self._relist()
                continue
            seconds = self._window if remaining is None else min(self._window, remaining)
            try:
                source = self._open(self._rv, max(1, math.ceil(seconds)))
            except Gone:
                self._rv = None
                continue
            with self._lock:
                self._source = source
            if self._on_watching is not None:
                self._on_watching()
            try:
                yield from self._events(source)
            except TransientError:
                pass  # the connection broke mid-stream: open again from self._rv
            finally:
                with self._lock:
                    self._source = None
                source.close()

    def _events(self, source) -> Iterator[tuple[str, dict]]:
        for raw in source:
            kind, obj = raw.get("type"), raw.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    self._rv = None  # relist on the next turn of the loop
                    return
                raise from_status_object(obj)
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self._rv = version
            if kind == "BOOKMARK":
                continue
            if self._transform is not None:
                obj = self._transform(obj)
            self._remember(kind, obj)
            yield kind, obj
            if self._stopped.is_set():
                return

    def _relist(self) -> Iterator[tuple[str, dict]]:
        items, version = self._list()
        self.relists += 1
        current = {_key(obj): obj for obj in items}
        synthetic = []
        for key, obj in current.items():
            seen = self._known.get(key)
            if seen is None:
                synthetic.append(("ADDED", obj))
            elif _version(seen) != _version(obj):
                synthetic.append(("MODIFIED", obj))
        synthetic += [("DELETED", obj) for key, obj in self._known.items() if key not in current]
        for kind, obj in synthetic:
            # Remember each event as it is handed out: a caller that stops half-way and
            # iterates again gets a fresh relist that yields only what it has not seen.
            self._remember(kind, obj)
            yield kind, obj
            if self._stopped.is_set():
                return
        self._rv = version
        if self._on_listed is not None:
            self._on_listed(items)

    def _remember(self, kind: str, obj: dict) -> None:
        if kind == "DELETED":
            self._known.pop(_key(obj), None)
        else:
            self._known[_key(obj)] = obj


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name", "")


def _version(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")
