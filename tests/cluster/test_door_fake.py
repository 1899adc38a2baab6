"""The door's rules without a cluster: error classes, apply order, no-op detection, prune,
request counting, and the in-memory FakeCluster that unit tests of callers rely on."""

from __future__ import annotations

import inspect
import json

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception

import cluster
from cluster import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    Action,
    FakeCluster,
    NotFound,
    ObjectRef,
    PermanentError,
    TransientError,
    UnknownKind,
    classify,
)
from cluster.client import Cluster
from cluster.objects import apply_order, is_subset, matches_fields, matches_selector
from cluster.transport import request_verb

MANAGED = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}


def api_error(status, body=None, headers=None):
    exc = ApiException(status=status, reason="Reason", body=json.dumps(body) if body else None)
    exc.headers = headers or {}
    return exc


def namespace(name="team-a", **labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def config_map(name, ns="team-a", data=None, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels if labels is not None else MANAGED},
        "data": data if data is not None else {"k": "v"},
    }


INVALID = {
    "kind": "Status",
    "message": 'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"',
    "reason": "Invalid",
    "details": {"causes": [{"field": "metadata.name", "message": "Invalid value", "reason": "FieldValueInvalid"}]},
    "code": 422,
}
OBJECT_MISSING = {"kind": "Status", "reason": "NotFound", "message": 'configmaps "x" not found',
                  "details": {"name": "x", "kind": "configmaps"}, "code": 404}
KUEUE_STILL_DELETING = {
    "kind": "Status", "code": 403, "reason": "Forbidden",
    "message": 'admission webhook "vstatefulset.kb.io" denied the request: spec.replicas: Forbidden: '
               "workload from previous scale-down is still being deleted"}
SSA_500 = {"kind": "Status", "code": 500,
           "message": "failed to create typed patch object (ns/x; /v1, Kind=ConfigMap): .bogus: field not declared in schema"}


@pytest.mark.parametrize(
    ("case", "exc", "expected"),
    [
        ("422 invalid is permanent", api_error(422, INVALID), PermanentError),
        ("400 bad request is permanent", api_error(400, {"message": "bad"}), PermanentError),
        ("401 unauthorized is permanent", api_error(401), PermanentError),
        ("403 forbidden is permanent", api_error(403, {"message": "forbidden"}), PermanentError),
        ("a webhook waiting for a deletion to finish is transient", api_error(403, KUEUE_STILL_DELETING), TransientError),
        ("404 without an object name (unknown path) is permanent", api_error(404), PermanentError),
        ("404 of a named object is NotFound", api_error(404, OBJECT_MISSING), NotFound),
        ("409 conflict is transient", api_error(409, {"message": "modified"}), TransientError),
        ("410 gone is transient", api_error(410), TransientError),
        ("429 is transient", api_error(429), TransientError),
        ("500 is transient", api_error(500), TransientError),
        ("500 for an undeclared applied field is permanent", api_error(500, SSA_500), PermanentError),
        ("503 is transient", api_error(503), TransientError),
        ("504 is transient", api_error(504), TransientError),
        ("status 0 (no answer, TLS) is transient", ApiException(status=0, reason="SSLError"), TransientError),
        ("the dynamic client's 422 is permanent", api_exception(api_error(422, INVALID)), PermanentError),
        ("connection refused is transient", ConnectionRefusedError(111, "refused"), TransientError),
        (
            "urllib3 giving up on a connection is transient",
            urllib3.exceptions.MaxRetryError(None, "/api", urllib3.exceptions.NewConnectionError(None, "refused")),
            TransientError,
        ),
        ("a read timeout is transient", urllib3.exceptions.ReadTimeoutError(None, "/api", "timed out"), TransientError),
        ("a broken stream is transient", urllib3.exceptions.ProtocolError("reset"), TransientError),
        ("a socket timeout is transient", TimeoutError("timed out"), TransientError),
        ("an unknown kind is permanent", ResourceNotFoundError("No matches found"), UnknownKind),
    ],
)
def test_classify_maps_failures_to_transient_or_permanent(case, exc, expected):
    error = classify(exc)
    assert type(error) is expected, case


def test_classify_keeps_the_servers_message_and_field_causes():
    error = classify(api_error(422, INVALID))
    assert error.message == INVALID["message"]
    assert error.status == 422
    assert [(c.field, c.reason) for c in error.causes] == [("metadata.name", "FieldValueInvalid")]


def test_classify_reads_retry_after_from_header_or_status_details():
    assert classify(api_error(429, headers={"Retry-After": "7"})).retry_after == 7
    body = {"message": "busy", "details": {"retryAfterSeconds": 3}}
    assert classify(api_error(503, body)).retry_after == 3
    assert classify(api_error(500)).retry_after is None


