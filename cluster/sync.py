"""Reading a kind once for a whole reconcile, and pruning: shared by `Cluster` and
`FakeCluster`, which provide `list`, `get` and `delete` (and may carry a `cache`)."""

from __future__ import annotations

from .errors import NotFound, TransientError, UnknownKind
from .objects import ObjectRef, Snapshot, matches_selector, prune_victims

PRUNE_ATTEMPTS = 3  # a delete whose preconditions keep failing is left to the next reconcile


class SnapshotAndPrune:
    cache = None  # a `cluster.cache.WatchCache`, when reads come from a watch cache

    def snapshot(self, selector: str, kinds: list[tuple[str, str]]) -> Snapshot:
        """What `selector` finds of `kinds`: from the watch cache when there is one and it
        is in step, else one LIST per kind, for `apply` and `prune` to share."""
        snapshot = Snapshot()
        if self.cache is not None:
            kinds = self.cache.fill(snapshot, selector, kinds)
        for api_version, kind in kinds:
            try:
                snapshot.add(api_version, kind, self.list(api_version, kind, label_selector=selector))
            except UnknownKind:
                continue  # a kind the cluster does not serve has nothing of ours
        return snapshot

    def _lookup(self, objects: list[dict], snapshot: Snapshot | None) -> Snapshot | None:
        """What `apply` reads live objects from: `snapshot`, and from the watch cache the
        kinds it does not cover (a team's Namespace, which its prune never lists)."""
        if self.cache is None:
            return snapshot
        missing = sorted({(r.api_version, r.kind) for r in map(ObjectRef.of, objects)
                          if snapshot is None or not snapshot.covers(r)})
        if not missing:
            return snapshot
        lookup = snapshot.copy() if snapshot is not None else Snapshot()
        self.cache.fill(lookup, self.cache.selector, missing)
        return lookup

    def prune(
        self, selector: str, desired: list[dict], kinds: list[tuple[str, str]], *,
        snapshot: Snapshot | None = None,
    ) -> list[ObjectRef]:
        """Delete objects of `kinds` matching `selector` that we manage and no longer
        desire (see `objects.prune_victims`); returns what was deleted. A `snapshot` of
        the same selector and kinds saves the LISTs.

        Each delete names the uid and resourceVersion it was decided on: an object that
        changed since it was read (relabelled, replaced, taken over) is read again and
        deleted only if it is still a victim, so a stale read never deletes a live object.
        """
        snapshot = snapshot or self.snapshot(selector, kinds)
        deleted = []
        for obj in prune_victims(snapshot.items(), desired):
            if self._delete_victim(obj, selector, desired):
                deleted.append(ObjectRef.of(obj))
        return deleted

    def _delete_victim(self, obj: dict, selector: str, desired: list[dict]) -> bool:
        ref = ObjectRef.of(obj)
        for _ in range(PRUNE_ATTEMPTS):
            meta = obj.get("metadata") or {}
            preconditions = {k: meta[k] for k in ("uid", "resourceVersion") if meta.get(k)}
            try:
                return self.delete(ref.api_version, ref.kind, ref.name, ref.namespace,
                                   preconditions=preconditions or None)
            except TransientError as exc:
                if exc.status != 409:
                    raise
            try:
                obj = self.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            except NotFound:
                return False
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if not matches_selector(labels, selector) or not prune_victims([obj], desired):
                return False  # no longer ours, or no longer selected: it stays
        raise TransientError(f"{ref} kept changing while being pruned", status=409, reason="Conflict")
