"""What `FakeCluster` does to a write beyond storing it: a JSON patch (RFC 6902) applied as the
API server applies it, what the patch takes from every manager's fields, and the one admission
rule of another controller it models: Kueue's admission gate (the annotation
``kueue.x-k8s.io/admission-gated-by``, Kueue's AdmissionGatedBy), which an object gets only when
it is created; afterwards gates can only be taken away (Kueue's webhooks,
pkg/util/webhook/validation_admissiongatedby.go, refuse anything else with 403).
"""

from __future__ import annotations

import copy

from .errors import PermanentError

ADMISSION_GATE = "kueue.x-k8s.io/admission-gated-by"


def pointer(path: str) -> list[str]:
    """The keys of a JSON pointer (``/metadata/annotations/a~1b`` -> metadata, annotations, a/b)."""
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _invalid(message: str) -> PermanentError:
    # The API server answers a patch it cannot apply (a failed test, a missing path) with 422.
    return PermanentError(message, status=422, reason="Invalid")


def _parent(obj: dict, keys: list[str], *, create: bool = False) -> dict:
    for key in keys[:-1]:
        if not isinstance(obj.get(key), dict):
            if not create:
                raise _invalid(f"the path {'/'.join(keys)} does not exist")
            obj[key] = {}
        obj = obj[key]
    return obj


def json_patch(obj: dict, operations: list[dict]) -> tuple[dict, list[list[str]]]:
    """``obj`` with the operations applied (test, add, replace, remove on maps), and the paths
    removed; nothing is changed when one operation fails."""
    out, removed = copy.deepcopy(obj), []
    for op in operations:
        keys = pointer(op["path"])
        parent = _parent(out, keys, create=op["op"] == "add")
        last = keys[-1]
        if op["op"] == "test":
            if parent.get(last) != op.get("value"):
                raise _invalid(f"testing value {op['path']} failed")
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace" and last not in parent:
                raise _invalid(f"replace operation does not apply: doc is missing key: {op['path']}")
            parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if last not in parent:
                raise _invalid(f"remove operation does not apply: doc is missing path: {op['path']}")
            del parent[last]
            _prune(out, keys[:-1])
            removed.append(keys)
        else:
            raise _invalid(f"unsupported operation {op['op']!r}")
    return out, removed


def _prune(obj: dict, keys: list[str]) -> None:
    """Drop the maps along ``keys`` left empty, deepest first (an object's metadata keeps no
    empty annotations map, and a manager's fields no empty parent)."""
    for depth in range(len(keys), 0, -1):
        node = obj
        for key in keys[:depth - 1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(keys[depth - 1]) == {}:
            del node[keys[depth - 1]]


def disown(obj: dict, paths: list[list[str]]) -> None:
    """Take removed paths out of every manager's fields, as the API server does."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        for keys in paths:
            owned = [f"f:{key}" for key in keys]
            node = entry.get("fieldsV1") or {}
            for key in owned[:-1]:
                node = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict) and owned[-1] in node:
                del node[owned[-1]]
                _prune(entry.get("fieldsV1") or {}, owned[:-1])


def _gates(obj: dict | None) -> list[str]:
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ADMISSION_GATE) or ""
    return [gate.strip() for gate in value.split(",") if gate.strip()]


def admit_gates(old: dict | None, new: dict) -> None:
    """Kueue's rule for its admission gate: any gates at creation, only fewer afterwards."""
    if old is None:
        return
    before, after = _gates(old), _gates(new)
    if after and not before:
        raise PermanentError(f"metadata.annotations[{ADMISSION_GATE}]: Forbidden: cannot add admission gate "
                             "after creation", status=403, reason="Forbidden")
    if any(gate not in before for gate in after):
        raise PermanentError(f"metadata.annotations[{ADMISSION_GATE}]: Forbidden: can only remove gates, not add "
                             "new ones", status=403, reason="Forbidden")
