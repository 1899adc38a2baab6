"""The job page's idle-GPU banner (when it will be reclaimed, why reclaim is paused, an
exemption) and the exemption form, as owner, member and outsider."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import dateformat, timezone

from jobs.lifecycle import State
from jobs.models import IdleWatch, JobEvent
from jobs.models.idle import EXEMPTED
from quotas.models import IdlePolicy

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def policy(settings):
    settings.IDLE_GPU_THRESHOLD_PERCENT, settings.IDLE_GPU_AFTER_SECONDS, settings.IDLE_GPU_GRACE_SECONDS = 5, 600, 300


def detail(job):
    return reverse("jobs:detail", args=[job.pk])


def exempt(job):
    return reverse("jobs:exempt_idle", args=[job.pk])


def warned(job) -> IdleWatch:
    now = timezone.now()
    return IdleWatch.objects.create(job=job, warned_at=now, grace_from=now, reclaim_at=now + timedelta(minutes=5),
                                    idle_seconds=600, checked_at=now)


def test_a_warned_job_says_when_it_will_be_reclaimed_and_the_owner_may_exempt_it(client_for, owner, running_job):
    watch = warned(running_job)
    html = client_for(owner).get(detail(running_job)).content.decode()
    assert "This job's GPUs sit idle." in html
    assert f'It will be reclaimed at <time datetime="{dateformat.format(timezone.localtime(watch.reclaim_at), "c")}"' in html
    assert exempt(running_job) in html


def test_a_member_sees_the_warning_but_no_exemption_form(client_for, member, running_job):
    warned(running_job)
    html = client_for(member).get(detail(running_job)).content.decode()
    assert "It will be reclaimed at" in html and exempt(running_job) not in html


def test_a_paused_job_says_why(client_for, owner, running_job):
    IdleWatch.objects.create(job=running_job, paused_reason="Prometheus at http://p:9090 cannot be reached.")
    html = client_for(owner).get(detail(running_job)).content.decode()
    assert "Idle-GPU reclaim is paused for this job: Prometheus at http://p:9090 cannot be reached." in html


def test_the_owner_exempts_with_a_reason_kept_on_the_timeline(client_for, owner, running_job):
    warned(running_job)
    response = client_for(owner).post(exempt(running_job), {"reason": "Waiting on a dataset copy."})
    assert response.status_code == 302
    watch = IdleWatch.objects.get(job=running_job)
    assert watch.exempt_reason == "Waiting on a dataset copy." and watch.exempted_by == owner and not watch.is_warned
    assert JobEvent.objects.filter(job=running_job, reason=EXEMPTED).exists()
    html = client_for(owner).get(detail(running_job)).content.decode()
    assert "Exempt from idle-GPU reclaim by olivia: Waiting on a dataset copy." in html


def test_an_empty_reason_exempts_nothing_and_says_why(client_for, owner, running_job):
    warned(running_job)
    response = client_for(owner).post(exempt(running_job), {"reason": " "}, follow=True)
    assert "Say why this job may keep idle GPUs." in response.content.decode()
    assert not IdleWatch.objects.get(job=running_job).is_exempt


def test_a_member_cannot_exempt(client_for, member, running_job):
    warned(running_job)
    assert client_for(member).post(exempt(running_job), {"reason": "mine"}).status_code == 403
    assert not IdleWatch.objects.get(job=running_job).is_exempt


def test_an_outsider_learns_nothing(client_for, outsider, running_job):
    assert client_for(outsider).post(exempt(running_job), {"reason": "x"}).status_code == 404
    assert not IdleWatch.objects.filter(job=running_job).exists()


def test_owners_cannot_exempt_where_the_team_policy_says_no(client_for, owner, running_job):
    IdlePolicy.objects.create(flavor=running_job.flavor, team=running_job.team, owners_may_exempt=False)
    warned(running_job)
    assert exempt(running_job) not in client_for(owner).get(detail(running_job)).content.decode()
    assert client_for(owner).post(exempt(running_job), {"reason": "x"}).status_code == 403


def test_a_reclaimed_job_says_what_it_gave_back(client_for, owner, running_job):
    watch = warned(running_job)
    running_job.refresh_from_db()
    assert watch.reclaimed(running_job, timezone.now(), threshold=5)
    running_job.refresh_from_db()
    assert running_job.state == State.RECLAIMED
    html = client_for(owner).get(detail(running_job)).content.decode()
    assert "its GPUs sat idle (0.67 idle GPU-hours given back)" in html  # 4 GPUs for 600 s
    assert "state-reclaimed" in html
