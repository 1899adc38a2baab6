"""What a reconciled owner declares, and the one step that reconciles any of them.

An owner is a part of the database whose objects the platform keeps on the cluster: the
cluster-wide objects, a team's own objects, a team's quotas, a job's workloads. Each is
declared once, next to its task (`Owner`), and the project lists them all in one place
(`gpuplatform.owners.OWNERS`, installed here when Django starts, because the apps sit below
that list and offboarding, in tenants, needs every owner a team's label can be on).
Everything that goes over "every owner" iterates that list: the sweep, the heal,
`manage.py reconcile` and `render`, the ClusterRole (`gpuplatform.rbac`), offboarding and
the orphan prune. `run` is the one reconcile step each of them takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cluster.fields import Ownership

from .ownership import (
    JOB_LABEL,
    TEAM_LABEL,
    cluster_wide_selector,
    job_selector,
    team_selector,
)
from .reconcile import Outcome, sync

Kind = tuple[str, str]  # (apiVersion, kind)


class Scope(StrEnum):
    """Which of our labels an owner's objects carry: none but managed-by, a team's, a job's.
    Every object of a narrower scope also carries the labels of the wider ones (a job's
    objects name their team), so offboarding a team reaches its jobs' objects too."""

    CLUSTER = "cluster"
    TEAM = "team"
    JOB = "job"

    @classmethod
    def of(cls, labels: dict) -> tuple[Scope, str]:
        """The narrowest scope whose label `labels` carry, and that label's value."""
        if labels.get(JOB_LABEL, "").isdigit():
            return cls.JOB, labels[JOB_LABEL]
        if labels.get(TEAM_LABEL):
            return cls.TEAM, labels[TEAM_LABEL]
        return cls.CLUSTER, ""

    @property
    def label_key(self) -> str | None:
        """The ownership label that names an item of this scope (none for the cluster's)."""
        return {Scope.TEAM: TEAM_LABEL, Scope.JOB: JOB_LABEL}.get(self)

    def selector(self, label: str) -> str:
        """What an owner of this scope selects for the item labelled `label`."""
        if self is Scope.JOB:
            return job_selector(int(label))
        return team_selector(label) if self is Scope.TEAM else cluster_wide_selector()

    def within(self, wider: Scope) -> bool:
        """Whether objects of this scope carry `wider`'s label too."""
        order = list(Scope)
        return order.index(self) >= order.index(wider)


def _propagate(item, err: Exception, outcome: Outcome) -> Outcome | None:
    return None


@dataclass(frozen=True, eq=False)
class Owner:
    """One kind of owner: what it keeps on the cluster and how, declared once.

    Keys are what its task takes (a primary key; "" for the one item of a cluster-wide owner);
    items are its rows as `load` reads them; a label is the value of its scope's ownership
    label on its objects (a team's slug, a job's id).
    """

    name: str  # "team objects": in logs, commands and tests
    scope: Scope
    kinds: tuple[Kind, ...]  # applied and pruned under the item's selector
    load: Callable[[list | None], Iterable]  # the items of these keys (None: all the sweep reconciles)
    keys: Callable[[], list]  # what the sweep reconciles, cheaply (primary keys)
    key: Callable[[Any], Any]  # item -> key
    label: Callable[[Any], str]  # item -> its ownership label's value
    key_for: Callable[[str], Any]  # a label's value -> the key of the row it names, None if none
    title: Callable[[Any], str]  # item -> how commands name it ("team vision")
    render: Callable[[Any], list[dict]]  # everything the item describes (`manage.py render`)
    record: Callable[[Any, Any, Outcome], None]  # (cluster, item, outcome): what the item remembers of a reconcile that went through
    task: Any  # the Celery task that reconciles one item: task(key), or task() for a cluster-wide owner
    # --- optional ---------------------------------------------------------------------
    also_applies: tuple[Kind, ...] = ()  # applied, pruned by no reconcile (a team's Namespace: offboarding)
    desired: Callable[[Any], list[dict] | None] | None = None  # what to apply now when not all of
    # `render` ([] removes everything, None leaves the cluster as it is); default: `render`
    prepare: Callable[[Any, Any], Outcome] | None = None  # (cluster, item): what must be there first
    prepare_refusals_are_its_own: bool = False  # a refused `prepare` is recorded by this owner too
    refused: Callable[[Any, Exception, Outcome], Outcome | None] = _propagate  # record a refusal:
    # the outcome to return, or None to let the error go on
    rules: Callable[[Any], Ownership] | None = None  # fields of live objects that are not ours
    guard: Callable[[Any, ExitStack], Callable[[], None]] | None = None  # before each write
    wanted: Callable[[set], set] | None = None  # of the keys found on the cluster, those the
    # database still wants there; None: never pruned as an orphan (teams: offboarding)
    send_many: Callable[..., None] | None = None  # how the sweep sends its keys; default: one task each

    def send(self, key, **options) -> None:
        """Enqueue the reconcile of one item."""
        self.task.apply_async(() if self.scope is Scope.CLUSTER else (key,), **options)

    def send_all(self, keys: list, **options) -> None:
        if self.send_many is not None:
            self.send_many(keys, **options)
            return
        for key in keys:
            self.send(key, **options)


