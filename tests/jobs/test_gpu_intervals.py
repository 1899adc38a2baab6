"""GpuInterval: written by ``Job.transition`` as GPUs are taken and given back, and filled in
from the recorded events by migration 0005, both by the rule of ``admitted_intervals``; cut
where the watcher sees the count of the job's pods on nodes change (``jobs.models.intervals``)."""

import importlib
import random
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from jobs.lifecycle import TRANSITIONS, State
from jobs.models import GpuInterval, Job, JobEvent
from jobs.use.usage import admitted_intervals

from ..builders import make_job

pytestmark = pytest.mark.django_db

S = State
T0 = datetime(2026, 11, 5, 8, tzinfo=UTC)
migration = importlib.import_module("jobs.migrations.0005_gpu_intervals")
filled = importlib.import_module("jobs.migrations.0007_gpus_in_use")


def t(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def walk(job, steps):
    """``steps``: (state, hours after T0) walked through ``job.transition``."""
    for state, hours in steps:
        assert job.transition(state, reason=state.label, at=t(hours))
    return job


def intervals_of(job) -> list[tuple]:
    return list(GpuInterval.objects.filter(job=job).order_by("started_at", "id").values_list("started_at", "ended_at"))


# --- written by the transitions ---------------------------------------------------------------
def test_admission_opens_an_interval_and_the_end_closes_it(team, flavor, member):
    job = make_job(team, flavor, submitter=member, workers=2, gpus_per_worker=4)
    walk(job, [(S.SUBMITTED, 0), (S.QUEUED, 0.1), (S.ADMITTED, 1)])
    [interval] = GpuInterval.objects.filter(job=job)
    assert (interval.team, interval.flavor, interval.submitter, interval.gpus) == (team, flavor, member, 8)
    assert (interval.started_at, interval.ended_at) == (t(1), None)
    walk(job, [(S.RUNNING, 1.1)])  # still the same interval
    assert intervals_of(job) == [(t(1), None)]
    walk(job, [(S.SUCCEEDED, 3)])
    assert intervals_of(job) == [(t(1), t(3))]


def test_preempted_requeued_and_admitted_again_makes_two_intervals(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [
        (S.SUBMITTED, 0), (S.QUEUED, 0), (S.ADMITTED, 1), (S.RUNNING, 1), (S.PREEMPTED, 2), (S.QUEUED, 2.1),
        (S.ADMITTED, 4), (S.RUNNING, 4.1), (S.FAILED, 5)])
    assert intervals_of(job) == [(t(1), t(2)), (t(4), t(5))]


def test_preempted_straight_back_to_admitted(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [
        (S.SUBMITTED, 0), (S.ADMITTED, 1), (S.PREEMPTED, 2), (S.ADMITTED, 2), (S.SUCCEEDED, 3)])
    assert intervals_of(job) == [(t(1), t(2)), (t(2), t(3))]


def test_a_job_cancelled_while_running_holds_its_gpus_until_it_is_gone(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [
        (S.SUBMITTED, 0), (S.ADMITTED, 1), (S.RUNNING, 1), (S.CANCELLING, 2)])
    assert intervals_of(job) == [(t(1), None)]
    walk(job, [(S.CANCELLED, 2.5)])
    assert intervals_of(job) == [(t(1), t(2.5))]


def test_a_job_never_admitted_has_no_interval(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [
        (S.SUBMITTED, 0), (S.QUEUED, 1), (S.CANCELLING, 2), (S.CANCELLED, 3)])
    other = walk(make_job(team, flavor, submitter=member), [(S.SUBMITTED, 0), (S.QUEUED, 1), (S.FAILED, 2)])
    assert intervals_of(job) == [] and intervals_of(other) == []


def server(team, flavor, member):
    """An inference server of 1-3 replicas of 2 GPUs each."""
    return make_job(team, flavor, submitter=member, kind="inference", port=8000, min_replicas=1, max_replicas=3,
                    gpus_per_worker=2)


def held(job) -> list[tuple]:
    return list(GpuInterval.objects.filter(job=job).order_by("started_at", "id")
                .values_list("gpus", "started_at", "ended_at"))


def test_inference_admitted_before_anything_is_counted_holds_its_minimum_replicas_not_its_maximum(
        team, flavor, member):
    job = walk(server(team, flavor, member), [(S.SUBMITTED, 0), (S.ADMITTED, 1)])
    assert held(job) == [(2, t(1), None)]
    assert Job.objects.get(pk=job.pk).gpus_in_use == job.gpus_in_use == 2


def test_the_replicas_placed_are_what_a_server_holds_and_each_change_starts_an_interval(team, flavor, member):
    job = walk(server(team, flavor, member), [(S.SUBMITTED, 0), (S.QUEUED, 0)])
    assert job.observe(S.RUNNING, reason="Serving", message="1 replica ready.", gpus=2)
    [(gpus, started, ended)] = held(job)
    assert (gpus, ended) == (2, None)
    assert job.observe(S.RUNNING, reason="Serving", message="1 replica ready.", gpus=4)  # the HPA adds one
    assert not job.observe(S.RUNNING, reason="Serving", message="1 replica ready.", gpus=4)  # nothing new
    assert [(g, e is None) for g, _, e in held(job)] == [(2, False), (4, True)]
    assert job.observe(S.RUNNING, reason="Serving", message="2 replicas ready.", gpus=2)  # and takes it back
    assert [g for g, _, _ in held(job)] == [2, 4, 2]
    assert Job.objects.get(pk=job.pk).gpus_in_use == 2
    assert job.observe(S.SUCCEEDED, reason="Completed", message="", gpus=0)
    assert GpuInterval.objects.filter(job=job, ended_at__isnull=True).count() == 0
    assert Job.objects.get(pk=job.pk).gpus_in_use == 0


def test_a_gang_let_into_its_queue_with_no_pod_on_a_node_holds_nothing_until_its_pods_are_placed(
        team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member, workers=4, gpus_per_worker=2), [(S.SUBMITTED, 0)])
    assert job.observe(S.ADMITTED, reason="WaitingForResources", message="no room", gpus=0)
    assert held(job) == [] and job.gpus_in_use == 0
    assert job.observe(S.RUNNING, reason="Running", message="", gpus=8)
    assert [g for g, _, _ in held(job)] == [8]


