"""The reconciled owners: the one list, and what goes over all of them.

Each owner is declared once next to its task (`core.owners.Owner`: kinds, scope, load,
render, record, which rows the database still wants); this list is the only place that
names them all. Adding an owner is one declaration and one line here: the sweep, the
heal, `manage.py reconcile` and `render`, the ClusterRole (`gpuplatform.rbac`), offboarding
(`tenants.tasks.offboard`) and the orphan prune pick it up from the list
(`tests/reconcile/test_owners.py` holds them to it). The list is installed into
`core.owners` when Django starts (`gpuplatform.apps`), so the apps below reach it too.

Order matters: wider scopes first (the cluster's objects, then each team's, then each
job's), and within a scope in the order a reconcile of the item runs them (a team's
objects before its quotas).
"""

from __future__ import annotations

from core.owners import Owner, Scope, by_scope, registered, run
from core.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from core.reconcile import Outcome
from jobs.tasks import JOB_WORKLOADS, TEAM_VOLUMES
from quotas.tasks import CLUSTER_OBJECTS, TEAM_QUOTAS
from tenants.tasks import TEAM_OBJECTS

OWNERS: list[Owner] = [CLUSTER_OBJECTS, TEAM_OBJECTS, TEAM_QUOTAS, TEAM_VOLUMES, JOB_WORKLOADS]


def ordered_keys(owners: list[Owner]) -> list:
    """The keys any of `owners` (one scope's) reconciles, each once, in the order found."""
    return list(dict.fromkeys(key for owner in owners for key in owner.keys()))


def send_everything(**options) -> dict[str, int]:
    """Enqueue the reconcile of every item of every owner (the sweep), each item's owners
    together (a team's objects, then its quotas); returns how many items of each scope."""
    counts = {}
    for scope, owners in by_scope(registered()):
        keys = ordered_keys(owners)
        if len(owners) == 1:
            owners[0].send_all(keys, **options)
        else:
            for key in keys:
                for owner in owners:
                    owner.send(key, **options)
        counts[scope] = len(keys)
    return counts


def send_for(scope: Scope, label: str) -> int:
    """Enqueue the reconcile of the item `label` names, by every owner of `scope` (the heal);
    returns how many reconciles were sent."""
    sent = 0
    for owner in registered():
        if owner.scope is scope and (key := owner.key_for(label)) is not None:
            owner.task.delay(*(() if scope is Scope.CLUSTER else (key,)))
            sent += 1
    return sent


def steps(scope: Scope, keys: list | None = None) -> list[tuple[str, object]]:
    """(title, step) per item of `scope` (`keys`, or every item the sweep reconciles), a
    step reconciling the item by each owner of the scope in turn: `step(cluster) -> Outcome`."""
    owners = [o for o in registered() if o.scope is scope]
    items: dict = {}  # key -> [(owner, item)] in registry order
    for owner in owners:
        for item in owner.load(keys):
            items.setdefault(owner.key(item), []).append((owner, item))

    def step(pairs):
        return lambda cluster: sum((run(cluster, owner, item) for owner, item in pairs), Outcome())

    return [(pairs[0][0].title(pairs[0][1]), step(pairs)) for pairs in items.values()]


def render(scope: Scope, key) -> list[dict] | None:
    """What every owner of `scope` renders for the item `key` (None: no such item)."""
    found = False
    objects: list[dict] = []
    for owner in registered():
        if owner.scope is scope:
            for item in owner.load([key]):
                found = True
                objects += owner.render(item)
    return objects if found else None


def prune_orphans(cluster) -> int:
    """Remove the objects of owners the database no longer wants there (`Owner.wanted`):
    jobs gone, cancelled, or finished long ago. One snapshot per owner (from the watch
    cache, if any); each orphan's objects are pruned by its own selector."""
    pruned = 0
    for owner in registered():
        if owner.wanted is None:
            continue
        label = owner.scope.label_key
        on_cluster = cluster.snapshot(f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{label}", list(owner.kinds))
        values = {obj["metadata"]["labels"][label] for obj in on_cluster.items()}
        found = {key: value for value in values if (key := owner.key_for(value)) is not None}
        for key in sorted(set(found) - owner.wanted(set(found))):
            pruned += len(cluster.prune(owner.scope.selector(found[key]), [], list(owner.kinds)))
    return pruned
