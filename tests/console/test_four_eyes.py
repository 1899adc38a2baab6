"""Quota decisions need four eyes: a quota manager never decides a request she filed or one
for a team she is in, never grants GPUs to (or sets the quota of) such a team in the admin,
and adding herself to a team does not get her around it."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from quotas import actions
from quotas.models import Quota, QuotaGrant, QuotaRequest
from tenants.models import Membership

from ..builders import make_quota, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_manager(db):
    return make_user("ruth", quota_manager=True)


@pytest.fixture
def own_request(team, flavor, quota_manager):
    """The attack: a quota manager made herself an owner of the team and asked for GPUs."""
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.OWNER)
    return ask(team, flavor, quota_manager)


def ask(team, flavor, who) -> QuotaRequest:
    today = timezone.localdate()
    return QuotaRequest.objects.submit(team=team, requested_by=who, flavor=flavor, gpus=64, starts_on=today,
                                       ends_on=today + timedelta(days=30), justification="Mine.")


def approve_data():
    today = timezone.localdate()
    return {"gpus": 64, "borrowing_limit_gpus": "", "cpu_cores": 96, "memory_gib": 960,
            "starts_on": today.isoformat(), "ends_on": "", "reason": "Looks fine to me."}


def test_manager_cannot_approve_own_request(client_for, quota_manager, own_request, enqueued):
    response = client_for(quota_manager).post(reverse("console:approve", args=[own_request.pk]), approve_data())
    assert response.status_code == 403
    own_request.refresh_from_db()
    assert own_request.status == QuotaRequest.Status.PENDING
    assert not QuotaGrant.objects.exists() and enqueued == []


def test_manager_cannot_deny_own_request(client_for, quota_manager, own_request):
    response = client_for(quota_manager).post(reverse("console:deny", args=[own_request.pk]), {"reason": "Hmm."})
    assert response.status_code == 403
    own_request.refresh_from_db()
    assert own_request.status == QuotaRequest.Status.PENDING


@pytest.mark.parametrize("role", ["owner", "member", "viewer"])
def test_manager_cannot_decide_a_request_of_a_team_she_is_in(team, flavor, owner, quota_manager, role, enqueued):
    Membership.objects.create(team=team, user=quota_manager, role=role)
    request = ask(team, flavor, owner)  # filed by someone else
    with pytest.raises(PermissionDenied, match="another quota manager"):
        actions.approve(request, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                        ends_on=None, cpu_cores=1, memory_gib=1)
    with pytest.raises(PermissionDenied):
        request.deny(quota_manager, "No.")
    assert QuotaRequest.objects.get(pk=request.pk).status == QuotaRequest.Status.PENDING


def test_manager_who_adds_herself_as_owner_cannot_decide_that_teams_requests(
    client_for, team, flavor, owner, quota_manager, enqueued,
):
    request = ask(team, flavor, owner)
    response = client_for(quota_manager).post(reverse("console:member-add", args=[team.slug]),
                                              {"username": quota_manager.username, "role": "owner"})
    assert response.status_code == 302  # managers run memberships...
    response = client_for(quota_manager).post(reverse("console:approve", args=[request.pk]), approve_data())
    assert response.status_code == 403  # ...but then leave this team's requests to another manager
    assert QuotaRequest.objects.get(pk=request.pk).status == QuotaRequest.Status.PENDING


def test_another_manager_decides_the_managers_own_request(client_for, second_manager, own_request, enqueued):
    response = client_for(second_manager).post(reverse("console:approve", args=[own_request.pk]), approve_data())
    assert response.status_code == 302
    own_request.refresh_from_db()
    assert own_request.status == QuotaRequest.Status.APPROVED and own_request.decided_by == second_manager


def test_the_request_page_says_why_she_cannot_decide(client_for, quota_manager, own_request):
    html = client_for(quota_manager).get(reverse("console:request", args=[own_request.pk])).content.decode()
    assert "You filed this request; another quota manager decides it." in html
    assert 'action="%s"' % reverse("console:approve", args=[own_request.pk]) not in html


def test_manager_cannot_grant_gpus_to_her_own_team_in_the_admin(client, team, flavor, quota_manager, enqueued):
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.MEMBER)
    client.force_login(quota_manager)
    now = timezone.localtime()
    response = client.post(reverse("admin:quotas_quotagrant_add"), {
        "team": team.pk, "flavor": flavor.pk, "gpus": 64, "borrowing_limit_gpus": "", "cpu_cores": 0,
        "memory_gib": 0, "starts_at_0": now.date().isoformat(), "starts_at_1": "00:00:00",
        "ends_at_0": "", "ends_at_1": "", "note": "",
    })
    assert response.status_code == 200 and b"another quota manager" in response.content
    assert not QuotaGrant.objects.exists()
    with pytest.raises(PermissionDenied):  # the model holds the rule for every other way in
        actions.grant(team=team, flavor=flavor, gpus=64, starts_at=timezone.now(), granted_by=quota_manager)


def test_manager_cannot_raise_her_own_teams_quota_in_the_admin(client, team, flavor, quota_manager):
    quota = make_quota(team, flavor, nominal_gpus=8)
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.OWNER)
    client.force_login(quota_manager)
    response = client.post(reverse("admin:quotas_quota_change", args=[quota.pk]), {
        "team": team.pk, "flavor": flavor.pk, "nominal_gpus": 512, "cpu_cores": 96, "memory_gib": 1024, "weight": 1,
    })
    assert response.status_code == 403
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 8
    inline = client.get(reverse("admin:tenants_team_change", args=[team.pk])).context["inline_admin_formsets"]
    [quotas] = [f for f in inline if f.opts.model is Quota]
    assert not quotas.has_change_permission and not quotas.has_add_permission


def test_a_manager_outside_the_team_still_runs_its_quota_in_the_admin(client, team, flavor, quota_manager):
    quota = make_quota(team, flavor, nominal_gpus=8)
    client.force_login(quota_manager)
    response = client.post(reverse("admin:quotas_quota_change", args=[quota.pk]), {
        "team": team.pk, "flavor": flavor.pk, "nominal_gpus": 16, "cpu_cores": 96, "memory_gib": 1024, "weight": 1,
    })
    assert response.status_code == 302
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16