def test_a_count_the_watcher_did_not_take_keeps_what_the_job_holds(team, flavor, member):
    job = walk(server(team, flavor, member), [(S.SUBMITTED, 0), (S.ADMITTED, 1)])
    assert job.observe(S.RUNNING, reason="Serving", message="", gpus=None)
    assert held(job) == [(2, t(1), None)]


def test_a_cancelled_server_gives_its_gpus_back_as_its_pods_go(team, flavor, member):
    job = walk(server(team, flavor, member), [(S.SUBMITTED, 0), (S.ADMITTED, 1)])
    assert job.observe(S.RUNNING, reason="Serving", message="", gpus=6)
    walk(job, [(S.CANCELLING, 2)])
    assert job.observe(S.RUNNING, reason="Serving", message="", gpus=2)  # two replicas gone, one still stopping
    assert (job.state, [g for g, _, _ in held(job)]) == (S.CANCELLING, [2, 6, 2])
    walk(job, [(S.CANCELLED, 3)])
    assert GpuInterval.objects.filter(job=job, ended_at__isnull=True).count() == 0


def test_a_job_cancelled_while_waiting_holds_nothing_whatever_pods_are_seen(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [(S.SUBMITTED, 0), (S.QUEUED, 0), (S.CANCELLING, 1)])
    assert not job.observe(S.QUEUED, reason="Queued", message="", gpus=1)
    assert held(job) == []


def test_a_job_cancelled_while_waiting_holds_a_pod_placed_after_the_cancel_until_it_goes(team, flavor, member):
    job = walk(server(team, flavor, member), [(S.SUBMITTED, 0), (S.QUEUED, 0), (S.CANCELLING, 1)])
    assert job.observe(S.RUNNING, reason="Serving", message="", gpus=2, at=t(2))  # the scheduler placed it
    assert job.give_back(0, at=t(3))  # its workload deleted, the pod gone after it
    assert held(job) == [(2, t(2), t(3))]
    assert job.state == S.CANCELLING and job.gave_back_at() == t(3)


def test_the_loser_of_a_race_opens_nothing(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [(S.SUBMITTED, 0), (S.QUEUED, 0)])
    stale = Job.objects.get(pk=job.pk)
    walk(job, [(S.ADMITTED, 1)])
    assert stale.transition(S.ADMITTED, at=t(2)) is False
    assert intervals_of(job) == [(t(1), None)]


def test_steps_the_watcher_missed_open_the_interval_on_the_way(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [(S.SUBMITTED, 0), (S.QUEUED, 0)])
    assert job.observe(S.RUNNING, reason="Running", message="")
    assert GpuInterval.objects.filter(job=job, ended_at__isnull=True).count() == 1


