"""Plain-dict helpers shared by the real client and the fake: identity, apply order, and
the "is this apply a no-op?" test.

Both implementations must agree on these rules, otherwise a unit test on the fake would
prove nothing about the cluster; so they live here, free of any network code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpuplatform"

# Fields the API server writes; a desired object never decides them.
SERVER_METADATA = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)


class Action(StrEnum):
    CREATED = "created"
    CHANGED = "changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Where an object lives. Namespace is None for cluster-scoped objects."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    @classmethod
    def of(cls, obj: dict) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or None, meta["name"])

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """The version-free key: v1beta1 and v1beta2 of one object are the same object."""
        return (self.group, self.kind, self.namespace or "", self.name)

    def __str__(self) -> str:
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{kind} {where}"


class Snapshot:
    """What one LIST per kind (or the watch cache) holds, so apply and prune need no read
    per object.

    An object of a listed kind that the snapshot lacks is taken as absent (or not ours yet):
    applying it is right either way, since server-side apply is idempotent. A kind filled
    from the watch cache is not *complete*: a miss there is unknown, and a kind whose
    fields controllers share is created only if it is absent (`is_unknown`, `create_only`),
    and read and decided on when it exists after all.
    """

    def __init__(self):
        self._kinds: set[tuple[str, str]] = set()
        self._incomplete: set[tuple[str, str]] = set()
        self._objects: dict[tuple[str, str, str, str], dict] = {}

    def add(self, api_version: str, kind: str, items: list[dict], *, complete: bool = True) -> None:
        key = (api_version.rpartition("/")[0], kind)
        self._kinds.add(key)
        if not complete:
            self._incomplete.add(key)
        for obj in items:
            self._objects[ObjectRef.of(obj).identity] = obj

    def copy(self) -> "Snapshot":
        other = Snapshot()
        other._kinds, other._incomplete = set(self._kinds), set(self._incomplete)
        other._objects = dict(self._objects)
        return other

    def covers(self, ref: "ObjectRef") -> bool:
        return (ref.group, ref.kind) in self._kinds

    def is_complete(self, ref: "ObjectRef") -> bool:
        return (ref.group, ref.kind) not in self._incomplete

    def needs_read(self, ref: "ObjectRef", rules) -> bool:
        """Whether `apply` cannot trust this snapshot about `ref`: a kind it does not
        cover, or an unknown (`is_unknown`)."""
        return not self.covers(ref) or self.is_unknown(ref, rules)

    def is_unknown(self, ref: "ObjectRef", rules) -> bool:
        """A cache miss on a kind with field rules: applying it blind would take back a
        controller's fields if it exists after all, so `apply` creates it only if it is
        absent (`create_only`) and reads it when it is not."""
        return self.get(ref) is None and not self.is_complete(ref) and bool(rules and rules.paths)

    def get(self, ref: "ObjectRef") -> dict | None:
        return self._objects.get(ref.identity)

    def items(self) -> list[dict]:
        return list(self._objects.values())


# A resourceVersion no stored object has: etcd numbers revisions from 1 for the empty
# store, so every write is 2 or later. Server-side apply takes a resourceVersion in the
# body as a precondition (409 Conflict when the object exists at another version) and
# ignores it when the object does not exist yet; so an apply carrying this one creates an
# absent object and refuses to touch an existing one, whatever state it is in.
CREATE_ONLY_VERSION = "1"


def create_only(desired: dict) -> dict:
    """`desired` as an apply that creates it when absent and fails with 409 when it exists
    (`CREATE_ONLY_VERSION`): one request where a read and then an apply would be two, for
    an object that is most likely new but might exist (a watch-cache miss)."""
    return {**desired, "metadata": {**(desired.get("metadata") or {}), "resourceVersion": CREATE_ONLY_VERSION}}


@dataclass(frozen=True)
class ApplyResult:
    ref: ObjectRef
    action: Action
    object: dict  # the live object after this call
    # Immutable paths where the desired object differs from the live one: kept as they
    # are on the cluster (see `cluster.fields`), for the caller to report.
    drift: tuple[str, ...] = ()

    @property
    def wrote(self) -> bool:
        return self.action is not Action.UNCHANGED


# Objects others depend on go first: a namespace before anything in it, Kueue flavors and
# cohorts before the ClusterQueues naming them, which come before the LocalQueues that
# point at them (the namespaced tier).
_RANK = {
    ("", "Namespace"): 0,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): 0,
    ("kueue.x-k8s.io", "ResourceFlavor"): 1,
    ("kueue.x-k8s.io", "Cohort"): 2,
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): 3,
    ("scheduling.k8s.io", "PriorityClass"): 3,
    ("scheduling.volcano.sh", "Queue"): 4,
    ("kueue.x-k8s.io", "ClusterQueue"): 5,
}
_OTHER_CLUSTER_SCOPED = 6
_NAMESPACED = 7


def apply_rank(obj: dict) -> int:
    ref = ObjectRef.of(obj)
    if (ref.group, ref.kind) in _RANK:
        return _RANK[(ref.group, ref.kind)]
    return _NAMESPACED if ref.namespace else _OTHER_CLUSTER_SCOPED


def apply_order(objects: list[dict]) -> list[dict]:
    """Dependencies first; a stable sort, so the caller's order holds within a tier."""
    return sorted(objects, key=apply_rank)


def is_managed(obj: dict) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