def test_classify_leaves_our_own_bugs_alone():
    assert classify(KeyError("metadata")) is None
    error = TransientError("already classified")
    assert classify(error) is error


@pytest.mark.parametrize(
    ("method", "url", "verb"),
    [
        ("GET", "https://h/version", "GET"),
        ("GET", "https://h/apis", "GET"),
        ("GET", "https://h/apis/kueue.x-k8s.io/v1beta2", "GET"),
        ("GET", "https://h/api/v1/namespaces", "LIST"),
        ("GET", "https://h/api/v1/namespaces/team-a", "GET"),
        ("GET", "https://h/api/v1/namespaces/team-a/status", "GET"),
        ("GET", "https://h/api/v1/namespaces/team-a/configmaps?labelSelector=a%3Db", "LIST"),
        ("GET", "https://h/api/v1/namespaces/team-a/configmaps/x", "GET"),
        ("GET", "https://h/api/v1/namespaces/team-a/pods/p/log?tailLines=5", "GET"),
        ("GET", "https://h/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "LIST"),
        ("GET", "https://h/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq", "GET"),
        ("GET", "https://h/api/v1/namespaces/team-a/configmaps?watch=True&resourceVersion=5", "WATCH"),
        ("patch", "https://h/api/v1/namespaces/team-a/configmaps/x", "PATCH"),
        ("DELETE", "https://h/api/v1/namespaces/team-a", "DELETE"),
    ],
)
def test_requests_are_counted_by_the_verb_the_api_server_sees(method, url, verb):
    assert request_verb(method, url) == verb


def test_apply_order_puts_dependencies_first_and_keeps_input_order_within_a_tier():
    def obj(api_version, kind, name, ns=None):
        meta = {"name": name, **({"namespace": ns} if ns else {})}
        return {"apiVersion": api_version, "kind": kind, "metadata": meta}

    kueue = "kueue.x-k8s.io/v1beta2"
    objects = [
        obj(kueue, "LocalQueue", "lq", "team-a"),
        obj("v1", "ConfigMap", "cm", "team-a"),
        obj(kueue, "ClusterQueue", "cq"),
        obj("scheduling.volcano.sh/v1beta1", "Queue", "vq"),
        obj(kueue, "WorkloadPriorityClass", "high"),
        obj(kueue, "Cohort", "research"),
        obj(kueue, "ResourceFlavor", "h100"),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "viewer"),
        obj("v1", "Namespace", "team-a"),
    ]
    ordered = [o["kind"] for o in apply_order(objects)]
    assert ordered == [
        "Namespace", "ResourceFlavor", "Cohort", "WorkloadPriorityClass", "Queue",
        "ClusterQueue", "ClusterRole", "LocalQueue", "ConfigMap",
    ]


@pytest.mark.parametrize(
    ("case", "desired", "live", "subset"),
    [
        ("server-defaulted extra fields are fine", {"a": "1"}, {"a": "1", "b": "x"}, True),
        ("a changed value is not", {"a": "1"}, {"a": "2"}, False),
        ("a missing field is not", {"a": "1", "c": "3"}, {"a": "1"}, False),
        ("an integer is not its quantity string", {"gpu": 8}, {"gpu": "8"}, False),
        ("list items may carry defaults", {"l": [{"n": "x"}]}, {"l": [{"n": "x", "p": "TCP"}]}, True),
        ("a list of another length is not", {"l": ["a"]}, {"l": ["a", "b"]}, False),
        ("a null we set matches an absent field", {"sel": None}, {}, True),
        ("an empty map we set matches an absent field", {"m": {}}, {}, True),
        ("True is not 1", {"flag": True}, {"flag": 1}, False),
        ("a false the server drops matches an absent field", {"hostNetwork": False}, {}, True),
        ("a true never matches an absent field", {"hostNetwork": True}, {}, False),
        ("a zero the server drops matches an absent field", {"initialDelaySeconds": 0}, {}, True),
        ("a one never matches an absent field", {"initialDelaySeconds": 1}, {}, False),
    ],
)
def test_subset_comparison(case, desired, live, subset):
    assert is_subset(desired, live) is subset, case


@pytest.mark.parametrize(
    ("selector", "labels", "match"),
    [
        ("team=a", {"team": "a"}, True),
        ("team=a,job", {"team": "a"}, False),
        ("team!=a", {"team": "b"}, True),
        ("!job", {"team": "a"}, True),
        ("team in (a, b)", {"team": "b"}, True),
        ("team notin (a,b),x=y", {"team": "c", "x": "y"}, True),
    ],
)
def test_the_fake_understands_label_selectors(selector, labels, match):
    assert matches_selector(labels, selector) is match


