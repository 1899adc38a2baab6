"""`FakeCluster`: an in-memory cluster with the public interface of `Cluster`.

Unit tests of tasks and watchers run against it without an API server. It is storage and
transport only: every decision (apply order, no-op detection, create-only on a cache miss,
conflicts, prune, watch resume and relist) is the real door's own code (`cluster.door`),
so a caller that behaves on the fake behaves on the cluster. It counts requests by the
same verbs, one per call the real client would send, discovery aside.

What it does not model: admission (but for Kueue's admission gate, `cluster.fake_writes`),
defaulting, controllers, quantity canonicalisation and most validation. Tests act as "somebody else" on the cluster with `put`, `remove`
and `compact`, which are not counted.
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
from collections import Counter, defaultdict, deque

from .door import Door
from .errors import Cause, ClusterError, NotFound, PermanentError, TransientError, UnknownKind
from .fake_writes import admit_gates, disown, json_patch
from .objects import (
    ObjectRef,
    comparable,
    dropped_fields,
    fields_of,
    matches_fields,
    matches_selector,
    owned_fields,
)
from .watch import Gone

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")  # fullmatch


class FakeCluster(Door):
    def __init__(self, *, field_manager: str = "gpuplatform", missing_kinds=()):
        self.field_manager = field_manager
        self.requests: Counter[str] = Counter()
        self.forbidden: Counter[str] = Counter()
        self._missing = {tuple(k) for k in missing_kinds}  # (apiVersion, kind) not served
        self._objects: dict[tuple, dict] = {}
        self._history: list[tuple[int, str, dict]] = []  # (resourceVersion, type, object)
        self._compacted = 0
        self._version = itertools.count(1)
        self._rv = 0
        self._uids = itertools.count(1)
        self._failures: dict[str, deque[ClusterError]] = defaultdict(deque)
        self._logs: dict[tuple, str] = {}
        self._paths: dict[str, dict] = {}  # what `get_path` answers (`set_path`)
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

    def set_pod_logs(self, namespace, name, text, container=None, previous=False) -> None:
        """What `pod_logs` answers for the container (its previous run's with ``previous``)."""
        self._logs[(namespace, name, container, previous)] = text

    def set_path(self, path: str, body: dict | None) -> None:
        """What `get_path` answers for ``path`` (None: nothing, a 404)."""
        if body is None:
            self._paths.pop(path, None)
        else:
            self._paths[path] = copy.deepcopy(body)

    def get_path(self, path: str, **query) -> dict:
        self._request("GET")
        if path not in self._paths:
            raise NotFound(f"the server could not find the requested resource ({path})", status=404, reason="NotFound")
        return copy.deepcopy(self._paths[path])

    def stored(self, api_version: str | None = None, kind: str | None = None) -> list[dict]:
        """Every object (optionally of one kind), for assertions."""
        group = None if api_version is None else api_version.rpartition("/")[0]
        return [
            copy.deepcopy(obj)
            for (g, k, _ns, _name), obj in sorted(self._objects.items())
            if (group is None or g == group) and (kind is None or k == kind)
        ]

    # --- the transport (decisions: `cluster.door`, shared with the real door) ----------
    def _fetch(self, ref: ObjectRef) -> dict:
        self._request("GET")
        with self._lock:
            live = self._objects.get(ref.identity)
            if live is None:
                raise NotFound(f'{ref.kind.lower()} "{ref.name}" not found', status=404, reason="NotFound")
            return self._as(ref.api_version, live)

    def _list_pages(self, api_version, kind, namespace, label_selector, field_selector, transform):
        self._request("LIST")
        with self._lock:
            items = [obj for obj in self._matching(api_version, kind, namespace, label_selector)
                     if matches_fields(obj, field_selector)]
            version = str(self._rv)
        return (items if transform is None else [transform(item) for item in items]), version

    def _send_apply(self, ref: ObjectRef, desired: dict) -> dict:
        """Server-side apply as the API server merges it: our previous fields that are no
        longer sent are removed, the rest merged, our managedFields entry replaced."""
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
                admit_gates(live, merged)
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
            return self._as(ref.api_version, self._store(merged, "MODIFIED" if live else "ADDED"))

    def _send_patch(self, ref: ObjectRef, operations: list[dict]) -> dict:
        self._request("PATCH")
        with self._lock:
            live = self._objects.get(ref.identity)
            if live is None:
                raise NotFound(f'{ref.kind.lower()} "{ref.name}" not found', status=404, reason="NotFound")
            patched, removed = json_patch(live, operations)
            admit_gates(live, patched)
            disown(patched, removed)
            return self._as(ref.api_version, self._store(patched, "MODIFIED"))

    def _send_create(self, ref: ObjectRef, body: dict) -> dict:
        self._request("POST")
        self._validate(ref)
        with self._lock:
            if ref.identity in self._objects:
                raise TransientError(f'{ref.kind.lower()} "{ref.name}" already exists', status=409,
                                     reason="AlreadyExists")
            stored = copy.deepcopy(body)
            stored["metadata"].pop("resourceVersion", None)
            return self._as(ref.api_version, self._store(stored, "ADDED"))

    def _send_replace(self, ref: ObjectRef, body: dict) -> dict:
        self._request("PUT")
        with self._lock:
            live = self._objects.get(ref.identity)
            if live is None:
                raise NotFound(f'{ref.kind.lower()} "{ref.name}" not found', status=404, reason="NotFound")
            if live["metadata"]["resourceVersion"] != (body.get("metadata") or {}).get("resourceVersion"):
                raise TransientError(f"Operation cannot be fulfilled on {ref}: the object has been modified",
                                     status=409, reason="Conflict")
            stored = copy.deepcopy(body)
            admit_gates(live, stored)
            for field in ("uid", "creationTimestamp"):
                stored["metadata"][field] = live["metadata"].get(field)
            return self._as(ref.api_version, self._store(stored, "MODIFIED"))

    def _send_delete(self, ref: ObjectRef, propagation_policy: str, preconditions: dict | None) -> None:
        self._request("DELETE")
        with self._lock:
            live = self._objects.get(ref.identity)
            for field, wanted in (preconditions or {}).items():
                if live is not None and live["metadata"].get(field) != wanted:
                    raise TransientError(
                        f"Precondition failed: {field} in precondition: {wanted}, "
                        f"{field} in object meta: {live['metadata'].get(field)}",
                        status=409, reason="Conflict")
            if not self._drop(ref.identity):
                raise NotFound(f'{ref.kind.lower()} "{ref.name}" not found', status=404, reason="NotFound")

    def _open_watch(self, api_version, kind, namespace, label_selector, field_selector, version, _seconds,
                    stream) -> _Replay:
        """What has happened after `version`; a stream with nothing more to tell is stopped
        instead of blocking, so a unit test reads a finite stream."""
        self._request("WATCH")
        group = api_version.rpartition("/")[0]
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

    # --- beyond objects ---------------------------------------------------------------
    def pod_logs(self, namespace, name, container=None, tail_lines=200, *, previous=False, limit_bytes=None) -> str:
        self._request("GET")
        text = self._logs.get((namespace, name, container, previous))
        if text is None and previous and (namespace, name, container, False) in self._logs:
            # as the API server says it of a container that has not restarted
            raise PermanentError(f'previous terminated container "{container}" in pod "{name}" not found',
                                 status=400, reason="BadRequest")
        if text is None:
            raise NotFound(f'pods "{name}" not found', status=404, reason="NotFound")
        lines = text.splitlines(keepends=True)
        text = "".join(lines if tail_lines is None else lines[-tail_lines:])
        return text if limit_bytes is None else text.encode()[:limit_bytes].decode(errors="ignore")

    def close(self) -> None:
        pass

    # --- internals --------------------------------------------------------------------
    def _request(self, verb: str) -> None:
        self.requests[verb] += 1
        queued = self._failures.get(verb)
        if queued:
            error = queued.popleft()
            if error.status == 403:
                self.forbidden[verb] += 1  # as `Cluster.forbidden` counts them (by verb only)
            raise error

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
