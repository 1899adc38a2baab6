"""Submitting and cancelling: the model rules, and the actions the web UI and the API both call."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from jobs import actions
from jobs.lifecycle import State
from jobs.models import Job

from ..builders import make_job

pytestmark = pytest.mark.django_db

FIELDS = dict(name="train", image="ghcr.io/x/train:1", command=["python"], args=["train.py"], workers=2,
              gpus_per_worker=4)


@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_submit_and_a_reconcile_is_scheduled(request, team, flavor, who, django_capture_on_commit_callbacks):
    person = request.getfixturevalue(who)
    with django_capture_on_commit_callbacks() as callbacks:
        job = actions.submit(team=team, submitter=person, flavor=flavor, **FIELDS)
    assert job.state == State.SUBMITTED and job.submitter == person
    assert len(callbacks) == 1  # the reconcile, sent only after the commit


@pytest.mark.parametrize("who", ["viewer", "outsider"])
def test_viewers_and_outsiders_cannot_submit(request, team, flavor, who):
    with pytest.raises(PermissionDenied):
        Job.objects.submit(team=team, submitter=request.getfixturevalue(who), flavor=flavor, **FIELDS)
    assert not Job.objects.exists()


def test_invalid_submissions_save_nothing(team, flavor, owner):
    with pytest.raises(ValidationError) as exc:
        Job.objects.submit(team=team, submitter=owner, flavor=flavor, **{**FIELDS, "gpus_per_worker": 9})
    assert "gpus_per_worker" in exc.value.message_dict
    assert not Job.objects.exists()


def test_cancelling_a_live_job_schedules_its_removal(team, flavor, member, django_capture_on_commit_callbacks):
    job = make_job(team, flavor)
    job.submit()
    with django_capture_on_commit_callbacks() as callbacks:
        assert actions.cancel(job, member) is True
    assert job.state == State.CANCELLING and "Cancelled by max" in job.message
    assert len(callbacks) == 1


def test_cancelling_a_draft_ends_it_at_once_with_nothing_to_remove(team, flavor, owner,
                                                                   django_capture_on_commit_callbacks):
    job = make_job(team, flavor)
    with django_capture_on_commit_callbacks() as callbacks:
        assert actions.cancel(job, owner)
    assert job.state == State.CANCELLED
    assert callbacks == []


def test_the_model_rules_never_enqueue(team, flavor, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        job = Job.objects.submit(team=team, submitter=owner, flavor=flavor, **FIELDS)
        job.request_cancel(owner)
    assert job.state == State.CANCELLING and callbacks == []


@pytest.mark.parametrize("who", ["viewer", "outsider"])
def test_viewers_and_outsiders_cannot_cancel(request, team, flavor, who):
    job = make_job(team, flavor)
    job.submit()
    with pytest.raises(PermissionDenied):
        job.request_cancel(request.getfixturevalue(who))
    job.refresh_from_db()
    assert job.state == State.SUBMITTED


def test_the_job_filter_offers_only_visible_teams(rf, team, flavor, outsider):
    from jobs.filters import JobFilter

    other = outsider.memberships.get().team
    make_job(team, flavor, name="mine")
    make_job(other, flavor, name="theirs")
    request = rf.get("/", {"team": "other-team"})
    request.user = outsider
    assert [j.name for j in JobFilter(request.GET, queryset=Job.objects.visible_to(outsider), request=request).qs] == ["theirs"]
    request = rf.get("/", {"team": "other-team"})
    request.user = team.memberships.get(role="owner").user
    filtered = JobFilter(request.GET, queryset=Job.objects.visible_to(request.user), request=request)
    assert not filtered.is_valid()  # another team's slug is not a choice for this person
    assert "team" in filtered.errors