@pytest.mark.parametrize(
    ("selector", "match"),
    [
        ("type=Warning", True),
        ("type==Warning", True),
        ("type!=Warning", False),
        ("type=Warning,involvedObject.kind=Pod", True),
        ("type=Warning,involvedObject.kind=Job", False),
        ("involvedObject.fieldPath=", True),  # a missing field is the empty string
        ("", True),
    ],
)
def test_the_fake_understands_field_selectors(selector, match):
    event = {"type": "Warning", "involvedObject": {"kind": "Pod", "name": "p"}}
    assert matches_fields(event, selector) is match


def test_the_fake_has_the_public_interface_of_the_real_cluster():
    def public(cls):
        return {
            name: inspect.signature(fn).parameters.keys()
            for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")
        }

    real, fake = public(Cluster), public(FakeCluster)
    assert real.keys() <= fake.keys()
    assert {name: list(real[name]) for name in real} == {name: list(fake[name]) for name in real}


def test_fake_apply_creates_in_dependency_order_then_reports_unchanged_without_writes():
    fake = FakeCluster()
    desired = [config_map("settings"), namespace(**MANAGED)]
    first = fake.apply(desired)
    assert [(r.ref.kind, r.action) for r in first] == [("Namespace", Action.CREATED), ("ConfigMap", Action.CREATED)]
    fake.reset_counts()
    second = fake.apply(desired)
    assert {r.action for r in second} == {Action.UNCHANGED}
    assert fake.writes == 0 and fake.requests == {"GET": 2}


def test_fake_apply_patches_only_the_object_that_changed():
    fake = FakeCluster()
    fake.apply([namespace(), config_map("a"), config_map("b")])
    fake.reset_counts()
    results = fake.apply([namespace(), config_map("a"), config_map("b", data={"k": "new"})])
    assert [r.action for r in results] == [Action.UNCHANGED, Action.UNCHANGED, Action.CHANGED]
    assert fake.requests["PATCH"] == 1
    assert fake.get("v1", "ConfigMap", "b", "team-a")["data"] == {"k": "new"}


def test_fake_apply_removes_a_field_we_no_longer_render_but_keeps_other_writers_fields():
    fake = FakeCluster()
    fake.apply([namespace(), config_map("a", data={"keep": "1", "drop": "2"})])
    live = fake.get("v1", "ConfigMap", "a", "team-a")
    live["metadata"]["annotations"] = {"edited-by": "someone"}
    fake.put(live)
    [_, result] = fake.apply([namespace(), config_map("a", data={"keep": "1"})])
    assert result.action is Action.CHANGED
    assert result.object["data"] == {"keep": "1"}
    assert result.object["metadata"]["annotations"] == {"edited-by": "someone"}


def test_fake_apply_restores_a_hand_edit():
    fake = FakeCluster()
    fake.apply([namespace(), config_map("a", data={"k": "ours"})])
    live = fake.get("v1", "ConfigMap", "a", "team-a")
    live["data"]["k"] = "edited"
    fake.put(live)
    [_, result] = fake.apply([namespace(), config_map("a", data={"k": "ours"})])
    assert result.action is Action.CHANGED and result.object["data"] == {"k": "ours"}


def test_an_identical_object_somebody_else_created_is_applied_once_to_own_it():
    fake = FakeCluster()
    fake.put(namespace())
    assert fake.apply([namespace()])[0].action is Action.CHANGED
    assert fake.apply([namespace()])[0].action is Action.UNCHANGED


def test_fake_apply_rejects_an_invalid_name_permanently():
    fake = FakeCluster()
    fake.apply([namespace()])
    with pytest.raises(PermanentError) as raised:
        fake.apply([config_map("Bad_Name")])
    assert raised.value.status == 422 and raised.value.causes[0].field == "metadata.name"


def test_fake_apply_needs_the_namespace_to_exist_like_the_api_server():
    with pytest.raises(NotFound):
        FakeCluster().apply([config_map("orphan", ns="nowhere")])


def test_fake_injected_failure_hits_the_next_request_of_that_verb_only():
    fake = FakeCluster()
    fake.fail_next("PATCH", TransientError("API server restarting", status=503))
    with pytest.raises(TransientError):
        fake.apply([namespace()])
    assert fake.stored("v1", "Namespace") == []
    assert fake.apply([namespace()])[0].action is Action.CREATED


def test_prune_deletes_our_stale_objects_and_leaves_unlabelled_and_desired_ones():
    fake = FakeCluster()
    team = {"team": "a"}
    keep = config_map("keep", labels={**MANAGED, **team})
    stale = config_map("stale", labels={**MANAGED, **team})
    hand_made = config_map("hand-made", labels=team)
    other_team = config_map("other", labels={**MANAGED, "team": "b"})
    fake.apply([namespace(), keep, stale, hand_made, other_team])
    fake.reset_counts()
    deleted = fake.prune("team=a", [namespace(), keep], [("v1", "ConfigMap")])
    assert deleted == [ObjectRef("v1", "ConfigMap", "team-a", "stale")]
    assert sorted(o["metadata"]["name"] for o in fake.stored("v1", "ConfigMap")) == ["hand-made", "keep", "other"]
    assert fake.requests == {"LIST": 1, "DELETE": 1}
    assert fake.prune("team=a", [namespace(), keep], [("v1", "ConfigMap")]) == []


