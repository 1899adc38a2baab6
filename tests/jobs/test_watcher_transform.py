"""The watcher keeps only what it reads (`jobs.watch.watcher.slim`, its watch transform).

Each scenario feeds full objects (managedFields, pod templates, annotations, as the API
server sends them) to a watcher's cache and observes the job; every field the watcher and
its observers touch is recorded. The same objects passed through `slim` must give the same
observation, and every field that was read must still be there: reading a new field in an
observer without keeping it in `slim` fails here, whatever the scenario's outcome.
"""

import copy

import pytest

from cluster.fake import FakeCluster
from cluster.watch import WatchStream
from jobs.manifests import object_name
from jobs.models import Job
from jobs.watch.watcher import EVENT, POD, StatusWatcher, slim
from quotas.models import Scheduler
from workloads.kueue import BATCH_JOB, WORKLOAD
from workloads.serving import DEPLOYMENT
from workloads.volcano import JOB as VCJOB
from workloads.volcano import PODGROUP

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db

OURS = {"app.kubernetes.io/managed-by": "gpuplatform"}


# --- recording what is read ---------------------------------------------------------------------
class Tracked(dict):
    """A dict that notes the path of every key read (through get, [], in, iteration)."""

    def __init__(self, value: dict, path: tuple, reads: set):
        super().__init__(value)
        self._path, self._reads = path, reads

    def _wrap(self, key, value):
        return track(value, self._path + (key,), self._reads)

    def __getitem__(self, key):
        self._reads.add(self._path + (key,))
        return self._wrap(key, super().__getitem__(key))

    def get(self, key, default=None):
        self._reads.add(self._path + (key,))
        return self._wrap(key, super().get(key)) if key in self.keys() else default

    def __contains__(self, key):
        self._reads.add(self._path + (key,))
        return super().__contains__(key)

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]


class TrackedList(list):
    def __init__(self, value: list, path: tuple, reads: set):
        super().__init__(value)
        self._path, self._reads = path, reads

    def __iter__(self):
        return (track(v, self._path + ("[]",), self._reads) for v in super().__iter__())


def track(value, path, reads):
    if isinstance(value, dict) and not isinstance(value, Tracked):
        return Tracked(value, path, reads)
    if isinstance(value, list) and not isinstance(value, TrackedList):
        return TrackedList(value, path, reads)
    return value


def present(obj, path: tuple) -> bool:
    """Whether `path` ("[]": every element of a list) is in `obj`."""
    if not path:
        return True
    head, rest = path[0], path[1:]
    if head == "[]":
        return isinstance(obj, list) and all(present(v, rest) for v in obj)
    return isinstance(obj, dict) and head in obj and present(obj[head], rest)


# --- full objects, as the API server sends them -----------------------------------------------
def managed_fields(obj: dict) -> list[dict]:
    return [{"apiVersion": obj["apiVersion"], "fieldsType": "FieldsV1", "manager": manager, "operation": "Update",
             "time": "2026-12-01T14:00:00Z",
             "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in obj["metadata"].get("labels", {})}},
                          "f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"main"}': {
                              ".": {}, "f:image": {}, "f:env": {}, "f:resources": {}}}}}}}}
            for manager in ("gpuplatform", "kube-controller-manager", "kueue")]


POD_SPEC = {
    "containers": [{"name": "main", "image": "registry.example/train:1",
                    "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(10)],
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}}],
    "restartPolicy": "Never", "serviceAccountName": "workload",
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
}