def run(cluster, owner: Owner, item) -> Outcome:
    """Reconcile one item of `owner` (DESIGN.md section 3). A refusal (the cluster's, or a
    renderer's) is the owner's to record (`Owner.refused`)."""
    outcome = Outcome()
    with ExitStack() as held:  # what `guard` holds (a job's row lock) lasts until the record is written
        try:
            # 1. render what the item wants on the cluster now
            desired = owner.desired(item) if owner.desired is not None else owner.render(item)
            if desired is None:
                return outcome  # nothing to do now (a draft, a finished job kept for its logs)
        except Exception as err:
            return _refused(owner, item, err, outcome)
        # 2. what must be there first (a team's namespace before its quotas, its queues
        #    before a new job)
        if owner.prepare is not None:
            try:
                outcome += owner.prepare(cluster, item)
            except Exception as err:
                if not owner.prepare_refusals_are_its_own:
                    raise  # recorded by the owner it belongs to
                return _refused(owner, item, err, outcome)
        try:
            # 3. apply what differs, 4. prune what carries the item's labels and is no longer desired
            outcome += sync(cluster, desired, selector=owner.scope.selector(owner.label(item)),
                            kinds=list(owner.kinds), rules=owner.rules(item) if owner.rules else None,
                            before_write=owner.guard(item, held) if owner.guard else None)
        except Exception as err:
            return _refused(owner, item, err, outcome)
        # 5. record on the row what went through
        owner.record(cluster, item, outcome)
    return outcome


def _refused(owner: Owner, item, err: Exception, outcome: Outcome) -> Outcome:
    recorded = owner.refused(item, err, outcome)
    if recorded is None:
        raise err
    return recorded


# --- the installed list (gpuplatform.owners.OWNERS) -------------------------------------------
_registered: list[Owner] = []


def install(owners: list[Owner]) -> list[Owner]:
    """Make `owners` the reconciled owners; returns the previous list. Called once when
    Django starts (`gpuplatform.apps`), and by tests that add an owner."""
    global _registered
    previous, _registered = _registered, list(owners)
    return previous


def registered() -> list[Owner]:
    """The reconciled owners, in reconcile order (wider scopes first)."""
    if not _registered:
        raise RuntimeError("no reconciled owners are installed: Django has not been set up "
                           "(gpuplatform.apps installs gpuplatform.owners.OWNERS)")
    return list(_registered)


def by_scope(owners: list[Owner]) -> list[tuple[Scope, list[Owner]]]:
    """The owners grouped by scope, in scope order (the cluster's, then teams', then jobs')."""
    return [(scope, group) for scope in Scope if (group := [o for o in owners if o.scope is scope])]


def labelled_kinds(owners: list[Owner], scope: Scope) -> list[Kind]:
    """Every kind an object carrying `scope`'s label can be, narrowest owners first, and
    last what no reconcile prunes (a team's Namespace, which holds the rest)."""
    inside = [o for o in reversed(owners) if o.scope.within(scope)]
    kinds: list[Kind] = []
    for kind in [k for o in inside for k in o.kinds] + [k for o in inside for k in o.also_applies]:
        if kind not in kinds:
            kinds.append(kind)
    return kinds
