"""Field ownership against the in-memory cluster: a reconcile never takes back what Kueue,
the HPA or Volcano write, costs no write when nothing of ours changed, and reports an
immutable field it cannot change instead of fighting over it. The same rules run against
the real cluster in tests/live/cluster/test_field_ownership_live.py."""

import pytest

from cluster import FakeCluster, TransientError
from cluster.fields import FieldRules, for_existing
from jobs.manifests import job_fields, object_name, render_job
from jobs.tasks import reconcile_job
from quotas.models import Scheduler

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db


def submitted(team, flavor, **fields):
    make_quota(team, flavor)
    job = make_job(team, flavor, **fields)
    job.submit()
    return job


def live_object(fake: FakeCluster, job, kind: str, api_version: str) -> dict:
    [obj] = [o for o in fake.stored(api_version, kind) if o["metadata"]["name"] == object_name(job)]
    return obj


def controller_writes(fake: FakeCluster, obj: dict, path: str, value) -> None:
    """Another field manager changes one field, as Kueue or the HPA would."""
    *parents, last = path.split(".")
    target = obj
    for key in parents:
        target = target[key]
    target[last] = value
    fake.put(obj)


# --- the rule itself ----------------------------------------------------------------------
def test_an_existing_object_keeps_the_live_value_of_every_field_that_is_not_ours():
    rules = FieldRules(create_only=("spec.suspend",), immutable=("spec.template",))
    desired = {"metadata": {"name": "j"}, "spec": {"suspend": True, "template": {"x": 1}, "ttl": 5}}
    live = {"metadata": {"name": "j", "resourceVersion": "42"}, "spec": {"suspend": False, "template": {"x": 1}}}
    body, drift = for_existing(desired, live, rules)
    assert body["spec"] == {"suspend": False, "template": {"x": 1}, "ttl": 5}
    assert body["metadata"]["resourceVersion"] == "42"
    assert drift == ()


def test_an_immutable_field_that_differs_is_reported_as_drift_and_kept_live():
    rules = FieldRules(immutable=("spec.template",))
    body, drift = for_existing({"spec": {"template": {"image": "new"}}},
                               {"metadata": {}, "spec": {"template": {"image": "old", "extra": 1}}}, rules)
    assert drift == ("spec.template",)
    assert body["spec"]["template"] == {"image": "old", "extra": 1}


def test_a_create_only_field_the_live_object_lacks_is_left_out():
    body, drift = for_existing({"spec": {"replicas": 2, "x": 1}}, {"metadata": {}, "spec": {}},
                               FieldRules(create_only=("spec.replicas",)))
    assert body["spec"] == {"x": 1} and drift == ()


def test_kinds_without_rules_are_ours_for_life():
    desired = {"spec": {"replicas": 2}}
    assert for_existing(desired, {"spec": {"replicas": 5}}, None) == (desired, ())


# --- Kueue batch Jobs -------------------------------------------------------------------------
def test_an_admitted_kueue_job_is_not_suspended_again_and_costs_no_write(fake, team, flavor):
    job = submitted(team, flavor, workers=2)
    reconcile_job(job.pk)
    batch = live_object(fake, job, "Job", "batch/v1")
    assert batch["spec"]["suspend"] is True  # created suspended, for Kueue to admit
    controller_writes(fake, batch, "spec.suspend", False)  # Kueue admits it

    for _sweep in range(3):
        fake.reset_counts()
        assert reconcile_job(job.pk) == 0
        assert fake.writes == 0
    assert live_object(fake, job, "Job", "batch/v1")["spec"]["suspend"] is False


def test_a_kueue_job_whose_label_was_edited_is_healed_without_touching_suspend(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    batch = live_object(fake, job, "Job", "batch/v1")
    batch["spec"]["suspend"] = False
    del batch["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    fake.put(batch)

    assert reconcile_job(job.pk) == 1
    healed = live_object(fake, job, "Job", "batch/v1")
    assert healed["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == flavor.name
    assert healed["spec"]["suspend"] is False


def test_an_apply_loses_a_race_with_a_controller_instead_of_overwriting_it(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    batch = live_object(fake, job, "Job", "batch/v1")
    del batch["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    fake.put(batch)
    snapshot = fake.snapshot(f"gpuplatform.io/job={job.pk}", [("batch/v1", "Job")])
    controller_writes(fake, live_object(fake, job, "Job", "batch/v1"), "spec.suspend", False)

    with pytest.raises(TransientError, match="modified"):
        fake.apply([o for o in render_job(job) if o["kind"] == "Job"], snapshot=snapshot, rules=job_fields(job))
    assert live_object(fake, job, "Job", "batch/v1")["spec"]["suspend"] is False


def test_a_changed_pod_template_is_kept_as_created_and_said_once(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    job.image = "registry.example/other:2"
    job.save(update_fields=["image"])

    fake.reset_counts()
    assert reconcile_job(job.pk) == 0
    assert reconcile_job(job.pk) == 0
    assert fake.writes == 0
    container = live_object(fake, job, "Job", "batch/v1")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] != "registry.example/other:2"
    [note] = job.events.filter(reason="KeptAsCreated")
    assert "spec.template" in note.message and "submit it again" in note.message
    job.refresh_from_db()
    assert note.from_state == note.to_state == job.state


# --- Volcano Jobs -----------------------------------------------------------------------------
def test_a_volcano_job_spec_is_never_sent_again(fake, team):
    a100 = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    job = submitted(team, a100, workers=3)
    reconcile_job(job.pk)
    vcjob = live_object(fake, job, "Job", "batch.volcano.sh/v1alpha1")
    controller_writes(fake, vcjob, "spec.minAvailable", 2)  # any write by Volcano's side

    fake.reset_counts()
    assert reconcile_job(job.pk) == 0
    assert fake.writes == 0
    assert job.events.filter(reason="KeptAsCreated").count() == 1


# --- inference ---------------------------------------------------------------------------------
def test_replicas_set_by_the_autoscaler_stay_across_sweeps(fake, team, flavor):
    job = submitted(team, flavor, kind="inference", port=8000, min_replicas=1, max_replicas=4)
    reconcile_job(job.pk)
    deployment = live_object(fake, job, "Deployment", "apps/v1")
    assert deployment["spec"]["replicas"] == 1  # created at the minimum
    controller_writes(fake, deployment, "spec.replicas", 3)  # the HPA scales it

    for _sweep in range(3):
        fake.reset_counts()
        assert reconcile_job(job.pk) == 0
        assert fake.writes == 0
    assert live_object(fake, job, "Deployment", "apps/v1")["spec"]["replicas"] == 3
