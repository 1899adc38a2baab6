"""`Door`: what the platform decides about the cluster, whatever carries the requests.

One decision path for both doors: whether an object is already as desired (no write),
what of an existing object is ours to send (`cluster.fields`), a create-only write on a
watch-cache miss, a second decision after a conflict with a stale read, a delete's
preconditions, a watch's list-then-watch with resume and relist, and a Lease's writes.
`Cluster` (HTTP, `cluster.client`) and `FakeCluster` (memory, `cluster.fake`) provide only
the transport below, so a bug fixed here is fixed for both, and a unit test on the fake
runs the code production runs.

The transport, per door:
- `_served(api_version, kind)`: raise `UnknownKind` when the cluster does not serve it;
- `_fetch(ref)`: GET one object, `NotFound` when absent;
- `_list_pages(api_version, kind, namespace, label_selector, field_selector, transform)`:
  every item (transformed as it arrives) and the list's resourceVersion;
- `_send_apply(ref, body)`: one server-side apply PATCH, the stored object back;
- `_send_create(ref, body)` / `_send_replace(ref, body)`: POST / PUT (409 when it exists /
  moved on since the resourceVersion in `body`);
- `_send_patch(ref, operations)`: one JSON patch (RFC 6902) PATCH by our field manager, the
  stored object back (`NotFound` when absent, 422 when a ``test`` operation fails);
- `_send_delete(ref, propagation_policy, preconditions)`: one DELETE, `NotFound` when gone;
- `_open_watch(api_version, kind, namespace, label_selector, field_selector, version,
  seconds, stream)`: the events after `version` (`Gone` when too old), iterable, closable.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import NotFound, TransientError, UnknownKind
from .fields import Ownership, for_existing
from .objects import Action, ApplyResult, ObjectRef, Snapshot, apply_order, create_only, is_unchanged
from .sync import SnapshotAndPrune
from .watch import WatchStream


class Door(SnapshotAndPrune):
    """The decisions; subclasses give the transport (see the module docstring)."""

    field_manager: str

    # --- reading ----------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        """The live object; raises `NotFound` when it does not exist."""
        self._served(api_version, kind)
        return self._fetch(ObjectRef(api_version, kind, namespace, name))

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict]:
        """Objects of a kind, in one namespace or (namespace=None) all of them."""
        self._served(api_version, kind)
        return self._list_pages(api_version, kind, namespace, label_selector, field_selector, None)[0]

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the cluster serves the kind (a CRD's kind only once it is installed)."""
        try:
            self._served(api_version, kind)
        except UnknownKind:
            return False
        return True

    def _read(self, ref: ObjectRef) -> dict | None:
        try:
            return self._fetch(ref)
        except NotFound:
            return None

    # --- writing ----------------------------------------------------------------------
    def apply(
        self, objects: list[dict], *, snapshot: Snapshot | None = None, rules: Ownership | None = None,
        before_write: Callable[[], None] | None = None,
    ) -> list[ApplyResult]:
        """Server-side apply each object, dependencies first; skip those already as desired.

        Skipping needs the live object, never a write: from `snapshot` when it covers the
        kind, else one GET. A second reconcile of an unchanged database costs reads only.
        A watch-cache miss on a kind with field rules is applied as a create only and read
        only if it exists after all (`_create_or_decide`).
        This is not check-then-create: whatever was read, the PATCH is an idempotent apply.
        `rules` say which fields of an existing object belong to others (`cluster.fields`).
        `before_write()` runs before every PATCH (never for an object already as desired): a
        caller may lock and re-check there that the write is still wanted, and raise if not.
        """
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
            return self._create_or_decide(ref, desired, kind_rules, before_write)
        else:
            live = snapshot.get(ref)  # as read: it may be stale
        try:
            return self._apply_onto(ref, desired, live, kind_rules, before_write)
        except TransientError as exc:
            if exc.status != 409 or not from_cache:
                raise  # a conflict with a fresh read is the task's to retry, with backoff
            # The watch cache was behind the cluster: read the object and decide once more.
            return self._apply_onto(ref, desired, self._read(ref), kind_rules, before_write)

    def _create_or_decide(self, ref: ObjectRef, desired: dict, kind_rules, before_write) -> ApplyResult:
        """A cache miss on a kind with field rules (a new job's workload, most likely):
        create it if it is absent, in one request; if it exists after all (409), read it
        and decide as for any existing object, so no controller's field is taken back."""
        try:
            return self._apply_onto(ref, create_only(desired), None, kind_rules, before_write)
        except TransientError as exc:
            if exc.status != 409:
                raise
        return self._apply_onto(ref, desired, self._read(ref), kind_rules, before_write)

    def _apply_onto(self, ref: ObjectRef, desired: dict, live: dict | None, kind_rules,
                    before_write=None) -> ApplyResult:
        # 1. what of the object is ours to send; 2. nothing when it is already so;
        # 3. the caller's last word; 4. one PATCH, remembered by the watch cache.
        drift = ()
        if live is not None:
            desired, drift = for_existing(desired, live, kind_rules)
            if is_unchanged(desired, live, self.field_manager):
                return ApplyResult(ref, Action.UNCHANGED, live, drift)
        if before_write is not None:
            before_write()
        applied = self._send_apply(ref, desired)
        if self.cache is not None:
            self.cache.record(applied)
        return ApplyResult(ref, Action.CREATED if live is None else Action.CHANGED, applied, drift)

    def patch(self, api_version: str, kind: str, name: str, namespace: str | None = None, *,
              operations: list[dict]) -> dict:
        """A JSON patch of one object by our field manager, for what server-side apply cannot
        say: taking away a value it never sends again (a Kueue admission gate, `workloads.gates`).
        A ``test`` operation first makes it refuse (422) an object that moved on since it was read."""
        self._served(api_version, kind)
        patched = self._send_patch(ObjectRef(api_version, kind, namespace, name), operations)
        if self.cache is not None:
            self.cache.record(patched)
        return patched

    def create(self, obj: dict) -> dict:
        """Create an object (POST); a `TransientError` 409 when it exists already."""
        ref = ObjectRef.of(obj)
        self._served(ref.api_version, ref.kind)
        return self._send_create(ref, obj)

    def replace(self, obj: dict) -> dict:
        """Replace an object (PUT) carrying the resourceVersion it was read at; a
        `TransientError` 409 when it moved on since."""
        ref = ObjectRef.of(obj)
        self._served(ref.api_version, ref.kind)
        return self._send_replace(ref, obj)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str = "Background",
        preconditions: dict | None = None,
    ) -> bool:
        """Delete one object; False when it was already gone. `preconditions` (uid,
        resourceVersion) make a changed object answer 409 Conflict instead."""
        self._served(api_version, kind)
        ref = ObjectRef(api_version, kind, namespace, name)
        try:
            self._send_delete(ref, propagation_policy, preconditions)
        except NotFound:
            return False
        if self.cache is not None:
            self.cache.forget(ref)
        return True

    # --- watching ---------------------------------------------------------------------
    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        on_listed=None,
        on_watching=None,
        transform=None,
    ) -> WatchStream:
        """Events for a kind as ``(type, object)``; see `cluster.watch.WatchStream`.

        Without `resource_version` it starts with a LIST (ADDED for each object) and
        watches from there. `timeout` (seconds) ends the iteration; so does `stop()`.
        `transform(obj) -> obj` is applied to every listed item (page by page) and every
        event's object before the stream keeps it: a cache keeps only what it reads.
        """
        self._served(api_version, kind)
        stream: WatchStream | None = None

        def lister():
            return self._list_pages(api_version, kind, namespace, label_selector, field_selector, transform)

        def opener(version, seconds):
            return self._open_watch(api_version, kind, namespace, label_selector, field_selector,
                                    version, seconds, stream)

        stream = WatchStream(
            lister=lister, opener=opener, resource_version=resource_version, timeout=timeout,
            on_listed=on_listed, on_watching=on_watching, transform=transform,
        )
        return stream

    # --- counting ---------------------------------------------------------------------
    def reset_counts(self) -> None:
        self.requests.clear()

    @property
    def writes(self) -> int:
        return sum(self.requests[v] for v in ("POST", "PUT", "PATCH", "DELETE"))