def comparable(desired: dict) -> dict:
    """The part of a desired object that an apply can change on the main resource."""
    out = {key: value for key, value in desired.items() if key != "status"}
    meta = desired.get("metadata") or {}
    out["metadata"] = {k: v for k, v in meta.items() if k not in SERVER_METADATA}
    return out


def _is_zero(value) -> bool:
    return value is None or value is False or value == "" or value == {} or value == [] or (
        type(value) is int and value == 0)


def is_subset(desired, live) -> bool:
    """Every value we set is present and equal in `live`; extra live fields are fine.

    Extra fields are what the server and its webhooks default (a Service's clusterIP, a
    container's terminationMessagePath). Scalars compare exactly: 8 is not "8", and a
    quantity the server rewrites ("1024Mi" -> "1Gi") never compares equal, so renderers
    must emit canonical quantity strings. Lists compare element by element, same length.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        for key, value in desired.items():
            if key not in live:
                # The server drops nulls, and the zero value of a field it stores without a
                # pointer (`hostNetwork: false`, `initialDelaySeconds: 0`, "", {}, []).
                if _is_zero(value):
                    continue
                return False
            if not is_subset(value, live[key]):
                return False
        return True
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(is_subset(d, l) for d, l in zip(desired, live, strict=True))
        )
    if desired is None:
        return live is None or live == {} or live == []
    return type(desired) is type(live) and desired == live


def owned_fields(live: dict, manager: str) -> tuple[str, dict] | None:
    """(apiVersion, fieldsV1) of what `manager` owns through apply, or None if nothing."""
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            return entry.get("apiVersion", ""), entry.get("fieldsV1") or {}
    return None


def dropped_fields(owned: dict, desired, path: str = "") -> list[str]:
    """Paths we applied before but no longer desire; applying would remove them.

    Only map keys ("f:") are followed; list items ("k:", "v:", "i:") are covered by the
    element-wise list comparison in `is_subset`.
    """
    dropped = []
    for key, sub in owned.items():
        if not key.startswith("f:"):
            continue
        name = key[2:]
        where = f"{path}.{name}" if path else name
        if not isinstance(desired, dict) or name not in desired:
            dropped.append(where)
        elif isinstance(desired[name], dict) and sub:
            dropped.extend(dropped_fields(sub, desired[name], where))
    return dropped


def fields_of(desired: dict) -> dict:
    """The fieldsV1 an apply of `desired` would own (lists as leaves); used by the fake."""
    out = {}
    for key, value in desired.items():
        if isinstance(value, dict) and value:
            out[f"f:{key}"] = fields_of(value)
        else:
            out[f"f:{key}"] = {}
    return out


def is_unchanged(desired: dict, live: dict, manager: str) -> bool:
    """True when applying `desired` as `manager` would not change `live`.

    Values must match, and we must already own the object through apply at this version:
    an object somebody else created is applied once so that we own our fields, and a field
    we used to set but no longer render is applied away.
    """
    owned = owned_fields(live, manager)
    if owned is None or owned[0] != desired.get("apiVersion"):
        return False
    wanted = comparable(desired)
    return is_subset(wanted, live) and not dropped_fields(owned[1], wanted)


def prune_victims(items: list[dict], desired: list[dict]) -> list[dict]:
    """Which listed objects a prune deletes, dependents first.

    An object without our managed-by label is never a victim, whatever selected it, nor one a
    controller made from one of ours (a controller ownerReference: KubeRay's RayCluster of a
    RayJob copies the RayJob's labels), which goes with its owner.
    Objects already being deleted are skipped, so a terminating namespace costs no write
    per sweep.
    """
    keep = {ObjectRef.of(obj).identity for obj in desired}
    victims = [
        obj
        for obj in items
        if is_managed(obj)
        and not any(ref.get("controller") for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])
        and ObjectRef.of(obj).identity not in keep
        and not (obj.get("metadata") or {}).get("deletionTimestamp")
    ]
    return list(reversed(apply_order(victims)))


_SET_TERM = re.compile(r"\s*(!?)\s*([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*")  # fullmatch


def matches_fields(obj: dict, selector: str | None) -> bool:
    """Field selector semantics of the API server (``a.b=x``, ``==``, ``!=``, terms joined by
    commas) on the object's dotted paths; a missing field is the empty string."""
    if not selector:
        return True
    for term in selector.split(","):
        negate = "!=" in term
        path, value = (s.strip() for s in term.replace("!=", "=").replace("==", "=").split("=", 1))
        actual = obj
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, dict) else None
        if (str(actual if actual is not None else "") == value) == negate:
            return False
    return True


def matches_selector(labels: dict, selector: str | None) -> bool:
    """Label selector semantics of the API server: =, ==, !=, in, notin, key, !key."""
    if not selector:
        return True
    return all(_term_matches(labels, term.strip()) for term in re.split(r",(?![^(]*\))", selector))


def _term_matches(labels: dict, term: str) -> bool:
    """One term of a label selector: an equality (=, ==, !=) or a set term."""
    if "!=" in term:
        key, value = (s.strip() for s in term.split("!=", 1))
        return labels.get(key) != value
    if "=" in term:
        key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
        return labels.get(key) == value
    match = _SET_TERM.fullmatch(term)
    if not match:
        raise ValueError(f"cannot parse label selector term {term!r}")
    negate, key, op, values = match.groups()
    if op:  # key in (a, b) / key notin (a, b)
        allowed = {v.strip() for v in values.split(",")}
        inside = key in labels and labels[key] in allowed
        return inside == (op == "in")
    return (key in labels) != bool(negate)  # key / !key
