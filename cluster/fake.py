"""`FakeCluster`: an in-memory cluster with the public interface of `Cluster`.

Unit tests of tasks and watchers run against it without an API server. It shares the
rules that matter with the real client (`cluster.objects`: apply order, no-op detection,
prune victims; `cluster.watch`: resume and relist), so a caller that behaves on the fake
behaves on the cluster. It counts requests by the same verbs, one per call the real client
would send, discovery aside.

What it does not model: admission, defaulting, controllers, quantity canonicalisation
and most validation. Tests act as "somebody else" on the cluster with `put`, `remove`
and `compact`, which are not counted.
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
from collections import Counter, defaultdict, deque
from collections.abc import Callable

from .errors import Cause, ClusterError, NotFound, PermanentError, TransientError, UnknownKind
from .fields import Ownership, for_existing
from .objects import (
    Action,
    ApplyResult,
    ObjectRef,
    Snapshot,
    apply_order,
    comparable,
    create_only,
    dropped_fields,
    fields_of,
    is_unchanged,
    matches_fields,
    matches_selector,
    owned_fields,
)
from .sync import SnapshotAndPrune
from .watch import Gone, WatchStream

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")  # fullmatch


class FakeCluster(SnapshotAndPrune):
    def __init__(self, *, field_manager: str = "gpuplatform", missing_kinds=()):
        self.field_manager = field_manager
        self.requests: Counter[str] = Counter()
        self._missing = {tuple(k) for k in missing_kinds}  # (apiVersion, kind) not served
        self._objects: dict[tuple, dict] = {}
        self._history: list[tuple[int, str, dict]] = []  # (resourceVersion, type, object)
        self._compacted = 0
        self._version = itertools.count(1)
        self._rv = 0
        self._uids = itertools.count(1)
        self._failures: dict[str, deque[ClusterError]] = defaultdict(deque)
        self._logs: dict[tuple, str] = {}
        self._lock = threading.RLock()

    # --- test controls (not counted) --------------------------------------------------
    def fail_next(self, verb: str, error: ClusterError, times: int = 1) -> None:
        """Make the next `times` requests of `verb` (GET, LIST, PATCH, ...) raise `error`."""
        self._failures[verb.upper()].extend([error] * times)

    def put(self, obj: dict) -> dict:
        """Create or replace an object as another actor would (kubectl, a controller)."""
        with self._lock:
            ref = ObjectRef.of(obj)
            live = self._objects.get(ref.identity)
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            if live is not None:
                for field in ("uid", "creationTimestamp", "managedFields"):
                    if field in live["metadata"]:
                        meta.setdefault(field, live["metadata"][field])
            return self._store(stored, "MODIFIED" if live else "ADDED")

    def remove(self, api_version: str, kind: str, name: str, namespace: str | None = None):
        """Delete an object as another actor would."""
        with self._lock:
            self._drop(ObjectRef(api_version, kind, namespace, name).identity)

    def compact(self) -> None:
        """Forget the event history: watches resuming from an older version get 410 Gone."""
        with self._lock:
            self._compacted = self._rv

    def set_pod_logs(self, namespace, name, text, container=None) -> None:
        self._logs[(namespace, name, container)] = text

    def stored(self, api_version: str | None = None, kind: str | None = None) -> list[dict]:
        """Every object (optionally of one kind), for assertions."""
        group = None if api_version is None else api_version.rpartition("/")[0]
        return [
            copy.deepcopy(obj)
            for (g, k, _ns, _name), obj in sorted(self._objects.items())
            if (group is None or g == group) and (kind is None or k == kind)
        ]

    def reset_counts(self) -> None:
        self.requests.clear()

    @property
    def writes(self) -> int:
        return sum(self.requests[v] for v in ("POST", "PUT", "PATCH", "DELETE"))

    # --- the Cluster interface ---------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        self._served(api_version, kind)
        self._request("GET")
        with self._lock:
            live = self._objects.get(ObjectRef(api_version, kind, namespace, name).identity)
            if live is None:
                raise NotFound(f'{kind.lower()} "{name}" not found', status=404, reason="NotFound")
            return self._as(api_version, live)

    def list(self, api_version, kind, *, namespace=None, label_selector=None, field_selector=None) -> list[dict]:
        return self._list(api_version, kind, namespace, label_selector, field_selector)[0]

    def _list(self, api_version, kind, namespace, label_selector, field_selector=None):
        self._served(api_version, kind)
        self._request("LIST")
        with self._lock:
            items = self._matching(api_version, kind, namespace, label_selector)
            return [obj for obj in items if matches_fields(obj, field_selector)], str(self._rv)

    def pod_logs(self, namespace, name, container=None, tail_lines=200) -> str:
        self._request("GET")
        text = self._logs.get((namespace, name, container))
        if text is None:
            raise NotFound(f'pods "{name}" not found', status=404, reason="NotFound")
        return "".join(text.splitlines(keepends=True)[-tail_lines:])

    def apply(
        self, objects: list[dict], *, snapshot: Snapshot | None = None, rules: Ownership | None = None,
        before_write: Callable[[], None] | None = None,
    ) -> list[ApplyResult]:
        snapshot = self._lookup(objects, snapshot)
        return [self._apply_one(obj, snapshot, rules or {}, before_write) for obj in apply_order(objects)]

    def _apply_one(self, desired: dict, snapshot: Snapshot | None, rules: Ownership, before_write) -> ApplyResult:
        ref = ObjectRef.of(desired)
        self._served(ref.api_version, ref.kind)
        kind_rules = rules.get((ref.group, ref.kind))
        if self.cache is not None and kind_rules is not None:
            self.cache.rules[(ref.group, ref.kind)] = kind_rules
        from_cache = snapshot is not None and not snapshot.is_complete(ref)
        if snapshot is None or not snapshot.covers(ref):
            live = self._read(ref)
        elif snapshot.is_unknown(ref, kind_rules):
            try:  # as the real door: create only if absent, else read and decide
                return self._apply_onto(ref, create_only(desired), None, kind_rules, before_write)
            except TransientError as exc:
                if exc.status != 409:
                    raise
            return self._apply_onto(ref, desired, self._read(ref), kind_rules, before_write)
        else:
            live = snapshot.get(ref)  # as read, like the real door: it may be stale
        try:
            return self._apply_onto(ref, desired, live, kind_rules, before_write)
        except TransientError as exc:
            if exc.status != 409 or not from_cache:
                raise  # a conflict with a fresh read is the task's to retry, with backoff
            return self._apply_onto(ref, desired, self._read(ref), kind_rules, before_write)  # as the real door

    def _read(self, ref: ObjectRef) -> dict | None:
        self._request("GET")
        with self._lock:
            live = self._objects.get(ref.identity)
            return None if live is None else self._as(ref.api_version, live)

    def _apply_onto(self, ref: ObjectRef, desired: dict, live: dict | None, kind_rules,
                    before_write=None) -> ApplyResult:
        drift = ()
        if live is not None:
            desired, drift = for_existing(desired, live, kind_rules)
            if is_unchanged(desired, live, self.field_manager):
                return ApplyResult(ref, Action.UNCHANGED, live, drift)
        if before_write is not None:
            before_write()
        self._request("PATCH")
        self._validate(ref)
        with self._lock:
            live = self._objects.get(ref.identity)
            self._check_precondition(ref, desired, live)
            wanted = comparable(desired)
            if live is None:
                merged = copy.deepcopy(wanted)
            else:
                merged = copy.deepcopy(live)
                owned = (owned_fields(live, self.field_manager) or ("", {}))[1]
                for path in dropped_fields(owned, wanted):
                    _remove_path(merged, path.split("."))
                _merge(merged, copy.deepcopy(wanted))
            entries = [
                e for e in merged["metadata"].get("managedFields") or ()
                if e.get("manager") != self.field_manager
            ]
            entries.append(
                {
                    "manager": self.field_manager,
                    "operation": "Apply",
                    "apiVersion": ref.api_version,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_of(wanted),
                }
            )
            merged["metadata"]["managedFields"] = entries
            stored = self._store(merged, "MODIFIED" if live else "ADDED")
        if self.cache is not None:
            self.cache.record(self._as(ref.api_version, stored))
        return ApplyResult(ref, Action.CHANGED if live else Action.CREATED, stored, drift)

    def delete(self, api_version, kind, name, namespace=None, *, propagation_policy="Background",
               preconditions=None):
        self._served(api_version, kind)
        self._request("DELETE")
        ref = ObjectRef(api_version, kind, namespace, name)
        with self._lock:
            live = self._objects.get(ref.identity)
            for field, wanted in (preconditions or {}).items():
                if live is not None and live["metadata"].get(field) != wanted:
                    raise TransientError(
                        f"Precondition failed: {field} in precondition: {wanted}, "
                        f"{field} in object meta: {live['metadata'].get(field)}",
                        status=409, reason="Conflict")
            gone = self._drop(ref.identity)
        if gone and self.cache is not None:
            self.cache.forget(ref)
        return gone

    def watch(
        self, api_version, kind, *, namespace=None, label_selector=None, field_selector=None,
        resource_version=None, timeout=None, on_listed=None, on_watching=None, transform=None,
    ) -> WatchStream:
        """Yields what has happened (after `resource_version`, or the current state first),
        then ends instead of blocking: a unit test reads a finite stream."""
        self._served(api_version, kind)
        group = api_version.rpartition("/")[0]
        stream = None

        def lister():
            items, version = self._list(api_version, kind, namespace, label_selector, field_selector)
            return (items if transform is None else [transform(item) for item in items]), version

        def opener(version, _seconds):
            self._request("WATCH")
            with self._lock:
                if int(version) < self._compacted:
                    raise Gone(f"too old resource version: {version}")
                events = [
                    {"type": kind_, "object": self._as(api_version, obj)}
                    for rv, kind_, obj in self._history
                    if rv > int(version)
                    and (obj["kind"], ObjectRef.of(obj).group) == (kind, group)
                    and (namespace is None or obj["metadata"].get("namespace") == namespace)
                    and matches_selector(obj["metadata"].get("labels") or {}, label_selector)
                    and matches_fields(obj, field_selector)
                ]
            if not events:
                stream.stop()
            return _Replay(events)

        stream = WatchStream(
            lister=lister, opener=opener, resource_version=resource_version, timeout=timeout,
            on_listed=on_listed, on_watching=on_watching, transform=transform,
        )
        return stream

    def close(self) -> None:
        pass

    # --- internals --------------------------------------------------------------------
    def _request(self, verb: str) -> None:
        self.requests[verb] += 1
        queued = self._failures.get(verb)
        if queued:
            raise queued.popleft()

    def _served(self, api_version, kind) -> None:
        if (api_version, kind) in self._missing:
            raise UnknownKind(
                f"the cluster does not serve {kind} in {api_version} (is its CRD installed?)",
                status=404, reason="NotFound",
            )

    @staticmethod
    def _check_precondition(ref: ObjectRef, desired: dict, live: dict | None) -> None:
        """An apply that names a resourceVersion fails when the object moved on since. As on
        the API server, an object that does not exist is created whatever version is named
        (`objects.create_only` relies on it)."""
        wanted = (desired.get("metadata") or {}).get("resourceVersion")
        if wanted and live is not None and live["metadata"]["resourceVersion"] != wanted:
            raise TransientError(
                f"Operation cannot be fulfilled on {ref}: the object has been modified",
                status=409, reason="Conflict",
            )

    def _validate(self, ref: ObjectRef) -> None:
        if len(ref.name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(ref.name):
            message = f'{ref.kind} "{ref.name}" is invalid: metadata.name: Invalid value'
            raise PermanentError(
                message, status=422, reason="Invalid",
                causes=(Cause("metadata.name", "Invalid value", "FieldValueInvalid"),),
            )
        if ref.namespace and ("", "Namespace", "", ref.namespace) not in self._objects:
            raise NotFound(f'namespaces "{ref.namespace}" not found', status=404,
                           reason="NotFound")

    def _matching(self, api_version, kind, namespace, selector) -> list[dict]:
        group = api_version.rpartition("/")[0]
        return [
            self._as(api_version, obj)
            for (g, k, ns, _name), obj in sorted(self._objects.items())
            if g == group and k == kind and (namespace is None or ns == namespace)
            and matches_selector(obj["metadata"].get("labels") or {}, selector)
        ]

    def _store(self, obj: dict, event: str) -> dict:
        self._rv = next(self._version)
        meta = obj["metadata"]
        meta.setdefault("uid", f"fake-uid-{next(self._uids)}")
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta["resourceVersion"] = str(self._rv)
        self._objects[ObjectRef.of(obj).identity] = obj
        self._history.append((self._rv, event, copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    def _drop(self, identity) -> bool:
        obj = self._objects.pop(identity, None)
        if obj is None:
            return False
        if identity[:2] == ("", "Namespace"):
            # A namespace takes its contents with it (the real one does so eventually).
            for key in [k for k in self._objects if k[2] == identity[3]]:
                self._drop(key)
        self._rv = next(self._version)
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._history.append((self._rv, "DELETED", obj))
        return True

    @staticmethod
    def _as(api_version: str, obj: dict) -> dict:
        out = copy.deepcopy(obj)
        out["apiVersion"] = api_version  # the real server converts between versions
        return out


class _Replay:
    def __init__(self, events):
        self._events = events

    def __iter__(self):
        return iter(self._events)

    def close(self):
        pass


def _merge(base: dict, patch: dict) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _remove_path(obj: dict, path: list[str]) -> None:
    head, *rest = path
    if not isinstance(obj, dict) or head not in obj:
        return
    if rest:
        _remove_path(obj[head], rest)
    else:
        del obj[head]