def full(obj: dict) -> dict:
    """`obj` with what the watcher never reads added: managedFields, annotations, finalizers,
    generation, a pod template, other spec fields."""
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("uid", f"uid-{meta['name']}")
    meta.setdefault("resourceVersion", "1")
    meta.update(generation=3, creationTimestamp="2026-12-01T14:00:00Z", finalizers=["batch.kubernetes.io/job-tracking"],
                annotations={"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 500 + "}"},
                managedFields=managed_fields(obj))
    spec = obj.setdefault("spec", {})
    if obj["kind"] == "Pod":
        spec.update(copy.deepcopy(POD_SPEC))
    elif obj["kind"] != "Event":
        spec.update(suspend=True, parallelism=2, completions=2, queueName="q", minAvailable=2,
                    template={"metadata": {"labels": dict(OURS)}, "spec": copy.deepcopy(POD_SPEC)})
    return obj


def cond(kind, status="True", reason="", message=""):
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-01T14:00:00Z", "observedGeneration": 2}


def labelled(job) -> dict:
    return {**OURS, "gpuplatform.io/job": str(job.pk), "gpuplatform.io/team": job.team.slug}


def owned_by(job, kind: str, api_version: str) -> list[dict]:
    return [{"apiVersion": api_version, "kind": kind, "name": object_name(job), "uid": "owner-uid",
             "controller": True, "blockOwnerDeletion": True}]


def batch_job(job, *conditions, ready=0) -> tuple:
    return BATCH_JOB, {"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": object_name(job), "namespace": job.team.namespace_name,
                                    "labels": labelled(job)},
                       "status": {"conditions": list(conditions), "ready": ready, "terminating": 0}}


def workload(job, *conditions) -> tuple:
    return WORKLOAD, {"apiVersion": WORKLOAD[0], "kind": "Workload",
                      "metadata": {"name": f"job-{object_name(job)}-abcde", "namespace": job.team.namespace_name,
                                   "ownerReferences": owned_by(job, "Job", "batch/v1")},
                      "status": {"conditions": list(conditions),
                                 "resourceRequests": [{"name": "main", "resources": {"cpu": "4"}}]}}


def vcjob(job, phase, **state) -> tuple:
    return VCJOB, {"apiVersion": VCJOB[0], "kind": "Job",
                   "metadata": {"name": object_name(job), "namespace": job.team.namespace_name, "labels": labelled(job)},
                   "status": {"state": {"phase": phase, **state}, "minAvailable": 2}}


def podgroup(job, phase, *conditions) -> tuple:
    return PODGROUP, {"apiVersion": PODGROUP[0], "kind": "PodGroup",
                      "metadata": {"name": f"{object_name(job)}-uid", "namespace": job.team.namespace_name,
                                   "ownerReferences": owned_by(job, "Job", VCJOB[0])},
                      "status": {"phase": phase, "conditions": list(conditions)}}


def deployment(job, ready=0) -> tuple:
    return DEPLOYMENT, {"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": object_name(job), "namespace": job.team.namespace_name,
                                     "labels": labelled(job)},
                        "status": {"readyReplicas": ready, "replicas": 1}}


def pod(job, index=0, *, gated=False, node=None) -> tuple:
    spec = {}
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    if node:
        spec["nodeName"] = node
    return POD, {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{object_name(job)}-{index}-abcde", "namespace": job.team.namespace_name,
                              "labels": labelled(job)},
                 "spec": spec, "status": {"phase": "Pending"}}


def warning(job, about_kind, about_name, reason="FailedScheduling", message="0/9 nodes are available") -> tuple:
    return EVENT, {"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": reason, "message": message,
                   "metadata": {"name": f"{about_name}.{reason}", "namespace": job.team.namespace_name},
                   "involvedObject": {"apiVersion": "v1" if about_kind == "Pod" else "batch/v1", "kind": about_kind,
                                      "namespace": job.team.namespace_name, "name": about_name, "uid": "u",
                                      "resourceVersion": "7"},
                   "count": 3, "source": {"component": "default-scheduler"}, "firstTimestamp": "2026-12-01T14:00:00Z"}


def normal(job) -> tuple:
    return EVENT, {"apiVersion": "v1", "kind": "Event", "type": "Normal", "reason": "CreatedWorkload",
                   "message": "Created Workload", "metadata": {"name": "n1", "namespace": job.team.namespace_name},
                   "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "namespace": job.team.namespace_name,
                                      "name": object_name(job)}}