def test_prune_compares_without_the_version_and_skips_objects_already_terminating():
    fake = FakeCluster()
    fake.apply([namespace(**MANAGED)])
    terminating = fake.get("v1", "Namespace", "team-a")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    fake.put(terminating)
    assert fake.prune(f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}", [], [("v1", "Namespace")]) == []
    assert fake.requests["DELETE"] == 0


def test_prune_deletes_dependents_first_and_ignores_kinds_the_cluster_lacks():
    fake = FakeCluster(missing_kinds=[("scheduling.volcano.sh/v1beta1", "Queue")])
    fake.apply([namespace(**MANAGED), config_map("cm")])
    deleted = fake.prune(
        f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}",
        [],
        [("v1", "Namespace"), ("scheduling.volcano.sh/v1beta1", "Queue"), ("v1", "ConfigMap")],
    )
    assert [r.kind for r in deleted] == ["ConfigMap", "Namespace"]


def test_deleting_a_namespace_takes_its_objects_and_a_second_delete_reports_gone():
    fake = FakeCluster()
    fake.apply([namespace(), config_map("a")])
    assert fake.delete("v1", "Namespace", "team-a") is True
    assert fake.stored() == []
    assert fake.delete("v1", "Namespace", "team-a") is False
    with pytest.raises(NotFound):
        fake.get("v1", "ConfigMap", "a", "team-a")


def test_fake_watch_yields_current_state_then_later_changes_and_ends_when_drained():
    fake = FakeCluster()
    fake.apply([namespace(), config_map("a")])
    stream = fake.watch("v1", "ConfigMap", namespace="team-a")
    assert [(t, o["metadata"]["name"]) for t, o in stream] == [("ADDED", "a")]
    fake.apply([namespace(), config_map("a", data={"k": "2"}), config_map("b")])
    fake.delete("v1", "ConfigMap", "a", "team-a")
    later = fake.watch("v1", "ConfigMap", resource_version=stream.resource_version)
    assert [(t, o["metadata"]["name"]) for t, o in later] == [
        ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a"),
    ]


def test_fake_watch_relists_after_history_is_compacted():
    fake = FakeCluster()
    fake.apply([namespace(), config_map("a"), config_map("b")])
    first = fake.watch("v1", "ConfigMap")
    assert len(list(first)) == 2
    fake.delete("v1", "ConfigMap", "a", "team-a")
    fake.compact()
    fake.reset_counts()
    old = first.resource_version
    stream = fake.watch("v1", "ConfigMap", resource_version=old)
    assert [(t, o["metadata"]["name"]) for t, o in stream] == [("ADDED", "b")]
    assert stream.relists == 1 and fake.requests["LIST"] == 1


def test_fake_pod_logs_returns_the_tail():
    fake = FakeCluster()
    fake.set_pod_logs("team-a", "trainer-0", "one\ntwo\nthree\n")
    assert fake.pod_logs("team-a", "trainer-0", tail_lines=2) == "two\nthree\n"
    with pytest.raises(NotFound):
        fake.pod_logs("team-a", "missing")


def test_get_cluster_builds_one_cluster_from_settings(settings, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    settings.KUBECONFIG = kubeconfig
    settings.KUBE_IN_CLUSTER = False
    settings.KUBE_FIELD_MANAGER = "platform-under-test"
    cluster.get_cluster.cache_clear()
    try:
        door = cluster.get_cluster()
        assert door.field_manager == "platform-under-test"
        assert cluster.get_cluster() is door
        with pytest.raises(TransientError):  # nothing listens on port 1
            door.get("v1", "Namespace", "default")
        assert door.requests["GET"] >= 1
    finally:
        cluster.get_cluster.cache_clear()


def test_threads_asking_at_once_share_one_cluster(settings, monkeypatch):
    """A worker's threads start together: each first call must get the same client (and
    watch cache), not one each."""
    import threading
    import time

    from cluster import client

    made = []

    class Slow:
        def __init__(self, **kwargs):
            time.sleep(0.05)  # long enough for every thread to arrive while it is being made
            made.append(self)

    monkeypatch.setattr(client, "Cluster", Slow)
    cluster.get_cluster.cache_clear()
    start, got = threading.Barrier(8), []

    def ask():
        start.wait()
        got.append(cluster.get_cluster())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(made) == 1 and got == made * 8
    finally:
        cluster.get_cluster.cache_clear()
