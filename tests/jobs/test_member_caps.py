"""Per-person caps inside a team (issue 34 item 4, docs/caps.md): a job over its submitter's
cap waits with the reason (on the cluster behind the platform's admission gate where its kind
carries one: tests/jobs/test_admission_gates.py); what "hold" counts; the job goes ahead by itself
when the person's other jobs end (the on-commit trigger and the sweep's reconcile); the cap
holds on every way in and under two submissions at once."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections, transaction

from jobs import actions
from jobs.lifecycle import AT_PERSONAL_CAP, State
from jobs.models import Job
from jobs.queue.caps import RELEASED
from jobs.tasks import reconcile_job, release_at_cap
from jobs.use.usage import usage_of
from quotas.models import MemberCap, PriorityClass
from workloads import gates as gates_module

from ..builders import make_flavor, make_job, make_quota
from ..locks import waits_for_a_lock

pytestmark = pytest.mark.django_db


@pytest.fixture
def cap(team, flavor, member):
    """The member may hold 8 h100 GPUs at once."""
    return MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)


def submit(team, flavor, who, name, gpus=4, workers=1, **fields) -> Job:
    return Job.objects.submit(team=team, submitter=who, flavor=flavor, name=name, image="ghcr.io/x/train:1",
                              workers=workers, gpus_per_worker=gpus, **fields)


@pytest.fixture
def tasks_here(monkeypatch):
    """Celery's messages run here: the release at once, the reconciles it sends recorded."""
    sent = []
    monkeypatch.setattr("jobs.tasks.reconcile_job.delay", lambda pk: sent.append(pk))
    monkeypatch.setattr("jobs.tasks.release_at_cap.delay", lambda *args: release_at_cap(*args))
    return sent


def move(job, *states):
    for state in states:
        assert job.transition(state, reason=State(state).label)


def test_a_job_over_the_cap_waits_with_the_reason_and_is_in_no_queue(cap, team, flavor, member):
    make_quota(team, flavor, nominal_gpus=64)
    first, second = submit(team, flavor, member, "first", 4), submit(team, flavor, member, "second", 4)
    third = submit(team, flavor, member, "third", 4)
    assert [j.reason for j in (first, second)] == ["Submitted", "Submitted"]
    assert third.state == State.SUBMITTED and third.reason == AT_PERSONAL_CAP
    assert third.message == ("You hold 8 of your 8 h100 GPUs in team vision; this job needs 4. "
                             "It starts by itself when enough of your other h100 jobs end.")
    assert third.at_personal_cap and third.get_state_display() == "At cap"
    assert third.queue_position() is None  # in no scheduler's queue, so ahead of nobody either
    assert first.queue_position() == 0 and second.queue_position() == 1
    assert usage_of(team, flavor).queued == 2  # not queued demand of the team either
    assert list(third.events.values_list("reason", flat=True)) == [AT_PERSONAL_CAP]


def test_a_waiting_job_is_created_behind_the_platforms_admission_gate(fake, cap, team, flavor, member):
    make_quota(team, flavor, nominal_gpus=64)
    held = submit(team, flavor, member, "big-one", 8)
    waiting = submit(team, flavor, member, "waits", 1)
    reconcile_job(held.pk)
    reconcile_job(waiting.pk)
    gates = {o["metadata"]["name"].split("-")[0]: (o["metadata"].get("annotations") or {}).get(gates_module.ANNOTATION)
             for o in fake.list("batch/v1", "Job", namespace=team.namespace_name)}
    assert gates == {"big": None, "waits": gates_module.MEMBER_CAP}
    waiting.refresh_from_db()
    assert waiting.state == State.SUBMITTED and waiting.reason == AT_PERSONAL_CAP


def test_a_job_bigger_than_the_cap_alone_is_refused_with_a_field_error(cap, team, flavor, member):
    with pytest.raises(ValidationError) as refused, transaction.atomic():
        submit(team, flavor, member, "huge", 4, workers=3)
    assert refused.value.message_dict == {"gpus_per_worker": [
        "This job needs 12 h100 GPUs at once, more than your cap of 8 in team vision. Make it smaller, "
        "or ask an owner of the team to raise the cap."]}
    assert not Job.objects.exists()


def test_the_cap_is_per_person_and_per_flavor(cap, team, flavor, member, owner):
    other = make_flavor("a100")
    submit(team, flavor, member, "mine", 8)
    assert submit(team, other, member, "other-flavor", 8).reason == "Submitted"
    assert submit(team, flavor, owner, "teammate", 8).reason == "Submitted"  # no cap of the owner's
    assert submit(team, flavor, member, "over", 1).reason == AT_PERSONAL_CAP