OVER = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (32) > maximum capacity (16)")
MORE = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"

# (name, scheduler, job kind, objects of the job: functions of the job)
SCENARIOS = [
    ("kueue pending", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j, cond("Suspended", reason="JobSuspended")), workload(j), normal(j)]),
    ("kueue over capacity, with a warning", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j), workload(j, cond("QuotaReserved", "False", "Pending", OVER)),
                warning(j, "Job", object_name(j), "Suspended", "quota")]),
    ("kueue waiting for quota", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j), workload(j, cond("QuotaReserved", "False", "Pending", MORE))]),
    ("kueue admitted, a pod warned about", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [warning(j, "Pod", f"{object_name(j)}-0-abcde"), batch_job(j, ready=1),
                workload(j, cond("QuotaReserved"), cond("Admitted")), pod(j, 0)]),
    ("kueue running", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j, ready=2), workload(j, cond("Admitted"))]),
    ("kueue preempted", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j), workload(j, cond("Evicted", reason="Preempted"),
                                       cond("Preempted", reason="InCohortReclamation",
                                            message="due to reclamation within the cohort"))]),
    ("kueue max runtime", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j), workload(j, cond("Evicted", reason="DeactivatedDueToMaximumExecutionTimeExceeded"))]),
    ("kueue deactivated", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j), workload(j, cond("Evicted", reason="DeactivatedDueToRequeuingLimitExceeded",
                                               message="requeued too often"))]),
    ("kueue finished", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j), workload(j, cond("Finished", reason="Failed", message="boom"))]),
    ("kueue complete", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j, cond("Complete")), workload(j, cond("Admitted"))]),
    ("kueue failed", Scheduler.KUEUE, Job.Kind.TRAINING,
     lambda j: [batch_job(j, cond("Failed", reason="BackoffLimitExceeded", message="backoff limit")),
                workload(j, cond("Admitted"))]),
    ("volcano pending gang", Scheduler.VOLCANO, Job.Kind.TRAINING,
     lambda j: [vcjob(j, "Pending"), podgroup(j, "Pending", cond("Unschedulable", message="0/6 nodes"))]),
    ("volcano inqueue", Scheduler.VOLCANO, Job.Kind.TRAINING,
     lambda j: [vcjob(j, "Pending"), podgroup(j, "Inqueue")]),
    ("volcano podgroup running", Scheduler.VOLCANO, Job.Kind.TRAINING,
     lambda j: [vcjob(j, "Pending"), podgroup(j, "Running")]),
    ("volcano aborted", Scheduler.VOLCANO, Job.Kind.TRAINING,
     lambda j: [vcjob(j, "Aborted", reason="Killed", message="killed by the user"), podgroup(j, "Pending")]),
    ("inference gated", Scheduler.KUEUE, Job.Kind.INFERENCE,
     lambda j: [deployment(j), pod(j, 0, gated=True), warning(j, "Deployment", object_name(j), "Gated", "gated")]),
    ("inference starting", Scheduler.KUEUE, Job.Kind.INFERENCE,
     lambda j: [deployment(j), pod(j, 0, node="h100-0"), pod(j, 1, node="h100-1")]),
    ("inference serving", Scheduler.KUEUE, Job.Kind.INFERENCE,
     lambda j: [deployment(j, ready=1), pod(j, 0, node="h100-0")]),
]


def make(scheduler, kind):
    flavor = make_flavor("h100" if scheduler == Scheduler.KUEUE else "a100", scheduler=scheduler)
    from ..builders import make_team

    team = make_team("vision")
    make_quota(team, flavor)
    if kind == Job.Kind.INFERENCE:
        return make_job(team, flavor, kind=kind, port=8000, min_replicas=1, max_replicas=2, workers=1)
    return make_job(team, flavor, workers=2)


