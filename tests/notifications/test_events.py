"""Each event worth telling is recorded once, with one notification per person who wants
it: job started, succeeded, failed, preempted, cancelled, waiting long or never starting;
quota request decided; grant started, ending, ended; member added or removed."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.models import Job
from notifications.actions import notice_due, record
from notifications.models import Event, Kind, Notification, Preference
from quotas import actions as quota_actions
from quotas.models import QuotaRequest
from tenants.forms import MemberForm

from ..builders import make_job, make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def a_job(people, **fields):
    job = make_job(people["team"], people["flavor"], submitter=people["member"], **fields)
    job.submit()
    return job


def told(kind, user=None):
    rows = Notification.objects.filter(event__kind=kind)
    return rows.filter(user=user).count() if user else rows.count()


def test_a_job_that_succeeds_tells_its_submitter_once(people):
    job = a_job(people)
    assert job.observe(Job.State.RUNNING, reason="Running", message="All workers are running.")
    assert job.observe(Job.State.SUCCEEDED, reason="Completed", message="All workers finished successfully.")
    [event] = Event.objects.filter(kind=Kind.JOB_SUCCEEDED)
    assert event.title == f"vision/{job.name} succeeded" and event.path == f"/jobs/{job.pk}/"
    assert event.data["job"]["state"] == "succeeded" and event.data["team"] == "vision"
    assert told(Kind.JOB_SUCCEEDED, people["member"]) == 1
    assert Notification.objects.count() == 1  # started is off by default; owners hear nothing of it
    # The watcher reading the same state again (a restart, a resync) changes nothing.
    assert not job.observe(Job.State.SUCCEEDED, reason="Completed", message="All workers finished successfully.")
    assert Event.objects.filter(kind=Kind.JOB_SUCCEEDED).count() == 1


def test_a_job_that_starts_tells_those_who_asked(people):
    Preference.objects.choose(people["member"], Kind.JOB_STARTED, True)
    job = a_job(people)
    job.observe(Job.State.RUNNING, reason="Running", message="All workers are running.")
    assert told(Kind.JOB_STARTED, people["member"]) == 1
    assert Event.objects.get(kind=Kind.JOB_STARTED).title == f"vision/{job.name} started"


def test_a_failed_job_says_why(people):
    job = a_job(people)
    job.observe(Job.State.FAILED, reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit")
    event = Event.objects.get(kind=Kind.JOB_FAILED)
    assert event.title == f"vision/{job.name} failed (BackoffLimitExceeded)"
    assert event.message == "Job has reached the specified backoff limit"
    assert told(Kind.JOB_FAILED, people["member"]) == 1


def test_a_preempted_job_says_by_what_each_time(people):
    Preference.objects.choose(people["member"], Kind.JOB_PREEMPTED, True)
    job = a_job(people)
    said = "Preempted by a higher-priority job in the cohort; it will run again when GPUs free up."
    job.observe(Job.State.RUNNING, reason="Running", message="")
    job.observe(Job.State.PREEMPTED, reason="Preempted", message=said)
    job.observe(Job.State.PREEMPTED, reason="Preempted", message=said)
    assert [e.message for e in Event.objects.filter(kind=Kind.JOB_PREEMPTED)] == [said]
    job.observe(Job.State.RUNNING, reason="Running", message="")
    job.observe(Job.State.PREEMPTED, reason="Preempted", message=said)
    assert told(Kind.JOB_PREEMPTED, people["member"]) == 2  # two preemptions, two words


def test_a_cancelled_job_is_told_when_it_ends(people):
    Preference.objects.choose(people["member"], Kind.JOB_CANCELLED, True)
    job = a_job(people)
    job.request_cancel(people["owner"])
    assert not Event.objects.filter(kind=Kind.JOB_CANCELLED).exists()  # still cancelling
    job.transition(Job.State.CANCELLED, reason="Cancelled", message="Stopped and removed from the cluster.")
    assert Event.objects.get(kind=Kind.JOB_CANCELLED).title == f"vision/{job.name} was cancelled"
    assert told(Kind.JOB_CANCELLED, people["member"]) == 1


def test_a_job_that_can_never_start_is_told_at_once_and_only_once(people):
    Preference.objects.choose(people["member"], Kind.JOB_WAITING, True)
    job = a_job(people, workers=3, gpus_per_worker=8)
    never = "Can never start: this job needs 24 h100 GPUs but team vision can use at most 16, borrowing included."
    job.observe(Job.State.QUEUED, reason="Pending", message="Waiting for quota.")
    job.observe(Job.State.QUEUED, reason="Pending", message=never)  # same state, new reason
    event = Event.objects.get(kind=Kind.JOB_WAITING)
    assert event.title == f"vision/{job.name} can never start" and event.message == never
    job.observe(Job.State.QUEUED, reason="Pending", message="Waiting for quota.")
    job.observe(Job.State.QUEUED, reason="Pending", message=never)
    notice_due(timezone_now(job, hours=5))  # the threshold passes: the same stretch, no second word
    assert told(Kind.JOB_WAITING, people["member"]) == 1


def timezone_now(job, hours):
    return job.submitted_at + timedelta(hours=hours)


def test_a_job_waiting_longer_than_the_threshold_is_told_with_its_reason(people, settings):
    settings.NOTIFY_WAITING_AFTER_MINUTES = 60
    Preference.objects.choose(people["member"], Kind.JOB_WAITING, True)
    job = a_job(people)
    job.observe(Job.State.QUEUED, reason="Pending", message="Waiting for quota: 4 more must free up.")
    notice_due(job.submitted_at + timedelta(minutes=59))
    assert not Event.objects.filter(kind=Kind.JOB_WAITING).exists()
    notice_due(job.submitted_at + timedelta(minutes=61))
    notice_due(job.submitted_at + timedelta(minutes=90))
    event = Event.objects.get(kind=Kind.JOB_WAITING)
    assert event.title == f"vision/{job.name} has waited 1 h 1 min"
    assert event.message == "Waiting for quota: 4 more must free up."
    assert told(Kind.JOB_WAITING, people["member"]) == 1


def test_recording_the_same_key_twice_records_once(people):
    first = record(kind=Kind.JOB_FAILED, key="k1", team=people["team"], title="t", people=[people["member"]])
    again = record(kind=Kind.JOB_FAILED, key="k1", team=people["team"], title="t", people=[people["member"]])
    assert first is not None and again is None
    assert Notification.objects.count() == 1


def test_people_without_an_address_or_who_said_no_hear_nothing(people):
    Preference.objects.choose(people["member"], Kind.JOB_FAILED, False)
    nobody = make_user("noaddress")
    record(kind=Kind.JOB_FAILED, key="k2", team=people["team"], title="t", people=[people["member"], nobody])
    assert Notification.objects.count() == 0


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_decided_quota_request_tells_whoever_asked_and_the_owners(people, decision):
    quinn = make_user("quinn", quota_manager=True)
    for person in (people["owner"],):
        Preference.objects.choose(person, Kind.QUOTA_REQUEST_DECIDED, True)
    request = QuotaRequest.objects.submit(team=people["team"], requested_by=people["owner"], flavor=people["flavor"],
                                          gpus=8, starts_on=T0.date(), ends_on=None, justification="LLM pretraining")
    assert not Event.objects.filter(kind=Kind.QUOTA_REQUEST_DECIDED).exists()
    if decision == "approve":
        quota_actions.approve(request, quinn, gpus=8, borrowing_limit_gpus=None, starts_on=T0.date(),
                              ends_on=None, cpu_cores=96, memory_gib=960)
    else:
        request.deny(quinn, "No capacity this quarter.")
    event = Event.objects.get(kind=Kind.QUOTA_REQUEST_DECIDED)
    said = "approved" if decision == "approve" else "denied"
    assert event.title == f"vision: your request for +8 h100 GPUs was {said}"
    assert event.data["quota_request"]["status"] == ("approved" if decision == "approve" else "denied")
    assert told(Kind.QUOTA_REQUEST_DECIDED, people["owner"]) == 1
    assert Notification.objects.filter(event=event).count() == 1


def test_grants_that_start_end_soon_and_end_tell_the_owners_once_each(people, settings):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    quinn = make_user("quinn", quota_manager=True)
    for kind in (Kind.GRANT_STARTED, Kind.GRANT_ENDED):
        Preference.objects.choose(people["owner"], kind, True)
    grant = quota_actions.grant(team=people["team"], flavor=people["flavor"], gpus=8, cpu_cores=0, memory_gib=0,
                                starts_at=T0, ends_at=T0 + timedelta(days=10), granted_by=quinn, now=T0)
    notice_due(T0 - timedelta(hours=1))
    assert not Event.objects.exists()
    for moment in (T0 + timedelta(minutes=5), T0 + timedelta(minutes=10)):
        notice_due(moment)
    assert list(Event.objects.values_list("kind", flat=True)) == [Kind.GRANT_STARTED]
    notice_due(T0 + timedelta(days=4))
    notice_due(T0 + timedelta(days=5))
    assert Event.objects.filter(kind=Kind.GRANT_ENDING).count() == 1
    notice_due(T0 + timedelta(days=10, minutes=1))
    notice_due(T0 + timedelta(days=10, minutes=2))
    assert Event.objects.get(kind=Kind.GRANT_ENDED).data["grant"]["id"] == grant.pk
    for kind in (Kind.GRANT_STARTED, Kind.GRANT_ENDING, Kind.GRANT_ENDED):
        assert told(kind, people["owner"]) == 1 and told(kind) == 1  # owners only


def test_members_added_and_removed_tell_the_person_and_the_owners(people, inline):
    for person in (people["owner"],):
        for kind in (Kind.MEMBER_ADDED, Kind.MEMBER_REMOVED):
            Preference.objects.choose(person, kind, True)
    newcomer = make_user("nina", email="nina@example.org")
    Preference.objects.choose(newcomer, Kind.MEMBER_ADDED, True)
    with inline["commit"]():
        form = MemberForm({"username": "nina", "role": "member"}, team=people["team"])
        assert form.is_valid(), form.errors
        membership = form.save()
    event = Event.objects.get(kind=Kind.MEMBER_ADDED)
    assert event.title == "nina joined vision as member"
    assert set(Notification.objects.filter(event=event).values_list("user__username", flat=True)) == {"olivia", "nina"}
    with inline["commit"]():
        membership.remove()
    assert Event.objects.get(kind=Kind.MEMBER_REMOVED).title == "nina left vision"
    assert told(Kind.MEMBER_REMOVED, people["owner"]) == 1


def test_telling_of_a_move_costs_the_watcher_no_read_of_the_job_or_the_event(people):
    """The watcher's job (team, flavor and submitter joined) moving to running: the job and
    its event are written, the notification inserted without reading either back first."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    Preference.objects.choose(people["member"], Kind.JOB_STARTED, True)
    job = a_job(people)
    job.transition(Job.State.QUEUED, reason="Queued")
    job = Job.objects.select_related("team", "flavor", "submitter").get(pk=job.pk)
    with CaptureQueriesContext(connection) as queries:
        assert job.observe(Job.State.RUNNING, reason="Running", message="All workers are running.")
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
    assert not [q for q in reads if 'FROM "jobs_job"' in q or 'FROM "notifications_event"' in q], reads
    assert len(reads) == 2, reads  # who wants it by email, the team's webhooks
    event = Event.objects.get(kind=Kind.JOB_STARTED)
    assert event.data["job"] | {"id": None} == {
        "id": None, "name": job.name, "kind": "training", "state": "running", "reason": "Running",
        "message": "All workers are running.", "flavor": "h100", "submitter": people["member"].username}
    assert told(Kind.JOB_STARTED, people["member"]) == 1


def test_recording_the_same_happening_twice_records_it_once(people):
    first = record(kind=Kind.JOB_FAILED, key="same-key", team=people["team"], title="once", people=[people["member"]])
    again = record(kind=Kind.JOB_FAILED, key="same-key", team=people["team"], title="twice", people=[people["member"]])
    assert first is not None and again is None
    assert list(Event.objects.filter(key="same-key").values_list("title", flat=True)) == ["once"]
    assert told(Kind.JOB_FAILED, people["member"]) == 1