def test_notes_change_no_interval(team, flavor, member):
    job = walk(make_job(team, flavor, submitter=member), [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.RUNNING, 1)])
    job.note("ImagePullSlow", "pulling")
    assert intervals_of(job) == [(t(1), None)]


def test_intervals_agree_with_the_replay_of_the_events(team, flavor, member):
    """Whatever path a job takes, what the transitions wrote is the replay of its events."""
    rng = random.Random(7)
    until = t(10_000)
    for _ in range(40):
        job = make_job(team, flavor, submitter=member)
        hours = 0.0
        while targets := sorted(TRANSITIONS[job.state]):
            hours += rng.choice([0, 0.25, 1, 3])
            assert job.transition(rng.choice(targets), at=t(hours))
        events = list(job.events.order_by("created_at", "id").values_list("created_at", "to_state"))
        assert intervals_of(job) == [(a, None if b == until else b) for a, b in admitted_intervals(events, until)]


# --- filled in by the migration -----------------------------------------------------------------
HISTORIES = [
    [(S.SUBMITTED, 0), (S.QUEUED, 1), (S.ADMITTED, 2), (S.RUNNING, 2), (S.SUCCEEDED, 5)],
    [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.PREEMPTED, 3), (S.QUEUED, 4), (S.ADMITTED, 6), (S.FAILED, 7)],
    [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.RUNNING, 2)],  # still running
    [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.PREEMPTED, 2), (S.ADMITTED, 2), (S.SUCCEEDED, 4)],
    [(S.SUBMITTED, 1), (S.QUEUED, 2), (S.CANCELLING, 3), (S.CANCELLED, 4)],  # never admitted
    [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.RUNNING, 1), (S.CANCELLING, 2), (S.CANCELLED, 2.5)],
    [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.RUNNING, 1), (S.CANCELLING, 2)],  # still cancelling
    [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.RUNNING, 1), (S.RUNNING, 1.5), (S.PREEMPTED, 2), (S.PREEMPTED, 2.5)],  # notes
    [(S.SUBMITTED, 0), (S.QUEUED, 0)],
    [],
]


def record(job, steps):
    """The events alone, as an older version (or the bench's seed) recorded them."""
    state = S.DRAFT
    for to_state, hours in steps:
        JobEvent.objects.create(job=job, created_at=t(hours), from_state=state, to_state=to_state)
        state = to_state
    Job.objects.filter(pk=job.pk).update(state=state)


def test_the_backfill_replays_the_events_as_the_report_did(team, flavor, member, monkeypatch):
    monkeypatch.setattr(migration, "BATCH", 3)  # jobs in several batches
    jobs = []
    for index, steps in enumerate(HISTORIES * 2):
        job = make_job(team, flavor, submitter=member if index % 2 else None, workers=1 + index % 3,
                       gpus_per_worker=2)
        record(job, steps)
        jobs.append(job)
    GpuInterval.objects.all().delete()
    migration.backfill(apps, SimpleNamespace(connection=connection))
    until = t(1000)
    for job in jobs:
        events = list(job.events.order_by("created_at", "id").values_list("created_at", "to_state"))
        expected = [(a, None if b == until else b) for a, b in admitted_intervals(events, until)]
        assert intervals_of(job) == expected, job.events.all()
        assert set(GpuInterval.objects.filter(job=job).values_list("team", "flavor", "submitter", "gpus")) <= {
            (team.pk, flavor.pk, job.submitter_id, job.total_gpus)}
    assert GpuInterval.objects.count() == 2 * sum(
        len(admitted_intervals([(t(h), s) for s, h in steps], until)) for steps in HISTORIES)


def test_the_backfill_of_an_empty_database_writes_nothing(db):
    migration.backfill(apps, SimpleNamespace(connection=connection))
    assert not GpuInterval.objects.exists()


def test_migration_0006_takes_what_each_job_holds_from_its_open_interval(team, flavor, member):
    holding = walk(make_job(team, flavor, submitter=member, workers=2, gpus_per_worker=3),
                   [(S.SUBMITTED, 0), (S.ADMITTED, 1)])
    ended = walk(make_job(team, flavor, submitter=member), [(S.SUBMITTED, 0), (S.ADMITTED, 1), (S.SUCCEEDED, 2)])
    Job.objects.update(gpus_in_use=0)  # as the column is added
    filled.fill(apps, SimpleNamespace(connection=connection))
    assert dict(Job.objects.values_list("pk", "gpus_in_use")) == {holding.pk: 6, ended.pk: 0}