def observed(job, objects, reads: set | None = None):
    watcher = StatusWatcher(cluster=None)
    for kind, obj in objects:
        watcher._record(kind, "ADDED", obj)
    for kind, obj in objects:  # the order of arrival must not matter: again, as MODIFIED
        watcher._record(kind, "MODIFIED", obj)
    seen = watcher.observe(job)
    return None if seen is None else (seen.state, seen.reason, seen.message)


@pytest.mark.parametrize("name, scheduler, kind, build", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_the_transform_keeps_every_field_the_watcher_reads(name, scheduler, kind, build):
    job = make(scheduler, kind)
    objects = [(k, full(obj)) for k, obj in build(job)]
    reads: dict[int, set] = {}
    tracked = []
    for i, (k, obj) in enumerate(objects):
        reads[i] = set()
        tracked.append((k, track(obj, (), reads[i])))
    expected = observed(job, tracked)
    assert expected is not None
    slimmed = [(k, slim(obj)) for k, obj in objects]
    assert observed(job, slimmed) == expected
    for i, (k, obj) in enumerate(objects):
        for path in reads[i]:
            if present(obj, path):
                assert present(slimmed[i][1], path), f"{name}: {k[1]} field {'.'.join(path)} is read but not kept"
    assert any(reads.values())


@pytest.mark.parametrize("name, scheduler, kind, build", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_the_transform_drops_what_is_never_read(name, scheduler, kind, build):
    job = make(scheduler, kind)
    for k, obj in build(job):
        kept = slim(full(obj))
        assert "managedFields" not in kept["metadata"]
        assert "annotations" not in kept["metadata"] and "finalizers" not in kept["metadata"]
        assert "template" not in kept.get("spec", {})
        assert set(kept.get("spec", {})) <= {"nodeName", "schedulingGates"}
        if k == EVENT:
            assert set(kept) <= {"apiVersion", "kind", "metadata", "type", "reason", "message", "involvedObject"}
            assert set(kept.get("involvedObject", {})) <= {"apiVersion", "kind", "namespace", "name"}
            if kept["type"] != "Warning":
                assert "message" not in kept and "involvedObject" not in kept
        assert slim(kept) == kept  # idempotent
        assert len(repr(kept)) < len(repr(full(obj))) / 2


def test_a_detector_for_dropped_fields_would_notice(team, flavor):
    """The check above is not vacuous: a transform that dropped status is caught."""
    job = make_job(team, flavor, workers=2)
    k, obj = batch_job(job, ready=2)
    reads: set = set()
    observed(job, [(k, track(full(obj), (), reads)), workload(job, cond("Admitted"))])
    assert ("status", "ready") in reads
    broken = {key: value for key, value in slim(full(obj)).items() if key != "status"}
    assert not present(broken, ("status", "ready"))


def test_the_watch_applies_the_transform_to_listed_and_watched_objects():
    fake = FakeCluster()
    fake.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns",
                                                                    "managedFields": [{"manager": "x"}]}})
    seen = []

    def transform(obj):
        seen.append(obj["metadata"]["name"])
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}

    stream = fake.watch("v1", "ConfigMap", transform=transform)
    [(event, obj)] = list(stream)
    assert event == "ADDED" and "managedFields" not in obj["metadata"]
    fake.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "ns",
                                                                    "managedFields": [{"manager": "x"}]}})
    later = fake.watch("v1", "ConfigMap", resource_version=stream.resource_version, transform=transform)
    [(event, obj)] = list(later)
    assert (event, obj["metadata"]["name"]) == ("ADDED", "b") and "managedFields" not in obj["metadata"]
    assert seen == ["a", "b"]
    assert all("managedFields" not in o["metadata"] for o in later._known.values())


