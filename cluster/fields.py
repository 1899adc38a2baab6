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

A path is dotted; a map key that holds dots itself (an annotation's) is written in brackets:
``metadata.annotations[kueue.x-k8s.io/admission-gated-by]`` (`split_path`).

Neither kind of field is simply left out of a later apply: server-side apply removes the
fields its manager stops sending, which would unsuspend a Job or empty a pod template. So a
later apply carries the live value at those paths (a write that changes nothing there), and
the live resourceVersion as a precondition, so a controller that writes between our read
and our apply makes the apply fail with a conflict (retried) instead of being overwritten.
A reconcile with nothing else to change sends nothing at all.
"""

from __future__ import annotations

import copy
import re
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
_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")


def split_path(path: str) -> list[str]:
    """The keys of a dotted path, a bracketed key taken whole:
    ``metadata.annotations[a.b/c]`` -> ``["metadata", "annotations", "a.b/c"]``."""
    return [plain or bracketed for plain, bracketed in _SEGMENT.findall(path)]


def _get(obj, path: list[str]):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: dict, path: list[str], value) -> None:
    if value is _MISSING:
        _drop(obj, path)
        return
    *parents, last = path
    for key in parents:
        obj = obj.setdefault(key, {})
    obj[last] = copy.deepcopy(value)


def _drop(obj: dict, path: list[str]) -> None:
    """Leave ``path`` out, and a map it empties (an annotations map that held only it): an
    apply never sends an empty map it did not mean."""
    head, *rest = path
    if not isinstance(obj, dict) or head not in obj:
        return
    if rest:
        _drop(obj[head], rest)
        if obj[head] == {}:
            del obj[head]
    else:
        del obj[head]


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
        if (want := _get(desired, split_path(path))) is not _MISSING
        and not is_subset(want, _get(live, split_path(path)))
    )
    out = copy.deepcopy(desired)
    for path in rules.paths:
        _set(out, split_path(path), _get(live, split_path(path)))
    version = (live.get("metadata") or {}).get("resourceVersion")
    if version:
        out.setdefault("metadata", {})["resourceVersion"] = version
    return out, drift
