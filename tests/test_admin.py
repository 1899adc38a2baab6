"""The admin console: every changelist loads for a quota manager and is refused to researchers;
writes made there follow the same rules as the console's."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from jobs.tasks import reconcile_job
from quotas.models import Cohort, MemberCap, PriorityClass, Quota, QuotaGrant, TrainingRuntime
from tenants import tasks as team_tasks
from tenants.models import Team

from .builders import make_job, make_quota

pytestmark = pytest.mark.django_db

CHANGELISTS = [
    "tenants_team", "tenants_membership",
    "quotas_gpuflavor", "quotas_cohort", "quotas_quota", "quotas_priorityclass",
    "jobs_job", "jobs_jobevent", "quotas_membercap", "quotas_trainingruntime",
]


@pytest.fixture
def data(team, flavor):
    make_quota(team, flavor, cohort=Cohort.objects.create(name="research"))
    Team.objects.filter(pk=team.pk).update(max_priority_value=1000)
    team.refresh_from_db()
    job = make_job(team, flavor, priority=PriorityClass.objects.create(name="high", value=1000))
    job.submit()
    MemberCap.objects.create(team=team, flavor=flavor, user=None, max_gpus=8)
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


def test_a_first_grant_added_in_the_admin_keeps_the_quotas_numbers_as_a_standing_grant(client, quota_manager, team, flavor):
    quota = make_quota(team, flavor, nominal_gpus=8, cpu_cores=96, memory_gib=960)
    start = timezone.localtime() - timedelta(days=1)
    client.force_login(quota_manager)
    response = client.post(reverse("admin:quotas_quotagrant_add"), {
        "team": team.pk, "flavor": flavor.pk, "gpus": 4, "borrowing_limit_gpus": "", "cpu_cores": 48,
        "memory_gib": 480, "starts_at_0": start.date().isoformat(), "starts_at_1": start.strftime("%H:%M:%S"),
        "ends_at_0": "", "ends_at_1": "", "note": "Deadline push.", "granted_by": "",
    })
    assert response.status_code == 302
    standing = QuotaGrant.objects.get(team=team, flavor=flavor, gpus=8)
    assert (standing.cpu_cores, standing.memory_gib, standing.ends_at) == (96, 960, None)
    assert QuotaGrant.history.get(note="Deadline push.").history_user == quota_manager
    quota = Quota.objects.get(pk=quota.pk)
    assert (quota.nominal_gpus, quota.cpu_cores, quota.memory_gib) == (12, 144, 1440)


def offboard(client, team, **confirm):
    return client.post(reverse("admin:tenants_team_changelist"),
                       {"action": "offboard", "_selected_action": [team.pk], **confirm})


def test_offboarding_a_team_in_the_admin_asks_for_confirmation_first(client, quota_manager, team):
    client.force_login(quota_manager)
    response = offboard(client, team)
    assert response.status_code == 200 and b"This cannot be undone" in response.content
    assert b"team-vision" in response.content
    team.refresh_from_db()
    assert team.status == Team.Status.PENDING


def test_offboarding_a_team_in_the_admin_removes_its_objects_and_then_the_team(
    client, quota_manager, team, flavor, fake, monkeypatch, django_capture_on_commit_callbacks
):
    make_quota(team, flavor)
    job = make_job(team, flavor)
    job.submit()
    team_tasks.reconcile_team(team.pk)
    reconcile_job(job.pk)
    assert fake.stored(kind="Namespace") != []
    monkeypatch.setattr(team_tasks.reconcile_team, "delay", lambda pk: team_tasks.reconcile_team.apply(args=(pk,)))
    client.force_login(quota_manager)
    with django_capture_on_commit_callbacks(execute=True):
        response = offboard(client, team, post="yes")
    assert response.status_code == 302
    assert fake.stored() == []
    assert not Team.objects.filter(pk=team.pk).exists()
    [marked] = Team.history.filter(id=team.pk, status=Team.Status.DELETING, history_type="~")
    assert marked.history_user == quota_manager and marked.history_change_reason == "offboarding"


def test_deleting_a_team_in_the_admin_asks_first_and_says_it_offboards(client, quota_manager, team):
    client.force_login(quota_manager)
    response = client.get(reverse("admin:tenants_team_delete", args=[team.pk]))
    assert response.status_code == 200 and b"the namespace team-vision and everything in it" in response.content
    team.refresh_from_db()
    assert team.status == Team.Status.PENDING
    actions = client.get(reverse("admin:tenants_team_changelist")).context["action_form"].fields["action"].choices
    assert [name for name, _ in actions if name] == ["offboard"]  # the bulk delete, asking first


def test_a_cap_set_in_the_admin_is_saved_as_the_team_page_saves_it(
        client, quota_manager, team, flavor, member, monkeypatch, django_capture_on_commit_callbacks):
    released = []
    monkeypatch.setattr("jobs.tasks.release_at_cap.delay", lambda *args: released.append(args))
    client.force_login(quota_manager)
    form = {"team": team.pk, "flavor": flavor.pk, "user": member.pk, "max_gpus": 4, "max_jobs": ""}
    response = client.post(reverse("admin:quotas_membercap_add"), {**form, "max_gpus": -1})
    assert response.status_code == 200  # refused field by field, what was typed kept
    assert response.context["adminform"].form.errors["max_gpus"]
    assert response.context["adminform"].form["team"].value() == str(team.pk)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:quotas_membercap_add"), form)
    assert response.status_code == 302
    cap = MemberCap.objects.get(team=team, user=member)
    assert (cap.max_gpus, cap.set_by, cap.history.latest().history_user) == (4, quota_manager, quota_manager)
    assert released == [(team.pk,)]  # the jobs waiting at caps that fit now go at once
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:quotas_membercap_delete", args=[cap.pk]), {"post": "yes"})
    assert not MemberCap.objects.filter(pk=cap.pk).exists()
    assert released == [(team.pk,), (team.pk,)]


def test_the_runtimes_list_says_which_the_cluster_has(client, quota_manager):
    TrainingRuntime.objects.create(name="jax", label="JAX", installed=False)
    TrainingRuntime.objects.create(name="deepspeed", label="DeepSpeed", installed=True)
    client.force_login(quota_manager)
    page = client.get(reverse("admin:quotas_trainingruntime_changelist")).content.decode()
    assert "column-installed" in page
    rows = {name: page.split(f">{name}<", 1)[1].split("</tr>", 1)[0] for name in ("jax", "deepspeed",
                                                                                 "torch-distributed")}
    assert 'alt="False"' in rows["jax"] and 'alt="True"' in rows["deepspeed"]
    assert 'alt="None"' in rows["torch-distributed"]  # never checked
