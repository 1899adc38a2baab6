"""The door against the real local control plane (deploy/local-cluster): apply, no-op
detection counted at the HTTP level, prune, error mapping and watch resume.

Each test works in its own namespace, removed afterwards.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from cluster import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    Action,
    NotFound,
    ObjectRef,
    PermanentError,
    UnknownKind,
)
from cluster.client import Cluster

pytestmark = pytest.mark.cluster

MANAGED = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
WRITES = ("POST", "PUT", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def door(kube_cluster):
    cluster = Cluster(kubeconfig=kube_cluster, field_manager="gpuplatform-door-test")
    yield cluster
    cluster.close()


@pytest.fixture
def ns(door):
    name = f"door-{uuid.uuid4().hex[:8]}"
    yield name
    door.delete("v1", "Namespace", name)


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(MANAGED)}}


def config_map(ns, name="settings", data=None, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": dict(MANAGED) if labels is None else labels},
        "data": {"mode": "train"} if data is None else data,
    }


def service_account(ns):
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "workloads", "namespace": ns, "labels": dict(MANAGED)},
        "automountServiceAccountToken": False,
    }


def writes(door):
    return {verb: door.requests[verb] for verb in WRITES if door.requests[verb]}


def test_applying_new_objects_creates_them_namespace_first(door, ns):
    results = door.apply([config_map(ns), service_account(ns), namespace(ns)])
    assert [(r.ref.kind, r.action) for r in results] == [
        ("Namespace", Action.CREATED), ("ConfigMap", Action.CREATED), ("ServiceAccount", Action.CREATED),
    ]
    assert door.get("v1", "ConfigMap", "settings", ns)["data"] == {"mode": "train"}
    assert door.get("v1", "ServiceAccount", "workloads", ns)["automountServiceAccountToken"] is False


def test_applying_the_same_objects_again_reports_unchanged_and_writes_nothing(door, ns):
    desired = [namespace(ns), config_map(ns), service_account(ns)]
    door.apply(desired)
    door.reset_counts()
    results = door.apply(desired)
    assert {r.action for r in results} == {Action.UNCHANGED}
    assert writes(door) == {}
    assert door.requests["GET"] == len(desired)


def test_changing_one_field_patches_only_that_object(door, ns):
    door.apply([namespace(ns), config_map(ns), service_account(ns)])
    door.reset_counts()
    results = door.apply([namespace(ns), config_map(ns, data={"mode": "serve"}), service_account(ns)])
    assert [r.action for r in results] == [Action.UNCHANGED, Action.CHANGED, Action.UNCHANGED]
    assert writes(door) == {"PATCH": 1}
    assert door.get("v1", "ConfigMap", "settings", ns)["data"] == {"mode": "serve"}


def test_a_field_no_longer_rendered_is_removed_by_the_next_apply(door, ns):
    door.apply([namespace(ns), config_map(ns, data={"mode": "train", "old": "x"})])
    [_, result] = door.apply([namespace(ns), config_map(ns, data={"mode": "train"})])
    assert result.action is Action.CHANGED
    assert door.get("v1", "ConfigMap", "settings", ns)["data"] == {"mode": "train"}


def test_a_hand_edit_is_undone_by_the_next_apply(door, ns, api_client):
    from kubernetes import client

    door.apply([namespace(ns), config_map(ns)])
    client.CoreV1Api(api_client).patch_namespaced_config_map("settings", ns, {"data": {"mode": "hacked"}})
    [_, result] = door.apply([namespace(ns), config_map(ns)])
    assert result.action is Action.CHANGED
    assert door.get("v1", "ConfigMap", "settings", ns)["data"] == {"mode": "train"}


def test_prune_deletes_our_stale_object_and_never_an_unlabelled_one(door, ns):
    team = {"gpuplatform.io/team": ns}
    keep = config_map(ns, "keep", labels={**MANAGED, **team})
    stale = config_map(ns, "stale", labels={**MANAGED, **team})
    hand_made = config_map(ns, "hand-made", labels=team)
    door.apply([namespace(ns), keep, stale, hand_made])
    selector = f"gpuplatform.io/team={ns}"
    door.reset_counts()
    deleted = door.prune(selector, [namespace(ns), keep], [("v1", "ConfigMap")])
    assert deleted == [ObjectRef("v1", "ConfigMap", ns, "stale")]
    assert writes(door) == {"DELETE": 1}
    left = {o["metadata"]["name"] for o in door.list("v1", "ConfigMap", namespace=ns, label_selector=selector)}
    assert left == {"keep", "hand-made"}
    door.reset_counts()
    assert door.prune(selector, [namespace(ns), keep], [("v1", "ConfigMap")]) == []
    assert writes(door) == {}


def test_an_invalid_name_is_a_permanent_error_with_the_servers_message(door, ns):
    door.apply([namespace(ns)])
    with pytest.raises(PermanentError) as raised:
        door.apply([config_map(ns, name="Not_A_Name")])
    error = raised.value
    assert error.status == 422
    assert 'ConfigMap "Not_A_Name" is invalid' in error.message
    assert [cause.field for cause in error.causes] == ["metadata.name"]


def test_a_field_the_schema_lacks_is_rejected_permanently(door, ns):
    door.apply([namespace(ns)])
    bad = config_map(ns)
    bad["spec"] = {"replicas": 1}
    with pytest.raises(PermanentError, match="spec"):
        door.apply([bad])


def test_an_unknown_kind_and_a_missing_object_are_permanent(door, ns):
    with pytest.raises(UnknownKind):
        door.list("example.invalid/v1", "Nothing")
    with pytest.raises(NotFound):
        door.get("v1", "ConfigMap", "absent", "default")
    assert door.delete("v1", "ConfigMap", "absent", "default") is False


def test_kueue_objects_are_applied_cluster_scoped_first_and_are_then_unchanged(door):
    suffix = uuid.uuid4().hex[:6]
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": f"door-{suffix}", "labels": dict(MANAGED)}}
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": f"door-{suffix}", "labels": dict(MANAGED)},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": f"door-{suffix}", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}],
            }],
        },
    }
    try:
        created = door.apply([queue, flavor])
        assert [r.ref.kind for r in created] == ["ResourceFlavor", "ClusterQueue"]
        door.reset_counts()
        assert {r.action for r in door.apply([queue, flavor])} == {Action.UNCHANGED}
        assert writes(door) == {}
    finally:
        door.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"door-{suffix}")
        door.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", f"door-{suffix}")


def test_a_new_cluster_counts_its_discovery_requests(kube_cluster):
    fresh = Cluster(kubeconfig=kube_cluster)
    try:
        fresh.get("v1", "Namespace", "default")
        assert fresh.requests["GET"] > 1  # /version, /api/v1 ... and the object itself
    finally:
        fresh.close()


def test_watch_sees_added_modified_deleted_and_resumes_after_the_connection_is_cut(door, ns):
    [created] = door.apply([namespace(ns)])
    selector = "door-test=watch"
    labels = {**MANAGED, "door-test": "watch"}
    stream = door.watch("v1", "ConfigMap", namespace=ns, label_selector=selector,
                        resource_version=created.object["metadata"]["resourceVersion"], timeout=60)
    door.apply([config_map(ns, labels=labels)])
    door.reset_counts()
    seen = []
    for kind, obj in stream:
        seen.append((kind, obj["metadata"]["name"], (obj.get("data") or {}).get("mode")))
        if kind == "ADDED":
            stream._drop_connection()  # a network cut; the change below happens while away
            door.apply([namespace(ns), config_map(ns, data={"mode": "serve"}, labels=labels)])
        elif kind == "MODIFIED":
            door.delete("v1", "ConfigMap", "settings", ns)
        else:
            stream.stop()
    assert seen == [("ADDED", "settings", "train"), ("MODIFIED", "settings", "serve"), ("DELETED", "settings", "serve")]
    assert door.requests["WATCH"] == 2  # the first request, and one resume after the cut
    assert stream.relists == 0


def test_stop_from_another_thread_ends_a_quiet_watch(door, ns):
    door.apply([namespace(ns)])
    stream = door.watch("v1", "ConfigMap", namespace=ns, label_selector="door-test=nothing")
    stopper = threading.Timer(0.5, stream.stop)
    stopper.start()
    done = threading.Event()

    def consume():
        list(stream)
        done.set()

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    assert done.wait(30), "stop() did not end the watch"
    stopper.cancel()


def test_a_watch_timeout_ends_the_iteration(door, ns):
    door.apply([namespace(ns)])
    stream = door.watch("v1", "ConfigMap", namespace=ns, label_selector="door-test=nothing", timeout=2)
    assert list(stream) == []
    assert door.requests["WATCH"] >= 1


def test_a_field_selector_leaves_normal_events_on_the_server(door, ns, api_client):
    """What the status watcher asks for: Warnings only, in a LIST and in a watch."""
    from kubernetes import client

    door.apply([namespace(ns)])
    core = client.CoreV1Api(api_client)

    def event(name, kind):
        core.create_namespaced_event(ns, {
            "metadata": {"name": name}, "type": kind, "reason": "Test", "message": name,
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "p"}})

    event("before-normal", "Normal")
    event("before-warning", "Warning")
    listed = door.list("v1", "Event", namespace=ns, field_selector="type=Warning")
    assert [e["metadata"]["name"] for e in listed] == ["before-warning"]
    stream = door.watch("v1", "Event", namespace=ns, field_selector="type=Warning", timeout=30)
    seen = []
    for kind, obj in stream:
        seen.append((kind, obj["metadata"]["name"]))
        if obj["metadata"]["name"] == "before-warning":
            event("after-normal", "Normal")
            event("after-warning", "Warning")
        else:
            stream.stop()
    assert seen == [("ADDED", "before-warning"), ("ADDED", "after-warning")]
