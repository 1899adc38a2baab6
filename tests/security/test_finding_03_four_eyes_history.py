"""Issue 29, finding 3: four eyes were walked around. A quota manager in the requesting team
was refused, removed herself from the team, approved, and added herself back as owner.
Now the audit trail of memberships decides: whoever was in the team when the request was
filed (or in the FOUR_EYES_LOOKBACK_DAYS before), or since, does not decide it; and a
manager who was lately in a team grants it nothing and sets none of its quota in the admin."""

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
def reconciles(monkeypatch):
    sent = []
    monkeypatch.setattr("quotas.actions.enqueue", lambda task, pk: sent.append(pk))
    return sent


def ask(team, flavor, who, gpus=2) -> QuotaRequest:
    return QuotaRequest.objects.submit(team=team, requested_by=who, flavor=flavor, gpus=gpus,
                                       starts_on=timezone.localdate(), justification="More GPUs.")


def approve_data(gpus=2):
    return {"gpus": gpus, "borrowing_limit_gpus": "", "cpu_cores": 24, "memory_gib": 240,
            "starts_on": timezone.localdate().isoformat(), "ends_on": "", "reason": "Fine."}


def remove(client, team, user):
    membership = Membership.objects.get(team=team, user=user)
    response = client.post(reverse("console:member-remove", args=[team.slug, membership.pk]))
    assert response.status_code == 302
    assert not Membership.objects.filter(team=team, user=user).exists()


def test_finding_03_a_manager_who_leaves_the_team_still_cannot_approve_its_request(
        client_for, team, flavor, owner, quota_manager, reconciles):
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.MEMBER)
    request = ask(team, flavor, owner)
    manager = client_for(quota_manager)
    assert manager.post(reverse("console:approve", args=[request.pk]), approve_data()).status_code == 403
    remove(manager, team, quota_manager)
    response = manager.post(reverse("console:approve", args=[request.pk]), approve_data())
    assert response.status_code == 403
    assert QuotaRequest.objects.get(pk=request.pk).status == QuotaRequest.Status.PENDING
    assert not QuotaGrant.objects.exists() and reconciles == []
    page = manager.get(reverse("console:request", args=[request.pk])).content.decode()
    assert "were in vision when this request was filed or since" in page


def test_finding_03_joining_after_the_request_was_filed_and_leaving_again_bars_her_too(
        client_for, team, flavor, owner, quota_manager, reconciles):
    request = ask(team, flavor, owner)
    manager = client_for(quota_manager)
    manager.post(reverse("console:member-add", args=[team.slug]), {"username": quota_manager.username,
                                                                   "role": "viewer"})
    remove(manager, team, quota_manager)
    with pytest.raises(PermissionDenied, match="another quota manager"):
        request.deny(quota_manager, "No.")


def test_finding_03_leaving_just_before_the_request_is_filed_does_not_help(team, flavor, owner, quota_manager):
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.OWNER)
    Membership.objects.get(team=team, user=quota_manager).remove()
    request = ask(team, flavor, owner)
    assert "another quota manager" in request.why_not_decide(quota_manager)


def test_finding_03_a_membership_longer_ago_than_the_lookback_no_longer_bars(team, flavor, owner, quota_manager,
                                                                            settings):
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.MEMBER)
    Membership.objects.get(team=team, user=quota_manager).remove()
    long_ago = timezone.now() - timedelta(days=settings.FOUR_EYES_LOOKBACK_DAYS + 1)
    Membership.history.filter(user=quota_manager).update(history_date=long_ago)
    assert ask(team, flavor, owner).why_not_decide(quota_manager) is None


def test_finding_03_a_manager_never_in_the_team_decides(client_for, team, flavor, owner, quota_manager, reconciles):
    request = ask(team, flavor, owner)
    response = client_for(quota_manager).post(reverse("console:approve", args=[request.pk]), approve_data())
    assert response.status_code == 302
    assert QuotaRequest.objects.get(pk=request.pk).decided_by == quota_manager


def test_finding_03_a_manager_lately_in_the_team_grants_it_nothing_and_sets_no_quota(
        client, team, flavor, quota_manager, reconciles):
    quota = make_quota(team, flavor, nominal_gpus=8)
    Membership.objects.create(team=team, user=quota_manager, role=Membership.Role.OWNER)
    Membership.objects.get(team=team, user=quota_manager).remove()
    with pytest.raises(PermissionDenied, match="another quota manager"):
        actions.grant(team=team, flavor=flavor, gpus=64, starts_at=timezone.now(), granted_by=quota_manager)
    client.force_login(quota_manager)
    response = client.post(reverse("admin:quotas_quota_change", args=[quota.pk]), {
        "team": team.pk, "flavor": flavor.pk, "nominal_gpus": 512, "cpu_cores": 96, "memory_gib": 1024, "weight": 1,
    })
    assert response.status_code == 403
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 8
    # Another manager, never in the team, still runs it.
    other = make_user("ruth", quota_manager=True)
    assert actions.grant(team=team, flavor=flavor, gpus=4, starts_at=timezone.now(), granted_by=other)
