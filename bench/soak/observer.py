"""What the cluster did during the soak, recorded from its own watch streams.

One thread per kind watches through the platform's door (``cluster.Cluster.watch``, which
resumes after disconnects and relists after 410, so the API-server restart loses
nothing) and keeps, per object, only what the invariants need: pod UIDs and times per
job, the conditions of Kueue Workloads and Volcano Jobs with the cluster's own transition
times, replica counts of Deployments, queue quotas, and every change of the platform's
field-manager entry in ``managedFields`` (a write by the platform, seen by the server).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from cluster import ClusterError
from workloads.trainer import TRAIN_JOB

JOB_LABEL = "gpuplatform.io/job"
TEAM_LABEL = "gpuplatform.io/team"
OURS = "app.kubernetes.io/managed-by=gpuplatform"
POD = ("v1", "Pod")
BATCH_JOB = ("batch/v1", "Job")
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
DEPLOYMENT = ("apps/v1", "Deployment")
SERVICE = ("v1", "Service")
HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
RAY_JOB = ("ray.io/v1", "RayJob")
RAY_CLUSTER = ("ray.io/v1", "RayCluster")
STATEFULSET = ("apps/v1", "StatefulSet")
# The objects Kueue makes a Workload for, which then names them as its owner.
QUEUED_KINDS = (BATCH_JOB, TRAIN_JOB, RAY_JOB, RAY_CLUSTER, STATEFULSET)
WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")
CLUSTER_QUEUE = ("kueue.x-k8s.io/v1beta2", "ClusterQueue")
VOLCANO_QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
# Kinds whose every platform write after creation is a fight: a job's rendering never changes.
JOB_OBJECT_KINDS = (BATCH_JOB, TRAIN_JOB, VOLCANO_JOB, DEPLOYMENT, SERVICE, HPA, RAY_JOB, RAY_CLUSTER, STATEFULSET)
WATCHED = [(kind, OURS) for kind in (POD, *JOB_OBJECT_KINDS, CLUSTER_QUEUE, VOLCANO_QUEUE)] + [(WORKLOAD, None)]


def ts(value: str | None) -> float | None:
    """A Kubernetes timestamp (RFC 3339, whole seconds) as epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def conditions(obj: dict) -> dict[str, tuple[str, str, float | None]]:
    """type -> (status, reason, lastTransitionTime)."""
    return {c["type"]: (c.get("status", ""), c.get("reason", ""), ts(c.get("lastTransitionTime")))
            for c in (obj.get("status") or {}).get("conditions") or []}


@dataclass
class PodInfo:
    job: int
    name: str
    created: float | None
    first_seen: float
    started: float | None = None
    ready: float | None = None
    node: str = ""
    gone: float | None = None
    phase: str = ""


@dataclass
class ObjectInfo:
    """One of the platform's objects (or a Workload) across its life."""

    kind: tuple
    name: str
    namespace: str
    job: int | None
    first_seen: float
    team: str | None = None
    owners: list = field(default_factory=list)           # owner UIDs (Workloads)
    created: float | None = None
    gone: float | None = None
    deletion: float | None = None                          # metadata.deletionTimestamp
    history: list = field(default_factory=list)           # (observed, summary) when the summary changed
    platform_sig: tuple | None = None                    # (times, field paths) of its entry
    platform_writes: list = field(default_factory=list)   # (observed, what changed)


