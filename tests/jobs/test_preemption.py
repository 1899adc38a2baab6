"""The preemption contract (docs/preemption.md): the grace and the protected class rendered
table-style, Kueue's preemption read, the checkpoint a job reports, the lost GPU-hours
recorded once and charged to the preemptor's team, and the sentence the victim reads."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Callable

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from core.ownership import JOB_LABEL
from jobs.lifecycle import State
from jobs.manifests import pod_templates_of, render_job
from jobs.models import GpuInterval, Job, Preemption
from jobs.watch.watcher import StatusWatcher
from quotas.manifests import render_cluster
from quotas.models import PriorityClass, Scheduler
from workloads import kueue
from workloads.pods import CHECKPOINT_GRACE_ENV, last_checkpoint

from ..builders import make_flavor, make_job, make_team
from ..schemas import validate

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 3, 13, 0, tzinfo=UTC)  # in the past: the watcher clamps what is to come


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def h100():
    return make_flavor("h100")


@pytest.fixture
def a100():
    return make_flavor("a100", scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"})


@pytest.fixture
def high():
    return PriorityClass.objects.create(name="high", value=1000, checkpoint_grace_seconds=600,
                                        minimum_runtime_seconds=1800)


@pytest.fixture
def low():
    return PriorityClass.objects.create(name="low", value=10, checkpoint_grace_seconds=120,
                                        minimum_runtime_seconds=900)


def job_in(team, flavor, *, state=State.QUEUED, run_admitted_at=None, **fields) -> Job:
    team.max_priority_value = 1000
    team.save(update_fields=["max_priority_value"])
    job = make_job(team, flavor, **fields)
    Job.objects.filter(pk=job.pk).update(state=state, run_admitted_at=run_admitted_at)
    return Job.objects.select_related("team", "flavor", "priority").get(pk=job.pk)


def batch_job(objects) -> dict:
    return next(o for o in objects if o["kind"] == "Job")


# --- rendering, table-style ----------------------------------------------------------------------
@dataclass
class Case:
    name: str
    flavor: str
    priority: str | None = None
    state: str = State.QUEUED
    admitted_minutes_ago: float | None = None
    check: Callable[[dict, dict], None] = lambda job, pod: None
    settings: dict = field(default_factory=dict)


def grace(seconds):
    def check(job_obj, pod):
        assert pod["terminationGracePeriodSeconds"] == seconds
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env[CHECKPOINT_GRACE_ENV] == str(seconds)
    return check


def priority_label(name):
    def check(job_obj, pod):
        assert job_obj["metadata"]["labels"][kueue.PRIORITY_LABEL] == name
    return check


def both(*checks):
    def check(job_obj, pod):
        for c in checks:
            c(job_obj, pod)
    return check


CASES = [
    Case("a kueue job's pods get its class's grace and are told it", "h100", "high", check=grace(600)),
    Case("a kueue job without a class gets the platform's grace", "h100", check=grace(45),
         settings={"CHECKPOINT_GRACE_SECONDS": 45}),
    Case("a volcano gang gets the platform's grace on every task", "a100", check=grace(30)),
    Case("a queued job waits under its own class, never the protected one", "h100", "high",
         check=priority_label("high")),
    Case("an admitted job inside its minimum runtime runs under the protected class", "h100", "high",
         state=State.ADMITTED, admitted_minutes_ago=1, check=priority_label(kueue.PROTECTED_PRIORITY_CLASS)),
    Case("a running job inside its minimum runtime runs under the protected class", "h100", "high",
         state=State.RUNNING, admitted_minutes_ago=29, check=priority_label(kueue.PROTECTED_PRIORITY_CLASS)),
    Case("a running job past its minimum runtime is back under its own class", "h100", "high",
         state=State.RUNNING, admitted_minutes_ago=31, check=both(priority_label("high"), grace(600))),
    Case("a preempted job waits under its own class", "h100", "high", state=State.PREEMPTED, admitted_minutes_ago=1,
         check=priority_label("high")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rendering_the_contract(case, h100, a100, high, settings):
    for name, value in case.settings.items():
        setattr(settings, name, value)
    flavor = {"h100": h100, "a100": a100}[case.flavor]
    admitted = None if case.admitted_minutes_ago is None else timezone.now() - timedelta(minutes=case.admitted_minutes_ago)
    job = job_in(make_team("vision"), flavor, state=case.state, run_admitted_at=admitted,
                 priority=high if case.priority else None, workers=2)
    objects = render_job(job)
    for obj in objects:
        validate(obj)
    workload = batch_job(objects)
    templates = pod_templates_of(workload)
    assert templates
    for template in templates:
        case.check(workload, template["spec"])


def test_the_protected_class_comes_with_the_first_class_or_kueue_flavor_and_is_above_every_class(h100, high):
    objects = render_cluster([h100], [], [high])
    protected = [o for o in objects if o["metadata"]["name"] == kueue.PROTECTED_PRIORITY_CLASS]
    assert len(protected) == 1
    validate(protected[0])
    assert protected[0]["value"] == kueue.PROTECTED_PRIORITY_VALUE == 1_000_000_000  # the top of a class's range
    with pytest.raises(ValidationError):
        PriorityClass(name="above", value=kueue.PROTECTED_PRIORITY_VALUE + 1).full_clean()
    # Notebooks run under it (docs/notebooks.md): it comes with the first Kueue flavor too.
    assert [o["metadata"]["name"] for o in render_cluster([h100], [], []) if o["kind"] == "WorkloadPriorityClass"] \
        == [kueue.PROTECTED_PRIORITY_CLASS]
    assert not [o for o in render_cluster([], [], []) if o["kind"] == "WorkloadPriorityClass"]


def test_a_class_may_not_take_the_protected_name_nor_a_grace_out_of_bounds():
    with pytest.raises(ValidationError) as err:
        PriorityClass(name=kueue.PROTECTED_PRIORITY_CLASS, value=1).full_clean()
    assert "minimum runtime" in str(err.value)
    with pytest.raises(ValidationError) as err:
        PriorityClass(name="long", value=1, checkpoint_grace_seconds=3601, minimum_runtime_seconds=-1).full_clean()
    assert set(err.value.message_dict) == {"checkpoint_grace_seconds", "minimum_runtime_seconds"}


def test_a_job_may_not_set_the_grace_variable_itself(h100):
    job = make_team("vision")
    with pytest.raises(ValidationError, match=f"{CHECKPOINT_GRACE_ENV} is set by the platform"):
        make_job(job, h100, env={CHECKPOINT_GRACE_ENV: "99999"})


def test_every_admission_starts_a_run(h100):
    job = job_in(make_team("vision"), h100, state=State.QUEUED)
    assert job.transition(State.ADMITTED, at=at(0)) and job.run_admitted_at == at(0)
    job.transition(State.RUNNING, at=at(1))
    job.transition(State.PREEMPTED, at=at(5))
    job.transition(State.QUEUED, at=at(6))
    job.transition(State.ADMITTED, at=at(9))
    job.refresh_from_db()
    assert (job.admitted_at, job.run_admitted_at) == (at(0), at(9))


# --- what Kueue and the pods say -----------------------------------------------------------------
EVICTED = {"type": "Evicted", "status": "True", "reason": "Preempted", "lastTransitionTime": "2026-11-03T14:10:00Z",
           "message": "Preempted to accommodate a higher priority Workload"}


def preempted_condition(workload_uid="wl-b", job_uid="job-b", reason="InClusterQueue"):
    return {"type": "Preempted", "status": "True", "reason": reason, "lastTransitionTime": "2026-11-03T14:10:00Z",
            "message": f"Preempted to accommodate a workload (UID: {workload_uid}, JobUID: {job_uid}) due to "
                       "prioritization in the ClusterQueue; preemptor path: /cq-b; preemptee path: /cq-a"}


@pytest.mark.parametrize("condition, expected", [
    (preempted_condition(), ("wl-b", "job-b", "InClusterQueue")),
    (preempted_condition("UNKNOWN", "UNKNOWN", "InCohortReclamation"), (None, None, "InCohortReclamation")),
    (EVICTED, (None, None, "Preempted")),
], ids=["names the preemptor", "says UNKNOWN", "an eviction alone"])
def test_kueue_names_the_preemptor_by_uid(condition, expected):
    found = kueue.preempted_by(condition, EVICTED)
    assert (found.by_workload_uid, found.by_job_uid, found.reason) == expected
    assert found.at == datetime(2026, 11, 3, 14, 10, tzinfo=UTC)


def pod(*messages, last=None) -> dict:
    statuses = [{"name": f"c{i}", "state": {"terminated": {"exitCode": 143, "message": m}}}
                for i, m in enumerate(messages)]
    if last:
        statuses.append({"name": "again", "state": {"running": {}}, "lastState": {"terminated": {"message": last}}})
    return {"status": {"containerStatuses": statuses}}


@pytest.mark.parametrize("pods, expected", [
    ([pod("checkpoint=2026-11-03T14:02:00Z\n")], datetime(2026, 11, 3, 14, 2, tzinfo=UTC)),
    ([pod("epoch 3\ncheckpoint=2026-11-03T15:02:00+01:00")], datetime(2026, 11, 3, 14, 2, tzinfo=UTC)),
    ([pod("checkpoint=2026-11-03T14:02:00Z"), pod("checkpoint=2026-11-03T14:05:00Z")],
     datetime(2026, 11, 3, 14, 5, tzinfo=UTC)),
    ([pod(last="checkpoint=2026-11-03T13:00:00Z")], datetime(2026, 11, 3, 13, 0, tzinfo=UTC)),
    ([pod("checkpoint=2026-11-03T14:02:00")], None),  # no zone: not sure which time it is
    ([pod("checkpoint=yesterday"), pod("")], None),
    ([{"status": {}}], None),
], ids=["utc", "another zone", "the latest of the workers", "a previous run", "no zone", "nonsense", "nothing"])
def test_the_last_checkpoint_comes_from_termination_messages(pods, expected):
    assert last_checkpoint(pods) == expected


# --- recording, once ---------------------------------------------------------------------------------
@pytest.fixture
def victim(h100, low):
    job = job_in(make_team("team-a"), h100, state=State.PREEMPTED, run_admitted_at=at(0), priority=low,
                 name="bert", workers=2, gpus_per_worker=4)
    # 8 GPUs from 13:00 until the preemption at 14:10
    GpuInterval.objects.create(job=job, team=job.team, flavor=h100, gpus=8, started_at=at(0), ended_at=at(70))
    return job


@pytest.fixture
def preemptor(h100, high):
    return job_in(make_team("team-b"), h100, state=State.RUNNING, run_admitted_at=at(70), priority=high,
                  name="llama-ft")


def test_lost_gpu_hours_run_from_the_start_of_the_run_and_are_charged_to_the_preemptor(victim, preemptor):
    p = Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor)
    assert (p.lost_gpu_hours, p.by_team, p.by_priority, p.run_started_at) == (
        Decimal("9.33"), preemptor.team, "high", at(0))  # 8 GPUs x 70 minutes


def test_a_preemption_seen_again_is_one_row_and_a_later_checkpoint_lowers_what_was_lost(victim, preemptor):
    Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor)
    Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor)  # the next reading
    p = Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor, checkpoint=at(62))
    assert Preemption.objects.count() == 1
    assert (p.checkpoint_at, p.lost_gpu_hours) == (at(62), Decimal("1.07"))  # 8 GPUs x 8 minutes
    older = Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor, checkpoint=at(30))
    assert (older.checkpoint_at, older.lost_gpu_hours) == (at(62), Decimal("1.07"))
    assert Preemption.objects.get().lost_gpu_hours == Decimal("1.07")


def test_a_checkpoint_taken_in_the_grace_loses_nothing(victim, preemptor):
    p = Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor, checkpoint=at(70.5))
    assert p.lost_gpu_hours == 0
    assert p.explanation() == ("Preempted by team-b's job llama-ft (priority high); nothing was lost since its last "
                               "checkpoint at 14:10.")


@pytest.mark.parametrize("checkpoint, by, expected", [
    (at(62), True, "Preempted by team-b's job llama-ft (priority high); 1.07 GPU-hours since its last checkpoint "
                   "at 14:02 are charged to team-b."),
    (None, True, "Preempted by team-b's job llama-ft (priority high); 9.33 GPU-hours since this run started at "
                 "13:00 are charged to team-b."),
    (None, False, "Preempted by a workload outside the platform (InCohortReclamation); 9.33 GPU-hours since this "
                  "run started at 13:00 are charged to no team."),
], ids=["after a checkpoint", "without one", "by a workload not ours"])
def test_the_victim_reads_who_preempted_it_and_who_pays(victim, preemptor, settings, checkpoint, by, expected):
    settings.TIME_ZONE = "UTC"
    p = Preemption.objects.record(victim, at=at(70), reason="InClusterQueue" if by else "InCohortReclamation",
                                  by_job=preemptor if by else None, checkpoint=checkpoint)
    assert p.explanation(tz=UTC) == expected


# --- the watcher -------------------------------------------------------------------------------------
def kueue_objects(job, uid: str, conditions=(), pods=()) -> list[tuple]:
    rendered = batch_job(render_job(job))
    name, namespace, labels = rendered["metadata"]["name"], job.team.namespace_name, rendered["metadata"]["labels"]
    return [
        (kueue.BATCH_JOB, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": name, "namespace": namespace, "uid": f"job-{uid}", "labels": labels}, "status": {}}),
        (kueue.WORKLOAD, {"apiVersion": kueue.API, "kind": "Workload", "metadata": {
            "name": f"job-{name}", "namespace": namespace, "uid": f"wl-{uid}",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"job-{uid}"}]},
            "status": {"conditions": list(conditions)}}),
        *((("v1", "Pod"), p) for p in pods),
    ]


def preempted_pod(job, message):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p0", "namespace": job.team.namespace_name, "uid": "pod-0",
        "labels": {JOB_LABEL: str(job.pk)}, "deletionTimestamp": "2026-11-03T14:10:01Z"},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running", "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": 0, "message": message}}}]}}


def watching(objects) -> StatusWatcher:
    watcher = StatusWatcher(cluster=None)
    for kind, obj in objects:
        watcher._record(kind, "ADDED", obj)
    return watcher


@pytest.fixture
def running_victim(h100, low):
    job = job_in(make_team("team-a"), h100, state=State.RUNNING, run_admitted_at=at(0), priority=low, name="bert",
                 workers=1, gpus_per_worker=8)
    Job.objects.filter(pk=job.pk).update(gpus_in_use=8, updated_at=at(1))
    GpuInterval.objects.create(job=job, team=job.team, flavor=h100, gpus=8, started_at=at(1))
    return Job.objects.get(pk=job.pk)


def test_the_watcher_records_a_preemption_once_names_the_preemptor_and_takes_the_checkpoint(
        running_victim, preemptor, settings):
    admitted = {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-03T13:00:00Z"}
    seen = (kueue_objects(running_victim, "a", [admitted, EVICTED, preempted_condition("wl-b", "job-b")])
            + kueue_objects(preemptor, "b"))
    watcher = watching(seen)
    watcher.evaluate([running_victim.pk])
    p = Preemption.objects.get()
    assert (p.job, p.by_job, p.by_team, p.checkpoint_at) == (running_victim, preemptor, preemptor.team, None)
    assert p.lost_gpu_hours == Decimal("9.20")  # 8 GPUs from 13:01 to 14:10
    # The pod ends after the grace with its checkpoint; a restarted watcher sees it all again.
    watcher = watching(seen + [(("v1", "Pod"), preempted_pod(running_victim, "checkpoint=2026-11-03T14:04:00Z"))])
    watcher.evaluate([running_victim.pk])
    watcher.evaluate([running_victim.pk])
    p = Preemption.objects.get()
    assert (p.checkpoint_at, p.lost_gpu_hours) == (at(64), Decimal("0.80"))


def test_a_recorded_preemption_costs_the_next_evaluations_no_query(
        preemptor, running_victim, django_assert_num_queries):
    seen = (kueue_objects(running_victim, "a", [EVICTED, preempted_condition("wl-b", "job-b")])
            + kueue_objects(preemptor, "b"))
    watcher = watching(seen)
    watcher.evaluate([running_victim.pk])
    assert Preemption.objects.get().by_job == preemptor
    with django_assert_num_queries(1):  # the job; the preemption is known (each resync of every live job)
        assert watcher.evaluate([running_victim.pk]) == 0


def test_a_preemption_kueue_undid_before_the_watcher_read_it_is_recorded_and_charged(running_victim, preemptor):
    # Under load Kueue evicts the job and admits it again before the watcher evaluates it: the
    # job never reads as preempted, yet the eviction its Workload's event showed is charged.
    readmitted = [{"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-03T14:10:05Z"},
                  {**EVICTED, "status": "False", "reason": "QuotaReserved", "lastTransitionTime": "2026-11-03T14:10:05Z"}]
    evicted_then = kueue_objects(running_victim, "a", [EVICTED, preempted_condition("wl-b", "job-b")])
    watcher = watching(evicted_then + kueue_objects(preemptor, "b"))
    watcher._record(kueue.WORKLOAD, "MODIFIED", {**evicted_then[1][1], "status": {"conditions": readmitted}})
    watcher.evaluate([running_victim.pk])
    p = Preemption.objects.get()
    assert (p.job, p.preempted_at, p.by_job, p.by_team) == (running_victim, at(70), preemptor, preemptor.team)
    assert p.lost_gpu_hours == Decimal("9.20")  # 8 GPUs from 13:01 to 14:10
    watcher.evaluate([running_victim.pk])
    assert Preemption.objects.count() == 1


def test_an_eviction_read_late_is_charged_only_what_its_own_run_held(victim, preemptor, h100):
    # Run 1 (13:00-14:10) was preempted and charged; run 2 (14:20-14:30) was evicted unread;
    # the job runs a third time since 14:40 when that eviction is recorded.
    Preemption.objects.record(victim, at=at(70), reason="InClusterQueue", by_job=preemptor)
    GpuInterval.objects.create(job=victim, team=victim.team, flavor=h100, gpus=8, started_at=at(80), ended_at=at(90))
    Job.objects.filter(pk=victim.pk).update(run_admitted_at=at(100))
    victim.refresh_from_db()
    p = Preemption.objects.record(victim, at=at(90), reason="InClusterQueue", by_job=preemptor)
    assert (p.run_started_at, p.lost_gpu_hours) == (at(70), Decimal("1.33"))  # 8 GPUs x 10 minutes, not run 1 again


def test_the_evictions_of_a_job_that_ended_are_forgotten(running_victim, preemptor):
    watcher = watching(kueue_objects(running_victim, "a", [EVICTED, preempted_condition("wl-b", "job-b")]))
    Job.objects.filter(pk=running_victim.pk).update(state=State.CANCELLED)
    watcher.evaluate([running_victim.pk])
    assert watcher._preemptions_due == {} and not Preemption.objects.exists()


def test_a_preemptor_known_only_by_its_workload_is_found_through_its_owner(running_victim, preemptor):
    seen = (kueue_objects(running_victim, "a", [EVICTED, preempted_condition("wl-b", "UNKNOWN")])
            + kueue_objects(preemptor, "b"))
    watching(seen).evaluate([running_victim.pk])
    assert Preemption.objects.get().by_job == preemptor


def test_a_preemptor_that_is_not_ours_is_charged_to_no_team(running_victim):
    watching(kueue_objects(running_victim, "a", [EVICTED, preempted_condition("wl-x", "job-x")])).evaluate(
        [running_victim.pk])
    assert (Preemption.objects.get().by_job, Preemption.objects.get().by_team) == (None, None)


def test_the_watcher_asks_for_a_reconcile_when_the_protection_starts_and_ends(running_victim, monkeypatch):
    asked = []
    monkeypatch.setattr("jobs.watch.watcher.reconcile_soon", lambda job: asked.append(job.pk))

    def fresh():
        return Job.objects.select_related("team", "flavor", "priority").get(pk=running_victim.pk)

    def admitted_minutes_ago(minutes):
        Job.objects.filter(pk=running_victim.pk).update(run_admitted_at=timezone.now() - timedelta(minutes=minutes))

    admitted_minutes_ago(20)
    own_class = kueue_objects(fresh(), "a", [{"type": "Admitted", "status": "True"}])
    assert own_class[0][1]["metadata"]["labels"][kueue.PRIORITY_LABEL] == "low"
    watcher = watching(own_class)
    watcher.evaluate([running_victim.pk])
    assert asked == []  # past its 15 minutes: its own class is right
    # Admitted again a minute ago: protected, the batch Job still under its own class.
    admitted_minutes_ago(1)
    watcher.evaluate([running_victim.pk])
    assert asked == [running_victim.pk]
    # The reconcile applied the protected label: nothing more to ask.
    protected = kueue_objects(fresh(), "a")[0][1]
    assert protected["metadata"]["labels"][kueue.PRIORITY_LABEL] == kueue.PROTECTED_PRIORITY_CLASS
    watcher._record(kueue.BATCH_JOB, "MODIFIED", protected)
    asked.clear()
    watcher.evaluate([running_victim.pk])
    assert asked == []
    # The minimum runtime (15 minutes) has passed: back to its own class.
    admitted_minutes_ago(16)
    watcher.evaluate([running_victim.pk])
    assert asked == [running_victim.pk]


def test_labels_found_in_place_are_not_rendered_again_until_the_protection_changes(running_victim, monkeypatch):
    asked = []
    monkeypatch.setattr("jobs.watch.watcher.reconcile_soon", lambda job: asked.append(job.pk))
    Job.objects.filter(pk=running_victim.pk).update(run_admitted_at=timezone.now() - timedelta(minutes=20))
    job = Job.objects.select_related("team", "flavor", "priority").get(pk=running_victim.pk)
    watcher = watching(kueue_objects(job, "a", [{"type": "Admitted", "status": "True"}]))
    watcher.evaluate([job.pk])
    with monkeypatch.context() as patched:  # each resync of every live job
        patched.setattr("jobs.status.render_job", lambda job: pytest.fail("rendered again"))
        watcher.evaluate([job.pk])
    Job.objects.filter(pk=job.pk).update(run_admitted_at=timezone.now())  # admitted again: protected
    watcher.evaluate([job.pk])
    assert asked == [job.pk]


def test_a_class_without_a_minimum_runtime_costs_the_watcher_no_render(h100, monkeypatch):
    job = job_in(make_team("team-a"), h100, state=State.RUNNING, run_admitted_at=at(0))
    monkeypatch.setattr("jobs.status.render_job", lambda job: pytest.fail("rendered"))
    watching(kueue_objects(job, "a", [{"type": "Admitted", "status": "True"}])).evaluate([job.pk])