def test_watch_stream_transforms_events_before_remembering_them():
    events = [{"type": "ADDED", "object": {"metadata": {"name": "x", "resourceVersion": "5", "big": "y" * 100}}}]

    class Source(list):
        def close(self):
            pass

    stream = WatchStream(lister=lambda: ([], "1"), opener=lambda version, seconds: Source(events),
                         resource_version="1", transform=lambda o: {"metadata": {
                             k: v for k, v in o["metadata"].items() if k != "big"}})
    got = []
    for event in stream:
        got.append(event)
        stream.stop()
    assert got == [("ADDED", {"metadata": {"name": "x", "resourceVersion": "5"}})]
    assert stream.resource_version == "5"
    assert stream._known[("", "x")] == {"metadata": {"name": "x", "resourceVersion": "5"}}


def test_the_real_clients_list_transforms_page_by_page(monkeypatch):
    from cluster.client import Cluster

    pages = {None: {"items": [{"metadata": {"name": "a", "managedFields": [1]}}], "metadata": {"continue": "t"}},
             "t": {"items": [{"metadata": {"name": "b", "managedFields": [1]}}], "metadata": {"resourceVersion": "9"}}}
    door = Cluster.__new__(Cluster)
    calls = []
    monkeypatch.setattr(door, "_path", lambda *a, **k: "/api/v1/configmaps", raising=False)

    def request(method, path, **params):
        calls.append(params["_continue"])
        return copy.deepcopy(pages[params["_continue"]])

    monkeypatch.setattr(door, "_request", request, raising=False)
    held = []

    def transform(obj):
        held.append(len(calls))  # transformed as its page arrived, before the next was asked for
        return {"metadata": {"name": obj["metadata"]["name"]}, "kind": obj["kind"]}

    items, version = door._list_pages("v1", "ConfigMap", None, None, None, transform)
    assert items == [{"metadata": {"name": "a"}, "kind": "ConfigMap"}, {"metadata": {"name": "b"}, "kind": "ConfigMap"}]
    assert version == "9" and held == [1, 2]


def test_the_indexes_follow_changes_and_deletions(team, flavor):
    job = make_job(team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=2, workers=1)
    watcher = StatusWatcher(cluster=None)
    _, p0 = pod(job, 0, gated=True)
    _, p1 = pod(job, 1, node="n1")
    watcher._record(POD, "ADDED", slim(full(p0)))
    watcher._record(POD, "ADDED", slim(full(p1)))
    ns = job.team.namespace_name
    assert [p["metadata"]["name"] for p in watcher._pods_of(ns, job.pk)] == [p0["metadata"]["name"],
                                                                           p1["metadata"]["name"]]
    watcher._record(POD, "DELETED", slim(full(p0)))
    assert [p["metadata"]["name"] for p in watcher._pods_of(ns, job.pk)] == [p1["metadata"]["name"]]
    moved = copy.deepcopy(p1)
    moved["metadata"]["labels"]["gpuplatform.io/job"] = "0"
    watcher._record(POD, "MODIFIED", slim(full(moved)))
    assert watcher._pods_of(ns, job.pk) == [] and not watcher._job_pods.get((ns, str(job.pk)))

    _, wl = workload(job, cond("Admitted"))
    watcher._record(WORKLOAD, "ADDED", slim(full(wl)))
    assert watcher._owned_by(WORKLOAD, ns, object_name(job))["metadata"]["name"] == wl["metadata"]["name"]
    orphan = copy.deepcopy(wl)
    orphan["metadata"]["ownerReferences"] = []
    watcher._record(WORKLOAD, "MODIFIED", slim(full(orphan)))
    assert watcher._owned_by(WORKLOAD, ns, object_name(job)) is None
    watcher._record(WORKLOAD, "MODIFIED", slim(full(wl)))
    watcher._record(WORKLOAD, "DELETED", slim(full(wl)))
    assert watcher._owned_by(WORKLOAD, ns, object_name(job)) is None and not watcher._owners[WORKLOAD]
