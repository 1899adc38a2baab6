"""The rules behind the job page's facts: how long a job waited and ran, the GPU-hours it held
(its GPU intervals, as the usage page counts them), and who may submit a draft."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import GpuInterval
from tenants.models import Membership

from ..builders import make_flavor, make_job, make_team, make_user

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)


@pytest.fixture
def job():
    return make_job(make_team("vision"), make_flavor("h100"), name="train", workers=2, gpus_per_worker=4)


def at(minutes):
    return T0 + timedelta(minutes=minutes)


def test_a_draft_has_neither_waited_nor_run(job):
    assert job.queue_wait() is None and job.run_time() is None and job.gpu_hours() == Decimal("0.00")


def test_a_waiting_job_has_waited_until_now(job):
    job.transition(State.SUBMITTED, at=at(0))
    assert job.queue_wait(now=at(7)) == timedelta(minutes=7) and job.run_time(now=at(7)) is None


def test_a_finished_job_waited_until_admitted_and_ran_until_it_ended(job):
    for minutes, state in ((0, State.SUBMITTED), (5, State.QUEUED), (12, State.ADMITTED), (13, State.RUNNING),
                           (73, State.SUCCEEDED)):
        job.transition(state, at=at(minutes))
    assert job.queue_wait(now=at(500)) == timedelta(minutes=12)
    assert job.run_time(now=at(500)) == timedelta(minutes=60)
    assert job.gpu_hours(now=at(500)) == Decimal("8.13")  # 8 GPUs held from admission (12) to the end (73)


def test_a_job_cancelled_in_the_queue_waited_until_it_ended(job):
    job.transition(State.SUBMITTED, at=at(0))
    job.transition(State.CANCELLING, at=at(3))
    job.transition(State.CANCELLED, at=at(4))
    assert job.queue_wait(now=at(100)) == timedelta(minutes=4) and job.run_time() is None


def test_gpu_hours_sum_every_interval_and_count_an_open_one_until_now(job):
    GpuInterval.objects.create(job=job, team=job.team, flavor=job.flavor, gpus=8, started_at=at(0), ended_at=at(30))
    GpuInterval.objects.create(job=job, team=job.team, flavor=job.flavor, gpus=4, started_at=at(60))
    assert job.gpu_hours(now=at(90)) == Decimal("6.00")  # 8 x 0.5 h + 4 x 0.5 h


def test_owners_and_members_submit_a_draft_and_viewers_may_not(job):
    owner, viewer = make_user("olivia"), make_user("vera")
    Membership.objects.create(team=job.team, user=owner, role=Membership.Role.OWNER)
    Membership.objects.create(team=job.team, user=viewer, role=Membership.Role.VIEWER)
    assert not job.can_submit_draft(viewer)
    with pytest.raises(PermissionDenied):
        job.submit_draft(viewer)
    assert job.can_submit_draft(owner) and job.submit_draft(owner)
    job.refresh_from_db()
    assert job.state == State.SUBMITTED and job.submitted_at is not None
    assert not job.can_submit_draft(owner)  # only a draft


def test_a_draft_is_checked_as_a_new_job_is(job):
    owner = make_user("olivia")
    Membership.objects.create(team=job.team, user=owner, role=Membership.Role.OWNER)
    job.gpus_per_worker = 16  # more than a node of the flavor has
    with pytest.raises(ValidationError) as raised:
        job.submit_draft(owner)
    assert "gpus_per_worker" in raised.value.message_dict
    job.refresh_from_db()
    assert job.state == State.DRAFT
