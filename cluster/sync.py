"""Reading a kind once for a whole reconcile, and pruning: shared by `Cluster` and
`FakeCluster`, which provide `list` and `delete`."""

from __future__ import annotations

from .errors import UnknownKind
from .objects import ObjectRef, Snapshot, prune_victims


class SnapshotAndPrune:
    def snapshot(self, selector: str, kinds: list[tuple[str, str]]) -> Snapshot:
        """One LIST per kind under `selector`, for `apply` and `prune` to share."""
        snapshot = Snapshot()
        for api_version, kind in kinds:
            try:
                snapshot.add(api_version, kind, self.list(api_version, kind, label_selector=selector))
            except UnknownKind:
                continue  # a kind the cluster does not serve has nothing of ours
        return snapshot

    def prune(
        self, selector: str, desired: list[dict], kinds: list[tuple[str, str]], *,
        snapshot: Snapshot | None = None,
    ) -> list[ObjectRef]:
        """Delete objects of `kinds` matching `selector` that we manage and no longer
        desire (see `objects.prune_victims`); returns what was deleted. A `snapshot` of
        the same selector and kinds saves the LISTs."""
        snapshot = snapshot or self.snapshot(selector, kinds)
        deleted = []
        for obj in prune_victims(snapshot.items(), desired):
            ref = ObjectRef.of(obj)
            if self.delete(ref.api_version, ref.kind, ref.name, ref.namespace):
                deleted.append(ref)
        return deleted
