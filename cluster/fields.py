"""Field ownership: which parts of an object we keep for its life, and which we hand over.

Server-side apply with force takes back every field in the applied configuration. That is
right for what the platform decides (labels, a queue's quota, a Service's ports) and wrong
for fields another controller writes after creation: Kueue unsuspends a Job it admits, the
HPA sets a Deployment's replicas, and a Job's pod template can no longer change at all.

`FieldRules` names those fields per kind; `Cluster.apply` (and the fake) read them through
`for_existing` once the object exists:

- `create_only`: sent when the object is created; afterwards the live value stands, whoever
  wrote it. A difference is expected, not reported.
- `immutable`: cannot change once created; a desired value that differs from the live one
  is *drift*, reported to the caller and never sent.

Neither kind of field is simply left out of a later apply: server-side apply removes the
fields its manager stops sending, which would unsuspend a Job or empty a pod template. So a
later apply carries the live value at those paths (a write that changes nothing there), and
the live resourceVersion as a precondition, so a controller that writes between our read
and our apply makes the apply fail with a conflict (retried) instead of being overwritten.
A reconcile with nothing else to change sends nothing at all.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from .objects import is_subset


@dataclass(frozen=True)
class FieldRules:
    """Dotted paths (``spec.template``) of one kind, by who decides them after creation."""

    create_only: tuple[str, ...] = ()
    immutable: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return self.create_only + self.immutable


# (API group, kind) -> rules; kinds without an entry are ours for their whole life.
Ownership = dict[tuple[str, str], FieldRules]

_MISSING = object()


def _get(obj, path: list[str]):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: dict, path: list[str], value) -> None:
    *parents, last = path
    for key in parents:
        obj = obj.setdefault(key, {})
    if value is _MISSING:
        obj.pop(last, None)
    else:
        obj[last] = copy.deepcopy(value)


def for_existing(desired: dict, live: dict, rules: FieldRules | None) -> tuple[dict, tuple[str, ...]]:
    """What to apply onto an object that exists, and the immutable paths that drifted.

    Every path of `rules` takes the live value (or is left out where the live object has
    none), so the apply neither changes nor drops it; `metadata.resourceVersion` becomes a
    precondition. Without rules, `desired` is returned as it is.
    """
    if rules is None or not rules.paths:
        return desired, ()
    drift = tuple(
        path for path in rules.immutable
        if (want := _get(desired, path.split("."))) is not _MISSING
        and not is_subset(want, _get(live, path.split(".")))
    )
    out = copy.deepcopy(desired)
    for path in rules.paths:
        _set(out, path.split("."), _get(live, path.split(".")))
    version = (live.get("metadata") or {}).get("resourceVersion")
    if version:
        out.setdefault("metadata", {})["resourceVersion"] = version
    return out, drift
