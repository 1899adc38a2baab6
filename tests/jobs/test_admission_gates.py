"""Where the platform holds a job (a per-person cap, a reservation), it holds it inside Kueue
(issue 46 item 3, docs/caps.md, `workloads.gates`): the job is applied at once with the
platform's admission gate on the object Kueue makes its Workload from, stays submitted with the
platform's reason while Kueue shows it AdmissionGated, and is let go by one patch that takes the
gate off; no later apply puts it back or takes it away. Kinds whose Kueue integration carries no
gate (inference's Deployment) and Volcano flavors keep the job off the cluster, as before."""

import copy

import pytest

from cluster import PermanentError, TransientError
from jobs.lifecycle import AT_PERSONAL_CAP, BEHIND_RESERVATION, State
from jobs.manifests import job_fields, render_job
from jobs.models import Job
from jobs.tasks import reconcile_job, sync_job
from quotas.models import MemberCap
from quotas.models.flavors import Scheduler
from workloads import gates, kueue
from workloads.kinds import by_name, integrations
from workloads.kueue import observe_training

from ..builders import build_job, make_flavor, make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def cap(team, flavor, member):
    make_quota(team, flavor, nominal_gpus=64)
    return MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)


def submit(team, flavor, who, name, gpus=8, **fields) -> Job:
    defaults = dict(image="ghcr.io/x/train:1", workers=1, gpus_per_worker=gpus)
    return Job.objects.submit(team=team, submitter=who, flavor=flavor, name=name, **{**defaults, **fields})


def batch_job(fake, job) -> dict:
    [found] = [o for o in fake.list("batch/v1", "Job", namespace=job.team.namespace_name)
               if o["metadata"]["labels"].get("gpuplatform.io/job") == str(job.pk)]
    return found


def gate(obj: dict) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(gates.ANNOTATION)


