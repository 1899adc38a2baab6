"""The admin console: every changelist loads for a quota manager and is refused to researchers."""

import pytest
from django.urls import reverse

from jobs.models import Job
from quotas.models import Cohort, PriorityClass

from .builders import make_job, make_quota

pytestmark = pytest.mark.django_db

CHANGELISTS = [
    "tenants_team", "tenants_membership",
    "quotas_gpuflavor", "quotas_cohort", "quotas_quota", "quotas_priorityclass",
    "jobs_job", "jobs_jobevent",
]


@pytest.fixture
def data(team, flavor):
    make_quota(team, flavor, cohort=Cohort.objects.create(name="research"))
    job = make_job(team, flavor, priority=PriorityClass.objects.create(name="high", value=1000))
    job.submit()
    return job


@pytest.mark.parametrize("name", CHANGELISTS)
def test_quota_manager_sees_every_changelist(client, quota_manager, data, name):
    client.force_login(quota_manager)
    response = client.get(reverse(f"admin:{name}_changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count >= 1


@pytest.mark.parametrize("name", CHANGELISTS)
def test_researcher_is_sent_to_login(client, owner, data, name):
    client.force_login(owner)
    response = client.get(reverse(f"admin:{name}_changelist"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("admin:login"))


def test_team_page_shows_member_and_quota_inlines(client, quota_manager, team, data):
    client.force_login(quota_manager)
    response = client.get(reverse("admin:tenants_team_change", args=[team.pk]))
    assert response.status_code == 200
    inline_models = {formset.opts.model.__name__ for formset in response.context["inline_admin_formsets"]}
    assert inline_models == {"Membership", "Quota"}
    assert b"team-vision" in response.content


def test_job_page_shows_events_read_only(client, quota_manager, data):
    client.force_login(quota_manager)
    response = client.get(reverse("admin:jobs_job_change", args=[data.pk]))
    assert response.status_code == 200
    [events] = response.context["inline_admin_formsets"]
    assert events.has_add_permission is False and events.has_change_permission is False
    assert b"Waiting for the cluster." in response.content


def test_quota_manager_cannot_edit_jobs(client, quota_manager, data):
    client.force_login(quota_manager)
    response = client.post(reverse("admin:jobs_job_change", args=[data.pk]), {"name": "renamed"})
    assert response.status_code == 403
    assert Job.objects.get(pk=data.pk).name == data.name


def test_quota_manager_can_search_jobs_by_team(client, quota_manager, data):
    client.force_login(quota_manager)
    response = client.get(reverse("admin:jobs_job_changelist"), {"q": "vision"})
    assert response.context["cl"].result_count == 1
    response = client.get(reverse("admin:jobs_job_changelist"), {"q": "no-such-team"})
    assert response.context["cl"].result_count == 0
