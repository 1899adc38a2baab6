"""A job's timeline and GPU-hours follow the cluster's clock: a step the watcher reads late
(it was restarting, the API server was down) is recorded when the cluster says it happened,
never before what the row last recorded and never after it was read; and the event keeps when
the platform wrote it down (the status lag)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import GpuInterval, JobEvent
from workloads import Phase
from workloads.kueue import observe_training as observe_kueue
from workloads.volcano import observe_training as observe_volcano

from ..builders import make_job

pytestmark = pytest.mark.django_db


def stamp(at) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind, at, reason=""):
    return {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": stamp(at)}


def queued_job(team, flavor, member):
    job = make_job(team, flavor, submitter=member, workers=2, gpus_per_worker=4)
    assert job.submit() and job.transition(State.QUEUED, reason="Queued")
    return job


def steps(job) -> list[tuple[str, object, object]]:
    return list(JobEvent.objects.filter(job=job).order_by("created_at", "id")
                .values_list("to_state", "created_at", "recorded_at"))


def test_kueue_says_when_it_admitted_and_when_the_job_ended():
    t0 = timezone.now().replace(microsecond=0)
    job = type("J", (), {"workers": 2})()
    admitted = cond("Admitted", t0)
    seen = observe_kueue(job, {"status": {"conditions": [admitted]}}, {"status": {"ready": 1}})
    assert (seen.state, seen.times) == (Phase.ADMITTED, {Phase.ADMITTED: t0})
    done = cond("Complete", t0 + timedelta(minutes=5))
    seen = observe_kueue(job, {"status": {"conditions": [admitted]}}, {"status": {"conditions": [done]}})
    assert (seen.state, seen.times) == (Phase.SUCCEEDED, {Phase.ADMITTED: t0, Phase.SUCCEEDED: t0 + timedelta(minutes=5)})
    evicted = cond("Evicted", t0 + timedelta(minutes=2), reason="Preempted")
    seen = observe_kueue(job, {"status": {"conditions": [evicted]}}, None)
    assert (seen.state, seen.times) == (Phase.PREEMPTED, {Phase.PREEMPTED: t0 + timedelta(minutes=2)})


def test_volcano_says_when_the_job_entered_its_phase():
    t0 = timezone.now().replace(microsecond=0)
    vcjob = {"status": {"state": {"phase": "Completed", "lastTransitionTime": stamp(t0)}}}
    seen = observe_volcano(type("J", (), {"workers": 2})(), vcjob, None)
    assert (seen.state, seen.times) == (Phase.SUCCEEDED, {Phase.SUCCEEDED: t0})


def test_a_finish_read_late_is_charged_until_the_cluster_says_it_ended(team, flavor, member):
    job = queued_job(team, flavor, member)
    t0 = job.updated_at
    admitted, ended = t0 + timedelta(seconds=10), t0 + timedelta(seconds=100)
    assert job.observe(State.ADMITTED, reason="Admitted", message="", gpus=8, at=admitted + timedelta(seconds=2),
                       times={Phase.ADMITTED: admitted})
    # The watcher was down when the job ended; it reads the end 30 s late.
    assert job.observe(State.SUCCEEDED, reason="Completed", message="", gpus=0, at=ended + timedelta(seconds=30),
                       times={Phase.ADMITTED: admitted, Phase.SUCCEEDED: ended})
    assert [(state, at) for state, at, _ in steps(job)][-2:] == [(State.ADMITTED, admitted), (State.SUCCEEDED, ended)]
    assert (job.admitted_at, job.finished_at) == (admitted, ended)
    [interval] = GpuInterval.objects.filter(job=job)
    assert (interval.started_at, interval.ended_at, interval.gpus) == (admitted, ended, 8)


def test_steps_the_watcher_missed_take_the_cluster_times(team, flavor, member):
    job = queued_job(team, flavor, member)
    admitted, ended = job.updated_at + timedelta(seconds=10), job.updated_at + timedelta(seconds=100)
    assert job.observe(State.SUCCEEDED, reason="Completed", message="", gpus=0, at=ended + timedelta(seconds=30),
                       times={Phase.ADMITTED: admitted, Phase.SUCCEEDED: ended})
    assert [(state, at) for state, at, _ in steps(job)][-2:] == [(State.ADMITTED, admitted), (State.SUCCEEDED, ended)]


def test_the_cluster_clock_never_moves_a_step_before_the_last_one_nor_after_the_read(team, flavor, member):
    job = queued_job(team, flavor, member)
    t0 = job.updated_at
    # Skewed clocks: an admission "before" the queueing the row recorded, an end "after" the read.
    read = t0 + timedelta(seconds=60)
    assert job.observe(State.SUCCEEDED, reason="Completed", message="", gpus=0, at=read,
                       times={Phase.ADMITTED: t0 - timedelta(hours=1), Phase.SUCCEEDED: read + timedelta(hours=1)})
    times = [at for _, at, _ in steps(job)]
    assert times == sorted(times)
    assert (job.admitted_at, job.finished_at) == (t0, read)


def test_a_step_without_a_time_is_no_later_than_the_next_one_the_cluster_dates(team, flavor, member):
    job = queued_job(team, flavor, member)
    evicted = job.updated_at + timedelta(seconds=50)
    # Admitted and evicted between two reads: Kueue dates only the eviction now.
    assert job.observe(State.PREEMPTED, reason="Preempted", message="", gpus=0, at=evicted + timedelta(seconds=30),
                       times={Phase.PREEMPTED: evicted})
    assert [(state, at) for state, at, _ in steps(job)][-2:] == [(State.ADMITTED, evicted), (State.PREEMPTED, evicted)]


def test_without_a_cluster_time_a_step_is_recorded_when_read(team, flavor, member):
    job = queued_job(team, flavor, member)
    before = timezone.now()
    assert job.observe(State.ADMITTED, reason="Admitted", message="", gpus=8)
    assert job.admitted_at >= before


def test_the_event_keeps_when_it_was_written_down(team, flavor, member):
    job = queued_job(team, flavor, member)
    happened = job.updated_at + timedelta(seconds=1)
    written_after = timezone.now()
    assert job.observe(State.ADMITTED, reason="Admitted", message="", gpus=8,
                       at=happened + timedelta(seconds=20), times={Phase.ADMITTED: happened})
    state, created_at, recorded_at = steps(job)[-1]
    assert (state, created_at) == (State.ADMITTED, happened)
    assert recorded_at >= written_after