def test_the_team_default_holds_everyone_owners_included_and_a_persons_own_cap_replaces_it(team, flavor, owner,
                                                                                         member):
    MemberCap.objects.create(team=team, flavor=flavor, user=None, max_gpus=4)
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=12)
    submit(team, flavor, owner, "owners-first", 4)
    assert submit(team, flavor, owner, "owners-second", 1).reason == AT_PERSONAL_CAP
    submit(team, flavor, member, "members-first", 8)
    assert submit(team, flavor, member, "members-second", 4).reason == "Submitted"
    assert submit(team, flavor, member, "members-third", 1).reason == AT_PERSONAL_CAP


def test_the_live_jobs_cap_holds_too(team, flavor, member):
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=100, max_jobs=2)
    submit(team, flavor, member, "one", 1)
    submit(team, flavor, member, "two", 1)
    third = submit(team, flavor, member, "three", 1)
    assert third.reason == AT_PERSONAL_CAP
    assert third.message == ("You have 2 of your 2 h100 jobs on the cluster in team vision. "
                             "This one starts by itself when one of them ends.")


@pytest.mark.parametrize("states, holds", [
    ((), True),  # submitted and let go: about to be created
    ((State.QUEUED,), True),  # created: in Kueue's queue, admitted as soon as the team's quota allows
    ((State.QUEUED, State.ADMITTED), True),
    ((State.QUEUED, State.ADMITTED, State.RUNNING), True),
    ((State.QUEUED, State.ADMITTED, State.RUNNING, State.PREEMPTED), True),  # requeued, still on the cluster
    ((State.QUEUED, State.CANCELLING), True),  # its pods are still there until removed
    ((State.QUEUED, State.ADMITTED, State.RUNNING, State.SUCCEEDED), False),
    ((State.QUEUED, State.FAILED), False),
    ((State.CANCELLING, State.CANCELLED), False),
], ids=["submitted", "queued", "admitted", "running", "preempted", "cancelling", "succeeded", "failed", "cancelled"])
def test_what_a_person_holds(cap, team, flavor, member, states, holds):
    job = submit(team, flavor, member, "counted", 8)
    move(job, *states)
    assert Job.objects.held_by(team.pk, member.pk, flavor.pk) == ((8, 1) if holds else (0, 0))


def test_drafts_and_jobs_waiting_at_the_cap_hold_nothing(cap, team, flavor, member):
    make_job(team, flavor, name="draft", submitter=member, gpus_per_worker=8)
    submit(team, flavor, member, "held", 8)
    assert submit(team, flavor, member, "waits", 8).at_personal_cap
    assert Job.objects.held_by(team.pk, member.pk, flavor.pk) == (8, 1)


def test_an_inference_server_counts_its_most_replicas(cap, team, flavor, member):
    server = Job.objects.submit(team=team, submitter=member, flavor=flavor, name="serve", kind="inference",
                                image="ghcr.io/x/serve:1", gpus_per_worker=2, port=8000, min_replicas=1,
                                max_replicas=3)
    assert Job.objects.held_by(team.pk, member.pk, flavor.pk) == (6, 1)
    assert submit(team, flavor, member, "train", 4).at_personal_cap
    with pytest.raises(ValidationError) as refused, transaction.atomic():
        Job.objects.submit(team=team, submitter=member, flavor=flavor, name="wide", kind="inference",
                           image="ghcr.io/x/serve:1", gpus_per_worker=2, port=8000, min_replicas=1, max_replicas=5)
    assert list(refused.value.message_dict) == ["max_replicas"]
    assert server.reason == "Submitted"


def test_a_draft_sent_on_is_held_to_the_cap(cap, team, flavor, member):
    submit(team, flavor, member, "running", 8)
    draft = make_job(team, flavor, name="draft", submitter=member, gpus_per_worker=2)
    assert draft.submit_draft(member)
    draft.refresh_from_db()
    assert draft.at_personal_cap


def test_when_the_persons_job_ends_the_waiting_one_goes_ahead_on_commit(cap, team, flavor, member, tasks_here,
                                                                       django_capture_on_commit_callbacks):
    running = submit(team, flavor, member, "running", 8)
    move(running, State.QUEUED, State.ADMITTED, State.RUNNING)
    waiting = submit(team, flavor, member, "waiting", 8)
    with django_capture_on_commit_callbacks(execute=True):
        move(running, State.SUCCEEDED)
    waiting.refresh_from_db()
    assert (waiting.state, waiting.reason, waiting.message) == (State.SUBMITTED, RELEASED["reason"],
                                                                RELEASED["message"])
    assert tasks_here == [waiting.pk]  # and reconciled: created on the cluster now
    assert waiting.events.filter(reason="UnderPersonalCap").exists()


def test_a_teammates_job_ending_lets_nothing_of_the_person_go(cap, team, flavor, member, owner,
                                                             django_capture_on_commit_callbacks):
    submit(team, flavor, member, "running", 8)
    waiting = submit(team, flavor, member, "waiting", 8)
    theirs = submit(team, flavor, owner, "theirs", 8)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        move(theirs, State.CANCELLING, State.CANCELLED)
    assert callbacks == []  # nobody of the owner's waits: no task at all
    waiting.refresh_from_db()
    assert waiting.at_personal_cap


