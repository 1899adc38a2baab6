"""The door's part in Kueue's admission gates (`workloads.gates`): a field rule naming an
annotation whose key holds dots, a JSON patch by our field manager, and the fake's model of
Kueue's rule that a gate is set only at creation and only ever taken away afterwards."""

import pytest

from cluster import FakeCluster, PermanentError
from cluster.fields import FieldRules, for_existing, split_path
from cluster.objects import is_unchanged

GATE = "kueue.x-k8s.io/admission-gated-by"
FIELD = f"metadata.annotations[{GATE}]"
RULES = {("batch", "Job"): FieldRules(create_only=("spec.suspend", FIELD))}
POINTER = "/metadata/annotations/kueue.x-k8s.io~1admission-gated-by"


def batch_job(gates: str | None = None, **labels) -> dict:
    meta = {"name": "train", "namespace": "team-a", "labels": {"app.kubernetes.io/managed-by": "gpuplatform", **labels}}
    if gates is not None:
        meta["annotations"] = {GATE: gates}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"suspend": True, "completions": 1}}


@pytest.fixture
def fake():
    cluster = FakeCluster()
    cluster.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    return cluster


def live(cluster) -> dict:
    return cluster.get("batch/v1", "Job", "train", "team-a")


def gate_of(obj: dict) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(GATE)


@pytest.mark.parametrize("path, keys", [
    ("spec.suspend", ["spec", "suspend"]),
    (FIELD, ["metadata", "annotations", GATE]),
    ("metadata.labels[a.b/c].x", ["metadata", "labels", "a.b/c", "x"]),
], ids=["dotted", "a bracketed key holding dots", "a bracketed key inside a path"])
def test_a_path_splits_into_its_keys(path, keys):
    assert split_path(path) == keys


def test_a_later_apply_keeps_the_gate_the_object_was_created_with():
    desired, _ = for_existing(batch_job(), batch_job("gpuplatform.io/member-cap"), RULES[("batch", "Job")])
    assert gate_of(desired) == "gpuplatform.io/member-cap"


def test_a_later_apply_never_adds_a_gate_and_sends_no_empty_annotations():
    desired, drift = for_existing(batch_job("gpuplatform.io/member-cap"), batch_job(), RULES[("batch", "Job")])
    assert "annotations" not in desired["metadata"] and drift == ()


def test_a_created_gate_stays_through_applies_that_render_none(fake):
    fake.apply([batch_job("gpuplatform.io/member-cap")], rules=RULES)
    fake.reset_counts()
    [result] = fake.apply([batch_job()], rules=RULES)
    assert result.action == "unchanged" and fake.writes == 0
    assert gate_of(live(fake)) == "gpuplatform.io/member-cap"


def test_a_json_patch_takes_the_gate_away_and_the_next_apply_is_a_no_op(fake):
    fake.apply([batch_job("gpuplatform.io/member-cap")], rules=RULES)
    fake.patch("batch/v1", "Job", "train", "team-a", operations=[
        {"op": "test", "path": POINTER, "value": "gpuplatform.io/member-cap"}, {"op": "remove", "path": POINTER}])
    after = live(fake)
    assert gate_of(after) is None
    # as on the API server, a removed field leaves every manager's fields: nothing left to drop
    assert is_unchanged(for_existing(batch_job(), after, RULES[("batch", "Job")])[0], after, fake.field_manager)
    fake.reset_counts()
    fake.apply([batch_job("gpuplatform.io/member-cap")], rules=RULES)  # a stale render with the gate
    assert fake.writes == 0 and gate_of(live(fake)) is None


def test_a_patch_whose_test_fails_changes_nothing(fake):
    fake.apply([batch_job("gpuplatform.io/member-cap,example.com/other")], rules=RULES)
    with pytest.raises(PermanentError) as refused:
        fake.patch("batch/v1", "Job", "train", "team-a", operations=[
            {"op": "test", "path": POINTER, "value": "gpuplatform.io/member-cap"}, {"op": "remove", "path": POINTER}])
    assert refused.value.status == 422
    assert gate_of(live(fake)) == "gpuplatform.io/member-cap,example.com/other"


@pytest.mark.parametrize("before, after, allowed", [
    (None, "gpuplatform.io/member-cap", False),
    ("", "gpuplatform.io/member-cap", False),
    ("gpuplatform.io/member-cap", "gpuplatform.io/member-cap,example.com/other", False),
    ("gpuplatform.io/member-cap", "example.com/other", False),
    ("gpuplatform.io/member-cap,example.com/other", "example.com/other", True),
    ("gpuplatform.io/member-cap", None, True),
], ids=["added after creation", "added to an empty value", "one more", "swapped", "one of two taken away",
        "all taken away"])
def test_gates_are_only_taken_away_after_creation_as_kueue_allows(fake, before, after, allowed):
    fake.put(batch_job(before))
    operation = {"op": "remove", "path": POINTER} if after is None else {"op": "add", "path": POINTER, "value": after}
    if allowed:
        fake.patch("batch/v1", "Job", "train", "team-a", operations=[operation])
        assert gate_of(live(fake)) == after
        return
    with pytest.raises(PermanentError) as refused:
        fake.patch("batch/v1", "Job", "train", "team-a", operations=[operation])
    assert refused.value.status == 403 and "Forbidden" in str(refused.value)
    assert gate_of(live(fake)) == before


def test_an_apply_that_adds_a_gate_to_an_existing_object_is_refused(fake):
    fake.apply([batch_job()])
    with pytest.raises(PermanentError) as refused:
        fake.apply([batch_job("gpuplatform.io/member-cap")])  # without the rules: sent as rendered
    assert refused.value.status == 403 and gate_of(live(fake)) is None
