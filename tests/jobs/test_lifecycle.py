"""State changes are compare-and-swap updates that record an event and stamp timestamps."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.lifecycle import TRANSITIONS, InvalidTransition, State
from jobs.models import Job, JobEvent

from ..builders import make_job

pytestmark = pytest.mark.django_db


def test_a_new_job_is_a_draft(team, flavor):
    assert make_job(team, flavor).state == State.DRAFT


def test_transition_records_an_event_with_reason(team, flavor):
    job = make_job(team, flavor)
    assert job.submit() is True
    assert job.transition(State.QUEUED, reason="WaitingForQuota", message="vision uses 8 of 8 H100 GPUs")
    job.refresh_from_db()
    assert (job.state, job.reason, job.message) == ("queued", "WaitingForQuota", "vision uses 8 of 8 H100 GPUs")
    assert list(job.events.values_list("from_state", "to_state", "reason")) == [
        ("draft", "submitted", "Submitted"),
        ("submitted", "queued", "WaitingForQuota"),
    ]


def test_a_submission_is_stored_as_submit_would_leave_a_draft_in_one_insert(team, flavor, member):
    """`Job.objects.submit` inserts the job as submitted: the same row and event that saving
    a draft and calling `submit()` give, without the draft's UPDATE."""
    twin = make_job(team, flavor, name="twin")
    twin.submit()
    twin.refresh_from_db()
    with CaptureQueriesContext(connection) as queries:
        job = Job.objects.submit(team=team, submitter=member, flavor=flavor, name="direct", image=twin.image)
    writes = [q["sql"].split()[0] for q in queries.captured_queries if '"jobs_job"' in q["sql"].split(" WHERE ")[0]]
    # The live-name check, the team's live jobs counted once its row is locked
    # (MAX_LIVE_JOBS_PER_TEAM), then the one write of the job.
    assert writes == ["SELECT", "SELECT", "INSERT"]
    job.refresh_from_db()
    assert (job.state, job.reason, job.message) == (twin.state, twin.reason, twin.message) == (
        "submitted", "Submitted", "Waiting for the cluster.")
    assert job.submitted_at is not None and job.admitted_at is None
    event = job.events.get()
    assert (event.from_state, event.to_state, event.reason, event.message) == (
        "draft", "submitted", "Submitted", "Waiting for the cluster.")
    assert event.created_at == job.submitted_at
    assert list(twin.events.values_list("from_state", "to_state", "reason", "message")) == [
        (event.from_state, event.to_state, event.reason, event.message)]


def test_save_submitted_refuses_a_stored_job(team, flavor):
    job = make_job(team, flavor)
    with pytest.raises(ValueError, match="new job"):
        job.save_submitted()
    job.refresh_from_db()
    assert job.state == State.DRAFT and not job.events.exists()


def test_happy_path_stamps_each_timestamp_once(team, flavor):
    job = make_job(team, flavor)
    for target in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.SUCCEEDED):
        assert job.transition(target)
    job.refresh_from_db()
    assert job.submitted_at <= job.admitted_at <= job.started_at <= job.finished_at
    assert job.events.count() == 5
    assert job.is_final


def test_preemption_goes_back_to_the_queue_and_keeps_first_admission(team, flavor):
    job = make_job(team, flavor)
    for target in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        job.transition(target)
    first_admitted = job.admitted_at
    job.transition(State.PREEMPTED, reason="Preempted", message="Preempted by a higher-priority job in cohort research")
    job.transition(State.QUEUED)
    job.transition(State.ADMITTED)
    job.refresh_from_db()
    assert job.state == State.ADMITTED
    assert job.admitted_at == first_admitted
    assert [e.to_state for e in job.events.all()][-3:] == ["preempted", "queued", "admitted"]


def test_cancelling_ends_in_cancelled(team, flavor):
    job = make_job(team, flavor)
    job.submit()
    job.transition(State.CANCELLING, reason="CancelRequested")
    job.transition(State.CANCELLED)
    assert job.is_final and job.finished_at is not None


@pytest.mark.parametrize(
    "current, target",
    [
        (State.SUCCEEDED, State.RUNNING),
        (State.FAILED, State.QUEUED),
        (State.CANCELLED, State.SUBMITTED),
        (State.DRAFT, State.RUNNING),
        (State.QUEUED, State.SUCCEEDED),
        (State.CANCELLING, State.RUNNING),
    ],
)
def test_forbidden_moves_raise_and_change_nothing(team, flavor, current, target):
    job = make_job(team, flavor)
    Job.objects.filter(pk=job.pk).update(state=current)
    job.refresh_from_db()
    with pytest.raises(InvalidTransition, match=f"A {current} job cannot become {target}"):
        job.transition(target)
    job.refresh_from_db()
    assert job.state == current
    assert not job.events.exists()


def test_final_states_have_no_way_out():
    assert all(not TRANSITIONS[s] for s in (State.SUCCEEDED, State.FAILED, State.CANCELLED))
    assert set(TRANSITIONS) == set(State)


def test_a_stale_instance_loses_and_writes_no_event(team, flavor):
    job = make_job(team, flavor)
    stale = Job.objects.get(pk=job.pk)
    assert job.submit() is True
    assert stale.submit() is False
    assert stale.state == State.DRAFT  # the loser's instance is untouched
    assert JobEvent.objects.filter(job=job).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_transitions_from_the_same_state_only_one_wins(team, flavor):
    """Eight threads, each with its own connection and instance, race queued -> admitted."""
    if connection.vendor != "postgresql":
        pytest.skip("needs a database with row locks and real concurrency")
    job = make_job(team, flavor)
    job.submit()
    job.transition(State.QUEUED)
    contenders = 8
    barrier = threading.Barrier(contenders)
    results: list[bool] = []

    def race():
        from django.db import connections

        mine = Job.objects.get(pk=job.pk)
        barrier.wait()
        try:
            results.append(mine.transition(State.ADMITTED, reason=f"worker-{threading.get_ident()}"))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=race) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [False] * (contenders - 1) + [True]
    assert JobEvent.objects.filter(job=job, to_state=State.ADMITTED).count() == 1
    job.refresh_from_db()
    assert job.state == State.ADMITTED


def test_a_cancel_is_not_lost_when_the_watcher_moves_the_row_between_read_and_write(team, flavor):
    from tenants.models import Membership

    from ..builders import make_user

    owner = make_user("racer")
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    job = make_job(team, flavor)
    job.submit()
    stale = Job.objects.get(pk=job.pk)  # read while submitted...
    Job.objects.get(pk=job.pk).observe(State.QUEUED, reason="Queued", message="")  # ...the watcher moves it on
    assert stale.request_cancel(owner)
    assert Job.objects.get(pk=job.pk).state == State.CANCELLING
