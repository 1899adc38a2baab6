"""The status watcher's cache: what it keeps of each object it watches (its watch transform,
`slim`) and the indexes of its stores.

Everything enters the watcher's caches through `slim` (each LIST page and each watch event,
before it is remembered), so metadata.managedFields (most of an object) and the pod
templates never stay in memory. Reading another field in an observer means keeping it here;
tests/jobs/test_watcher_transform.py fails otherwise.
"""

import sys

from core.ownership import JOB_LABEL
from workloads import Kind

POD = ("v1", "Pod")
EVENT = ("v1", "Event")

# What it keeps: what the watcher and its observers read (`jobs.status`,
# `workloads.*.observe_*`), nothing more.
# - every kind: metadata name, namespace, resourceVersion (the stream's position, relist
#   diffs), labels (JOB_LABEL), ownerReferences (`_owner_job`, `_owned_by`), plus uid and
#   creation/deletion timestamps (small; what a reader expects of an object);
# - status, whole: batch Job conditions and `ready`, Workload conditions, Volcano Job
#   `state`, PodGroup `phase` and conditions, Deployment `readyReplicas`;
# - of the spec, only what `SPEC_READ` names: a Pod's nodeName and schedulingGates
#   (`observe_inference`); no other kind's spec is read;
# - Events (only ever held by their watch stream, to tell deletions at a relist): name,
#   namespace and resourceVersion of the metadata, type; of a Warning also reason, message
#   and involvedObject's apiVersion, kind, namespace and name (`_record_warning`).
METADATA_KEPT = ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences",
                 "creationTimestamp", "deletionTimestamp")
SPEC_READ: dict[Kind, tuple[str, ...]] = {POD: ("nodeName", "schedulingGates")}
EVENT_METADATA_KEPT = ("name", "namespace", "resourceVersion")
INVOLVED_KEPT = ("apiVersion", "kind", "namespace", "name")


def _compact(value):
    """A copy sharing one string per dict key (interned) across all objects: a watch event
    decodes each object on its own, so otherwise every key is a string of its own."""
    if isinstance(value, dict):
        return {sys.intern(k): _compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def slim(obj: dict) -> dict:
    """What the watcher keeps of one object (see `METADATA_KEPT`); the watch transform."""
    meta = obj.get("metadata") or {}
    kind = (obj.get("apiVersion", ""), obj.get("kind", ""))
    kept = EVENT_METADATA_KEPT if kind == EVENT else METADATA_KEPT
    out = {"apiVersion": kind[0], "kind": kind[1],
           "metadata": {key: _compact(meta[key]) for key in kept if key in meta}}
    if kind == EVENT:
        out["type"] = obj.get("type")
        if obj.get("type") == "Warning":
            about = obj.get("involvedObject") or {}
            out["involvedObject"] = {key: about[key] for key in INVOLVED_KEPT if key in about}
            out.update((key, obj[key]) for key in ("reason", "message") if key in obj)
        return out
    spec = obj.get("spec")
    read = SPEC_READ.get(kind, ())
    if isinstance(spec, dict) and read:
        out["spec"] = {key: _compact(spec[key]) for key in read if key in spec}
    if "status" in obj:
        out["status"] = _compact(obj["status"])
    return out


# The indexes of each kind's store (`cluster.informer.Store`): (namespace, owner name) -> the
# objects it owns, and for the kinds we label, pods included, (namespace, job label) -> the
# job's objects of that kind (its pods; what is left of a job being cancelled).
OWNERS = "owners"
JOBS = "jobs"
UIDS = "uids"  # uid -> the object: a preemptor named by Kueue (`_job_of_uid`)


def owner_keys(obj: dict) -> list[tuple[str, str]]:
    meta = obj.get("metadata") or {}
    return [(meta.get("namespace", ""), owner.get("name", "")) for owner in meta.get("ownerReferences") or []]


def uid_key(obj: dict) -> list[str]:
    uid = (obj.get("metadata") or {}).get("uid")
    return [uid] if uid else []


def job_key(obj: dict) -> list[tuple[str, str]]:
    meta = obj.get("metadata") or {}
    job_id = (meta.get("labels") or {}).get(JOB_LABEL)
    return [] if job_id is None else [(meta.get("namespace", ""), job_id)]
