"""Kueue's admission gates (AdmissionGatedBy, beta and on by default in Kueue v0.19): how the
platform holds a job inside Kueue instead of off the cluster (docs/caps.md, docs/backfill.md).

A job object created with the annotation ``kueue.x-k8s.io/admission-gated-by: <gate>[,<gate>]``
gets a Workload that Kueue does not admit (QuotaReserved=False, reason ``AdmissionGated``,
"Admission is gated by: <gates>") until the gates are gone; Kueue copies the annotation from
the job object onto its Workload, a removal too. Kueue's webhooks take the annotation only when
the object is created; afterwards gates can only be taken away. So:

- the platform renders its gate on a held job's object (`gated`), and the kind's field rules
  keep the annotation as created (`FIELD`, create-only in `cluster.fields`): a later apply never
  adds it back after a release, nor drops it while the job is held;
- a release takes the platform's gates away with one JSON patch of that annotation alone
  (`open_gates`), testing the value it read first: nobody else's gate and no other field is
  touched, and a value that moved on since is read again.

The kinds whose Kueue integration carries the gate to their Workload name the kind of theirs
that carries it (`workloads.kinds.Integration.gated`): batch Jobs, RayJobs, RayClusters,
StatefulSets (notebooks). Kueue keeps a Deployment's gate on the Deployment (its pods are
admitted one by one, each a Workload of its own, and never see it): a held inference server
stays off the cluster, as do jobs on Volcano flavors.
"""

from __future__ import annotations

import copy

from cluster import PermanentError, TransientError

from .base import Observation, Phase

ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
FIELD = f"metadata.annotations[{ANNOTATION}]"
# Kueue's reason (QuotaReserved=False) for a Workload it does not admit because of its gates,
# and the start of its message, "Admission is gated by: <the annotation's value>".
ADMISSION_GATED = "AdmissionGated"
_SAID = "Admission is gated by:"

# The platform's gates, one per reason it holds a job, and what each means in our words.
MEMBER_CAP = "gpuplatform.io/member-cap"
RESERVATION = "gpuplatform.io/reservation"
OURS = {
    MEMBER_CAP: "the submitter is at their per-person cap",
    RESERVATION: "it would delay the job the flavor reserves GPUs for",
}
_ATTEMPTS = 3  # a value that keeps moving under the patch is left to the next reconcile


def parse(value: str | None) -> list[str]:
    """The gates of an annotation's value (comma-separated, as Kueue reads it)."""
    return [gate.strip() for gate in (value or "").split(",") if gate.strip()]


def gates_of(obj: dict | None) -> list[str]:
    return parse((((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION))


def gated(objects: list[dict], kind: tuple[str, str], gates: list[str]) -> list[dict]:
    """``objects`` with ``gates`` on those of ``kind`` (the object Kueue makes the Workload from)."""
    if not gates:
        return objects
    out = []
    for obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) == kind:
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION] = ",".join(gates)
        out.append(obj)
    return out


def opening(obj: dict, ours: list[str]) -> list[dict]:
    """The JSON patch that takes ``ours`` out of the object's gates, keeping anybody else's;
    [] when none of ours is there. It tests the value it was decided on."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    found = parse(value)
    left = [gate for gate in found if gate not in ours]
    if left == found:
        return []
    path = "/metadata/annotations/" + ANNOTATION.replace("~", "~0").replace("/", "~1")
    change = {"op": "replace", "path": path, "value": ",".join(left)} if left else {"op": "remove", "path": path}
    return [{"op": "test", "path": path, "value": value}, change]


def open_gates(cluster, obj: dict, ours: list[str]) -> bool:
    """Take the platform's gates ``ours`` off the live object ``obj`` (Kueue then takes them off
    its Workload and may admit it); whether a patch was sent. An object that moved on since it
    was read (the test fails: 422) is read again and decided on again."""
    meta = obj.get("metadata") or {}
    where = (obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    for _ in range(_ATTEMPTS):
        operations = opening(obj, ours)
        if not operations:
            return False
        try:
            cluster.patch(*where, operations=operations)
            return True
        except PermanentError as err:
            if err.status != 422:
                raise
        obj = cluster.get(*where)
    raise TransientError(f"the admission gate of {where[1]} {where[2]} kept changing while it was opened",
                         status=409, reason="Conflict")  # the task retries, with backoff


def said_gates(message: str) -> list[str]:
    """The gates Kueue names in its AdmissionGated message."""
    return parse(message.partition(_SAID)[2]) if _SAID in message else []


def held(reserved: dict) -> Observation:
    """A Workload Kueue does not admit because of its gates (``reserved``: its QuotaReserved=False
    condition, reason AdmissionGated): held, with the gates named, the platform's in our words."""
    gates = said_gates(reserved.get("message") or "")
    kueue = f"Kueue: {ADMISSION_GATED}, {reserved.get('message') or 'admission is gated'}"
    ours = [OURS[gate] for gate in gates if gate in OURS]
    theirs = [gate for gate in gates if gate not in OURS]
    parts = []
    if ours:
        parts.append(f"Held by the platform: {'; '.join(ours)}. It waits in Kueue's queue, and Kueue admits it "
                     "once the platform lets it go")
    if theirs or not gates:
        parts.append(f"Held by admission gate {', '.join(theirs) or '(unnamed)'}, not the platform's: Kueue admits "
                     "it once the gate is removed")
    return Observation(Phase.QUEUED, ADMISSION_GATED, f"{'. '.join(parts)} ({kueue}).",
                       kueue_reason=ADMISSION_GATED, kueue_message=reserved.get("message") or "")