class Observer:
    def __init__(self, cluster, field_manager: str):
        self.cluster = cluster
        self.field_manager = field_manager
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.pods: dict[str, PodInfo] = {}
        self.objects: dict[str, ObjectInfo] = {}          # uid -> info
        self.job_of_uid: dict[str, int] = {}              # batch Job and Pod UIDs -> job id
        self.interruptions: dict[str, int] = defaultdict(int)
        # ClusterQueue name -> (when seen, its stopPolicy) at each change: when a drain's hold
        # reached the cluster (docs/drain.md).
        self.stop_policies: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self.streams: list = []
        self.threads: list[threading.Thread] = []

    # --- running --------------------------------------------------------------------------
    def start(self) -> None:
        for kind, selector in WATCHED:
            thread = threading.Thread(target=self._watch, args=(kind, selector), daemon=True,
                                      name=f"soak-watch-{kind[1].lower()}")
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        self.stop_event.set()
        for stream in list(self.streams):
            stream.stop()
        for thread in self.threads:
            thread.join(timeout=10)

    def _watch(self, kind, selector) -> None:
        stream = None
        while not self.stop_event.is_set():
            if stream is None or stream.stopped:
                version = stream.resource_version if stream else None
                stream = self.cluster.watch(*kind, label_selector=selector, resource_version=version)
                self.streams.append(stream)
            try:
                for event, obj in stream:
                    self.record(kind, event, obj)
            except ClusterError:
                with self.lock:
                    self.interruptions[kind[1]] += 1
            except Exception:  # noqa: BLE001 - a surprise in one object must not blind the soak
                import traceback

                traceback.print_exc()
            self.stop_event.wait(1)

    # --- recording ------------------------------------------------------------------------
    def record(self, kind, event: str, obj: dict, now: float | None = None) -> None:
        now = now or time.time()
        meta = obj.get("metadata") or {}
        uid = meta.get("uid", "")
        label = (meta.get("labels") or {}).get(JOB_LABEL)
        job = int(label) if label and label.isdigit() else None
        with self.lock:
            if kind == POD:
                self._pod(uid, job, meta, obj, event, now)
                return
            info = self.objects.get(uid)
            if info is None:
                info = self.objects[uid] = ObjectInfo(
                    kind=kind, name=meta.get("name", ""), namespace=meta.get("namespace", ""), job=job,
                    first_seen=now, team=(meta.get("labels") or {}).get(TEAM_LABEL),
                    created=ts(meta.get("creationTimestamp")),
                    owners=[o.get("uid") for o in meta.get("ownerReferences") or []],
                )
                if kind in QUEUED_KINDS and job is not None:
                    self.job_of_uid[uid] = job
            if meta.get("deletionTimestamp"):
                info.deletion = info.deletion or ts(meta["deletionTimestamp"])
            if event == "DELETED":
                info.gone = info.gone or now
            if kind == CLUSTER_QUEUE:
                policy, seen = (obj.get("spec") or {}).get("stopPolicy", "None"), self.stop_policies[info.name]
                if not seen or seen[-1][1] != policy:
                    seen.append((now, policy))
            summary = self._summary(kind, obj)
            if summary is not None and (not info.history or info.history[-1][1] != summary):
                info.history.append((now, summary))
            if kind in JOB_OBJECT_KINDS or kind in (CLUSTER_QUEUE, VOLCANO_QUEUE):
                self._platform_write(info, meta, now, event)

    def _pod(self, uid, job, meta, obj, event, now) -> None:
        if job is None:
            return
        info = self.pods.get(uid)
        if info is None:
            info = self.pods[uid] = PodInfo(job=job, name=meta.get("name", ""),
                                            created=ts(meta.get("creationTimestamp")), first_seen=now)
            self.job_of_uid[uid] = job
        status = obj.get("status") or {}
        info.started = info.started or ts(status.get("startTime"))
        ready = conditions(obj).get("Ready")
        if ready and ready[0] == "True":
            info.ready = info.ready or ready[2]
        info.node = (obj.get("spec") or {}).get("nodeName") or info.node
        info.phase = status.get("phase", info.phase)
        if event == "DELETED" or meta.get("deletionTimestamp"):
            info.gone = info.gone or ts(meta.get("deletionTimestamp")) or now

    @staticmethod
    def _summary(kind, obj: dict):
        """The part of an object the invariants read, as a comparable value."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if kind in (WORKLOAD, BATCH_JOB, TRAIN_JOB):
            extra = (spec.get("suspend"),) if kind != WORKLOAD else ()
            return (tuple(sorted(conditions(obj).items())), *extra)
        if kind == VOLCANO_JOB:
            phases = tuple((c.get("status"), ts(c.get("lastTransitionTime"))) for c in status.get("conditions") or [])
            state = status.get("state") or {}
            return (state.get("phase"), ts(state.get("lastTransitionTime")), status.get("retryCount", 0), phases)
        if kind == DEPLOYMENT:
            return (spec.get("replicas"), status.get("readyReplicas", 0))
        if kind == CLUSTER_QUEUE:
            quota = [(f"{f['name']}/{r['name']}", r.get("nominalQuota")) for g in spec.get("resourceGroups") or []
                     for f in g.get("flavors") or [] for r in f.get("resources") or []]
            borrowed = [(r["name"], r.get("borrowed", "0")) for f in status.get("flavorsReservation") or []
                        for r in f.get("resources") or []]
            return (tuple(quota), tuple(borrowed))
        if kind == VOLCANO_QUEUE:
            return (tuple(sorted((spec.get("capability") or {}).items())),
                    tuple(sorted((spec.get("deserved") or {}).items())))
        return None

    def _platform_write(self, info: ObjectInfo, meta: dict, now: float, event: str) -> None:
        """A write by the platform (apply) shows in its own managedFields entry: the entry's
        time moves, or fields come back into it. Another manager taking a field away (Kueue
        unsuspending, an HPA scaling) only shrinks the entry and keeps its time."""
        entries = [m for m in meta.get("managedFields") or []
                   if m.get("manager") == self.field_manager and not m.get("subresource")]
        if not entries or event == "DELETED":
            return
        times = tuple(sorted(str(m.get("time")) for m in entries))
        paths = set().union(*(_leaf_paths(m.get("fieldsV1") or {}) for m in entries))
        if info.platform_sig is not None:
            before_times, before_paths = info.platform_sig
            regained = paths - before_paths
            if times != before_times or regained:
                what = ", ".join(sorted(regained)[:3]) or "values of owned fields"
                info.platform_writes.append((now, what))
        info.platform_sig = (times, paths)

    # --- reading --------------------------------------------------------------------------
    def job_objects(self, kind) -> dict[int, list[ObjectInfo]]:
        found = defaultdict(list)
        for info in self.objects.values():
            if info.kind == kind:
                job = info.job if info.job is not None else self._owner_job(info)
                if job is not None:
                    found[job].append(info)
        return found

    def _owner_job(self, info: ObjectInfo) -> int | None:
        for owner in info.owners:
            if owner in self.job_of_uid:
                return self.job_of_uid[owner]
        return None

    def pods_by_job(self) -> dict[int, list[PodInfo]]:
        found = defaultdict(list)
        for pod in self.pods.values():
            found[pod.job].append(pod)
        return found

    def of_kind(self, kind) -> list[ObjectInfo]:
        return [info for info in self.objects.values() if info.kind == kind]


def _leaf_paths(fields: dict, prefix: str = "") -> set[str]:
    """``{"f:spec": {"f:suspend": {}}}`` -> ``{"spec.suspend"}``."""
    out = set()
    for key, inner in fields.items():
        if key == ".":
            continue
        path = f"{prefix}.{key.split(':', 1)[-1]}" if prefix else key.split(":", 1)[-1]
        out |= _leaf_paths(inner, path) if isinstance(inner, dict) and inner else {path}
    return out
