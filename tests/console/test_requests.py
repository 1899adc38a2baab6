"""Quota requests: owners ask, quota managers approve (possibly changed) or deny with a
reason, everyone in the team reads the decision. Every role is tried."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from quotas import actions
from quotas.models import Quota, QuotaGrant, QuotaRequest

from ..support.htmx import htmx

pytestmark = pytest.mark.django_db

ROLES = ["owner", "member", "viewer", "outsider", "quota_manager"]


def team_page(team):
    return reverse("console:team", args=[team.slug])


def ask(client, team, flavor, **overrides):
    today = timezone.localdate()
    data = {"flavor": flavor.pk, "gpus": 8, "borrowing_limit_gpus": "", "starts_on": today.isoformat(),
            "ends_on": (today + timedelta(days=30)).isoformat(), "justification": "Paper deadline: ViT-L runs."}
    data.update(overrides)
    return client.post(reverse("console:request-create", args=[team.slug]), data)


@pytest.fixture
def pending(team, flavor, owner):
    today = timezone.localdate()
    return QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=8, starts_on=today,
                                       ends_on=today + timedelta(days=30), justification="Deadline.")


def approve_data(**overrides):
    today = timezone.localdate()
    data = {"gpus": 4, "borrowing_limit_gpus": "", "cpu_cores": 48, "memory_gib": 480,
            "starts_on": today.isoformat(), "ends_on": (today + timedelta(days=14)).isoformat(), "reason": "Half for now."}
    data.update(overrides)
    return data


# --- asking ---------------------------------------------------------------------------------
@pytest.mark.parametrize("who, status, created", [
    ("owner", 302, 1), ("member", 403, 0), ("viewer", 403, 0), ("outsider", 404, 0), ("quota_manager", 403, 0),
])
def test_only_owners_can_ask_for_a_quota_change(request, client_for, team, flavor, who, status, created):
    response = ask(client_for(request.getfixturevalue(who)), team, flavor)
    assert response.status_code == status
    assert QuotaRequest.objects.count() == created


def test_an_owners_request_is_pending_and_shown_on_the_team_page(client_for, owner, team, flavor):
    ask(client_for(owner), team, flavor)
    req = QuotaRequest.objects.get()
    assert (req.status, req.gpus, req.requested_by, req.team) == ("pending", 8, owner, team)
    html = client_for(owner).get(team_page(team)).content.decode()
    assert "Pending" in html and "+8" in html and "Request a quota change" in html


def test_a_bad_request_is_explained_and_what_was_typed_is_kept(client_for, owner, team, flavor):
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    response = client_for(owner).post(
        reverse("console:request-create", args=[team.slug]),
        {"flavor": flavor.pk, "gpus": 8, "starts_on": yesterday, "justification": "Keep this text"},
        **htmx("quota-requests"),
    )
    html = response.content.decode()
    assert response.status_code == 400 and html.lstrip().startswith('<section id="quota-requests"')
    assert "The first day cannot be in the past." in html and "Keep this text" in html
    assert not QuotaRequest.objects.exists()


def test_a_request_for_nothing_is_refused(client_for, owner, team, flavor):
    response = ask(client_for(owner), team, flavor, gpus=0)
    assert response.status_code == 400 and not QuotaRequest.objects.exists()
    assert "Ask for some GPUs" in response.content.decode()


def test_an_end_before_the_start_is_refused(client_for, owner, team, flavor):
    today = timezone.localdate()
    response = ask(client_for(owner), team, flavor, ends_on=(today - timedelta(days=1)).isoformat(),
                   starts_on=today.isoformat())
    assert response.status_code == 400 and "The last day cannot be before the first day." in response.content.decode()


@pytest.mark.parametrize("who", ["member", "viewer", "quota_manager"])
def test_only_owners_see_the_request_form(request, client_for, team, who):
    html = client_for(request.getfixturevalue(who)).get(team_page(team)).content.decode()
    assert "Request a quota change" not in html


# --- deciding -------------------------------------------------------------------------------
@pytest.mark.parametrize("who, status", [
    ("owner", 403), ("member", 403), ("viewer", 403), ("outsider", 403), ("quota_manager", 302),
])
def test_only_quota_managers_approve(request, client_for, pending, who, status, reconciles):
    response = client_for(request.getfixturevalue(who)).post(
        reverse("console:approve", args=[pending.pk]), approve_data())
    assert response.status_code == status
    pending.refresh_from_db()
    assert pending.status == ("approved" if status == 302 else "pending")
    assert QuotaGrant.objects.filter(request=pending).exists() == (status == 302)


@pytest.mark.parametrize("who, status", [
    ("owner", 403), ("member", 403), ("viewer", 403), ("outsider", 403), ("quota_manager", 302),
])
def test_only_quota_managers_deny(request, client_for, pending, who, status):
    response = client_for(request.getfixturevalue(who)).post(
        reverse("console:deny", args=[pending.pk]), {"reason": "The cluster is full until January."})
    assert response.status_code == status
    pending.refresh_from_db()
    assert pending.status == ("denied" if status == 302 else "pending")


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "outsider"])
@pytest.mark.parametrize("page", ["capacity", "requests", "grants", "history"])
def test_the_console_is_for_quota_managers_only(request, client_for, who, page):
    assert client_for(request.getfixturevalue(who)).get(reverse(f"console:{page}")).status_code == 403


def test_approving_with_changed_numbers_grants_those_and_applies_them_now(
    client_for, quota_manager, pending, quota, reconciles, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(quota_manager).post(reverse("console:approve", args=[pending.pk]), approve_data())
    assert response.status_code == 302
    pending.refresh_from_db()
    assert (pending.status, pending.decided_by, pending.decision_reason) == ("approved", quota_manager, "Half for now.")
    grant = pending.grant
    assert (grant.gpus, grant.cpu_cores, grant.granted_by) == (4, 48, quota_manager)
    assert grant.ends_at == timezone.make_aware(
        timezone.datetime.combine(timezone.localdate() + timedelta(days=15), timezone.datetime.min.time()))
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 12
    assert reconciles == [pending.team.pk]


def test_approving_a_later_start_changes_nothing_yet(quota_manager, pending, quota, reconciles):
    later = timezone.localdate() + timedelta(days=5)
    grant = actions.approve(pending, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=later, ends_on=None,
                            cpu_cores=96, memory_gib=960)
    assert not grant.applied and Quota.objects.get(pk=quota.pk).nominal_gpus == 8


def test_the_approve_form_starts_from_what_was_asked(client_for, quota_manager, pending, quota):
    html = client_for(quota_manager).get(reverse("console:request", args=[pending.pk])).content.decode()
    assert 'name="gpus" value="8"' in html and 'name="cpu_cores" value="96"' in html
    assert "Deadline." in html


def test_a_denial_needs_a_reason(client_for, quota_manager, pending):
    response = client_for(quota_manager).post(reverse("console:deny", args=[pending.pk]), {"reason": "  "})
    assert response.status_code == 400 and "This field is required." in response.content.decode()
    pending.refresh_from_db()
    assert pending.status == "pending"


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_the_team_reads_the_decision_and_reason(request, client_for, quota_manager, pending, who):
    pending.deny(quota_manager, "The cluster is full until January.")
    html = client_for(request.getfixturevalue(who)).get(team_page(pending.team)).content.decode()
    assert "Denied" in html and "The cluster is full until January." in html and "quinn" in html


def test_outsiders_do_not_see_another_teams_requests(client_for, outsider, pending):
    assert client_for(outsider).get(team_page(pending.team)).status_code == 404


def test_a_request_is_decided_once(quota_manager, pending, reconciles):
    assert pending.deny(quota_manager, "No.") is True
    stale = QuotaRequest.objects.get(pk=pending.pk)
    stale.status = "pending"  # a second manager's page, loaded before the first decision
    assert actions.approve(stale, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                         ends_on=None, cpu_cores=1, memory_gib=1) is None
    assert not QuotaGrant.objects.exists()
    assert QuotaRequest.objects.get(pk=pending.pk).status == "denied"


def test_the_model_refuses_decisions_by_others(owner, pending):
    with pytest.raises(PermissionDenied):
        pending.deny(owner, "I changed my mind.")


def test_the_queue_lists_open_requests_and_recent_decisions(client_for, quota_manager, pending, team, flavor, owner):
    other = QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=2,
                                        starts_on=timezone.localdate(), justification="More.")
    other.deny(quota_manager, "Not now.")
    html = client_for(quota_manager).get(reverse("console:requests")).content.decode()
    assert f"#{pending.pk}" in html and f"#{other.pk}" in html and "Not now." in html and "1 open" in html


def test_a_quota_manager_ends_a_grant_early(client_for, quota_manager, pending, quota, reconciles):
    grant = actions.approve(pending, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                            ends_on=None, cpu_cores=96, memory_gib=960)
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16
    response = client_for(quota_manager).post(reverse("console:grant-end", args=[grant.pk]))
    assert response.status_code == 302
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 8


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_only_quota_managers_end_grants(request, client_for, quota_manager, pending, quota, reconciles, who):
    grant = actions.approve(pending, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                            ends_on=None, cpu_cores=96, memory_gib=960)
    response = client_for(request.getfixturevalue(who)).post(reverse("console:grant-end", args=[grant.pk]))
    assert response.status_code == 403 and Quota.objects.get(pk=quota.pk).nominal_gpus == 16


def test_members_and_viewers_see_the_teams_grants(client_for, member, viewer, quota_manager, pending, quota, reconciles):
    actions.approve(pending, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                    ends_on=None, cpu_cores=96, memory_gib=960)
    for person in (member, viewer):
        html = client_for(person).get(team_page(pending.team)).content.decode()
        assert "+8 h100 GPUs" in html and "16 quota" in html


def test_the_grants_page_lists_active_and_upcoming_grants(client_for, quota_manager, pending, quota, reconciles):
    now_grant = actions.approve(pending, quota_manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                                ends_on=None, cpu_cores=96, memory_gib=960)
    html = client_for(quota_manager).get(reverse("console:grants")).content.decode()
    active, upcoming = html.split('id="upcoming-h"')
    assert f"#{now_grant.pk}" in active and "Standing quota" in active and "End now" in active
    assert "None." in upcoming


def test_the_history_page_lists_recent_changes(client_for, quota_manager, pending):
    html = client_for(quota_manager).get(reverse("console:history")).content.decode()
    assert f"request #{pending.pk}" in html and "olivia" in html and "created" in html