def test_the_sweeps_reconcile_lets_a_waiting_job_go_and_creates_it(fake, cap, team, flavor, member):
    make_quota(team, flavor, nominal_gpus=64)
    running = submit(team, flavor, member, "running", 8)
    waiting = submit(team, flavor, member, "waiting", 8)
    Job.objects.filter(pk=running.pk).update(state=State.SUCCEEDED)  # ended behind the trigger's back
    reconcile_job(waiting.pk)
    waiting.refresh_from_db()
    assert waiting.state == State.QUEUED
    assert any(o["metadata"]["name"].startswith("waiting")
               for o in fake.list("batch/v1", "Job", namespace=team.namespace_name))


def test_jobs_are_let_go_by_priority_then_age_and_a_big_one_does_not_block_a_small_one(cap, team, flavor, member):
    high = PriorityClass.objects.create(name="high", value=0)
    low = PriorityClass.objects.create(name="low", value=-10)
    running = submit(team, flavor, member, "running", 8)
    old_low = submit(team, flavor, member, "old-low", 4, priority=low)
    new_high = submit(team, flavor, member, "new-high", 2, priority=high)
    big = submit(team, flavor, member, "big", 8, priority=high)
    small = submit(team, flavor, member, "small", 2, priority=low)
    Job.objects.filter(pk=running.pk).update(state=State.SUCCEEDED)
    assert Job.objects.release_at_cap(team.pk, member.pk, flavor.pk) == [new_high.pk, old_low.pk, small.pk]
    big.refresh_from_db()
    assert big.at_personal_cap
    assert big.message.startswith("You hold 8 of your 8 h100 GPUs")  # brought up to date


def test_raising_a_cap_lets_the_waiting_jobs_go(cap, team, flavor, member, tasks_here,
                                               django_capture_on_commit_callbacks):
    submit(team, flavor, member, "running", 8)
    waiting = submit(team, flavor, member, "waiting", 8)
    cap.max_gpus = 16
    with django_capture_on_commit_callbacks(execute=True):
        cap.save()
        actions.caps_changed(team)
    assert tasks_here == [waiting.pk]
    assert release_at_cap(team.pk) == 0  # nothing left waiting


def test_a_removed_cap_lets_everything_go(cap, team, flavor, member):
    submit(team, flavor, member, "running", 8)
    waiting = submit(team, flavor, member, "waiting", 8)
    cap.delete()
    assert release_at_cap(team.pk) == 1
    waiting.refresh_from_db()
    assert not waiting.at_personal_cap


def test_a_cancelled_waiting_job_is_never_created(fake, cap, team, flavor, member):
    submit(team, flavor, member, "running", 8)
    waiting = submit(team, flavor, member, "waiting", 8)
    assert waiting.request_cancel(member)
    reconcile_job(waiting.pk)
    waiting.refresh_from_db()
    assert waiting.state == State.CANCELLED
    assert not fake.list("batch/v1", "Job", namespace=team.namespace_name)


@pytest.mark.django_db(transaction=True)
def test_two_submissions_at_once_cannot_both_take_the_persons_last_gpus(team, flavor, member, monkeypatch):
    """The first holds the team's row between its count and its insert; the second waits on that
    lock (seen in pg_stat_activity), then counts the first's job and waits at the cap."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    go, first_counted = threading.Event(), threading.Event()
    save_submitted = Job.save_submitted

    def held_open(job, because=None):  # the first pauses after its count, inside its transaction
        if job.name == "first":
            first_counted.set()
            assert go.wait(60)
        save_submitted(job, because)

    monkeypatch.setattr(Job, "save_submitted", held_open)

    def run(name):
        try:
            submit(team, flavor, member, name, 8)
        finally:
            connections.close_all()

    first = threading.Thread(target=run, args=("first",))
    first.start()
    assert first_counted.wait(60)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    waited = waits_for_a_lock(second)
    go.set()
    first.join(60)
    second.join(60)
    assert waited, "the second submission did not wait for the first's lock"
    reasons = dict(Job.objects.values_list("name", "reason"))
    assert reasons == {"first": "Submitted", "second": AT_PERSONAL_CAP}


@pytest.mark.django_db(transaction=True)
def test_two_releases_at_once_let_go_only_what_fits(team, flavor, member, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    running = submit(team, flavor, member, "running", 8)
    submit(team, flavor, member, "a", 8)
    submit(team, flavor, member, "b", 8)
    Job.objects.filter(pk=running.pk).update(state=State.SUCCEEDED)
    results = []

    def run():
        try:
            results.append(Job.objects.release_at_cap(team.pk, member.pk, flavor.pk))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(len(r) for r in results) == [0, 1]
    assert Job.objects.at_cap().count() == 1