def gated_workload(message="Admission is gated by: gpuplatform.io/member-cap") -> dict:
    return {"status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "AdmissionGated", "message": message}]}}


@pytest.fixture
def held(fake, cap, team, flavor, member):
    """The member holds their 8 GPUs with one job; a second waits at the cap, reconciled once."""
    first = submit(team, flavor, member, "first")
    waiting = submit(team, flavor, member, "waiting")
    reconcile_job(waiting.pk)
    waiting.refresh_from_db()
    return first, waiting


def test_a_job_at_its_cap_is_on_the_cluster_behind_the_platforms_gate_and_stays_submitted(fake, held):
    _, waiting = held
    obj = batch_job(fake, waiting)
    assert gate(obj) == gates.MEMBER_CAP and obj["spec"]["suspend"] is True
    assert (waiting.state, waiting.reason) == (State.SUBMITTED, AT_PERSONAL_CAP)
    assert waiting.message.startswith("You hold 8 of your 8 h100 GPUs")  # the cap's words, as before
    fake.reset_counts()
    reconcile_job(waiting.pk)  # the sweep, while it is held
    assert fake.writes == 0


def test_when_the_cap_frees_one_reconcile_takes_the_gate_off_with_one_patch_and_nothing_else(fake, held):
    first, waiting = held
    before = batch_job(fake, waiting)
    Job.objects.filter(pk=first.pk).update(state=State.SUCCEEDED)  # ended behind the trigger's back
    fake.reset_counts()
    reconcile_job(waiting.pk)
    after = batch_job(fake, waiting)
    assert gate(after) is None and fake.writes == fake.requests["PATCH"] == 1
    assert after["spec"] == before["spec"] and after["metadata"]["labels"] == before["metadata"]["labels"]
    waiting.refresh_from_db()
    assert (waiting.state, waiting.reason) == (State.QUEUED, "Queued")
    assert waiting.events.filter(reason="UnderPersonalCap").exists()


def test_no_later_apply_puts_the_gate_back_or_takes_it_away(fake, held):
    first, waiting = held
    released = copy.copy(waiting)
    released.reason = "Submitted"  # a render as if let go, while the gate is still on
    fake.apply(render_job(released), rules=job_fields(released))
    assert gate(batch_job(fake, waiting)) == gates.MEMBER_CAP
    Job.objects.filter(pk=first.pk).update(state=State.SUCCEEDED)
    reconcile_job(waiting.pk)
    fake.reset_counts()
    fake.apply(render_job(waiting), rules=job_fields(waiting))  # a stale read: still at its cap
    assert gate(batch_job(fake, waiting)) is None and fake.writes == 0


def test_a_cancel_that_came_meanwhile_leaves_the_gate_for_its_own_reconcile(fake, held):
    first, waiting = held
    Job.objects.filter(pk=first.pk).update(state=State.SUCCEEDED)
    stale = Job.objects.select_related("team", "flavor", "priority").get(pk=waiting.pk)
    stale.reason = "Submitted"  # read let go, just before the cancel below
    assert waiting.request_cancel(waiting.submitter)
    sync_job(fake, stale)  # its apply writes nothing; the gate's patch sees the cancel and stays
    assert gate(batch_job(fake, waiting)) == gates.MEMBER_CAP
    reconcile_job(waiting.pk)  # the cancel's own reconcile
    assert not fake.list("batch/v1", "Job", namespace=waiting.team.namespace_name)


def test_the_platform_takes_off_its_own_gates_and_leaves_anybody_elses(fake, held):
    _, waiting = held
    obj = batch_job(fake, waiting)
    fake.put({**obj, "metadata": {**obj["metadata"], "annotations": {
        gates.ANNOTATION: f"{gates.MEMBER_CAP},example.com/hold"}}})
    assert gates.open_gates(fake, obj, [gates.MEMBER_CAP, gates.RESERVATION])  # read before: tested, read again
    assert gate(batch_job(fake, waiting)) == "example.com/hold"
    assert not gates.open_gates(fake, batch_job(fake, waiting), [gates.MEMBER_CAP])


def test_a_gate_that_keeps_changing_under_the_patch_is_left_to_the_tasks_retry(fake, held):
    _, waiting = held
    fake.fail_next("PATCH", PermanentError("testing value failed", status=422, reason="Invalid"), times=3)
    with pytest.raises(TransientError):
        gates.open_gates(fake, batch_job(fake, waiting), [gates.MEMBER_CAP])
    assert gate(batch_job(fake, waiting)) == gates.MEMBER_CAP


def test_a_held_job_stays_at_its_cap_while_kueue_shows_it_gated_and_kueues_words_are_noted(held):
    _, waiting = held
    seen = observe_training(waiting, gated_workload(), {"status": {}})
    assert (seen.state, seen.reason) == ("queued", "AdmissionGated")
    assert waiting.observe(seen.state, reason=seen.reason, message=seen.message)
    assert not waiting.observe(seen.state, reason=seen.reason, message=seen.message)  # noted once
    waiting.refresh_from_db()
    assert (waiting.state, waiting.reason) == (State.SUBMITTED, AT_PERSONAL_CAP)
    [noted] = waiting.events.filter(reason="AdmissionGated")
    assert noted.message == seen.message and "Admission is gated by: gpuplatform.io/member-cap" in noted.message
    # a Workload Kueue has not looked at yet moves it nowhere either
    assert not waiting.observe("queued", reason="Queued", message="Waiting for the scheduler.")
    assert Job.objects.get(pk=waiting.pk).reason == AT_PERSONAL_CAP


def test_the_job_page_shows_kueues_word_beside_the_platforms_reason_while_held(held, member, client_for):
    _, waiting = held
    seen = observe_training(waiting, gated_workload(), {"status": {}})
    waiting.observe(seen.state, reason=seen.reason, message=seen.message)
    page = client_for(member).get(f"/jobs/{waiting.pk}/").content.decode()
    assert "(AtPersonalCap)" in page and "You hold 8 of your 8 h100 GPUs" in page
    assert '<p class="reason kueue-hold small">Held by the platform: the submitter is at their per-person cap.' in page
    assert "(Kueue: AdmissionGated, Admission is gated by: gpuplatform.io/member-cap)" in page
    Job.objects.filter(pk=waiting.pk).update(reason="Submitted")  # let go: Kueue's hold is no longer ours to show
    assert "kueue-hold" not in client_for(member).get(f"/jobs/{waiting.pk}/").content.decode()


@pytest.mark.parametrize("message, words", [
    ("Admission is gated by: gpuplatform.io/member-cap",
     "Held by the platform: the submitter is at their per-person cap."),
    ("Admission is gated by: gpuplatform.io/reservation",
     "Held by the platform: it would delay the job the flavor reserves GPUs for."),
    ("Admission is gated by: example.com/hold",
     "Held by admission gate example.com/hold, not the platform's: Kueue admits it once the gate is removed"),
], ids=["our cap's gate", "our reservation's gate", "somebody else's gate"])
def test_kueues_admission_gated_reads_as_held_with_the_gates_named(team, flavor, message, words):
    seen = observe_training(build_job(team, flavor), gated_workload(message), {"status": {}})
    assert (seen.state, seen.reason) == ("queued", "AdmissionGated")
    assert words in seen.message and f"(Kueue: AdmissionGated, {message})" in seen.message
    assert "Waiting for quota" not in seen.message


@pytest.mark.parametrize("kind, scheduler, fields", [
    ("inference", Scheduler.KUEUE, dict(port=8000, min_replicas=1, max_replicas=1)),
    ("training", Scheduler.VOLCANO, {}),
], ids=["an inference server's Deployment", "a Volcano job"])
def test_a_held_job_whose_kind_carries_no_gate_stays_off_the_cluster(fake, team, member, kind, scheduler, fields):
    pool = make_flavor("pool", scheduler=scheduler)
    make_quota(team, pool, nominal_gpus=64)
    MemberCap.objects.create(team=team, flavor=pool, user=member, max_gpus=8)
    submit(team, pool, member, "first")
    waiting = submit(team, pool, member, "waiting", gpus=2, kind=kind, **fields)
    assert waiting.at_personal_cap and for_kind(kind, scheduler).gated is None
    reconcile_job(waiting.pk)
    labelled = [o for o in fake.stored() if (o["metadata"].get("labels") or {}).get("gpuplatform.io/job")
                == str(waiting.pk)]
    assert labelled == []


def for_kind(kind: str, scheduler: str):
    return by_name(kind).on(scheduler)


@pytest.mark.parametrize("kind, fields, gated", [
    ("training", dict(workers=2), ("batch/v1", "Job")),
    ("ray-job", dict(ray_entrypoint="python a.py", workers=1), ("ray.io/v1", "RayJob")),
    ("ray-cluster", dict(workers=1), ("ray.io/v1", "RayCluster")),
    ("notebook", dict(port=8888), ("apps/v1", "StatefulSet")),
], ids=["a batch Job (not its Service)", "a RayJob", "a RayCluster", "a notebook's StatefulSet"])
@pytest.mark.parametrize("reason, expected", [(AT_PERSONAL_CAP, gates.MEMBER_CAP),
                                              (BEHIND_RESERVATION, gates.RESERVATION)], ids=["cap", "reservation"])
def test_a_held_job_renders_the_gate_of_its_reason_on_the_object_kueue_reads(team, flavor, kind, fields, gated,
                                                                            reason, expected):
    job = build_job(team, flavor, kind=kind, state=State.SUBMITTED, reason=reason, pk=7, **fields)
    on = {(o["apiVersion"], o["kind"]): gate(o) for o in render_job(job)}
    assert on.pop(gated) == expected and set(on.values()) <= {None}
    job.reason = "Submitted"
    assert all(gate(o) is None for o in render_job(job))


def test_every_integration_that_carries_a_gate_is_kueues_and_keeps_the_gate_create_only():
    carrying = {(i.name, i.scheduler) for i in integrations() if i.gated is not None}
    assert carrying == {("kueue-training", "kueue"), ("ray-job", "kueue"), ("ray-cluster", "kueue"), ("notebook", "kueue")}
    for integration in integrations():
        if integration.gated is None:
            continue
        assert integration.gated in integration.renders
        group = integration.gated[0].rpartition("/")[0]
        assert gates.FIELD in integration.fields[(group, integration.gated[1])].create_only
    assert kueue.BATCH_JOB in [i.gated for i in integrations()]
