"""Issue 29, finding 4: a quota request was rewritten in the admin. Any quota manager, one in
the requesting team included, could edit a request before or after its decision (2 GPUs
inflated to 400, then approved as 400 by a second manager). Now a request is what its
owner filed: the admin shows it read only to everyone, the model refuses any change to what
it asks for and any change at all once decided, and the grant a decision made keeps the
decided numbers."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from quotas.models import QuotaGrant, QuotaRequest
from tenants.models import Membership

from ..builders import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("quotas.actions.enqueue", lambda task, pk: None)


@pytest.fixture
def filed(team, flavor, owner):
    return QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=2,
                                       starts_on=timezone.localdate(), justification="Two GPUs for a sweep.")


def admin_post(request, gpus):
    return {"team": request.team_id, "flavor": request.flavor_id, "gpus": gpus, "borrowing_limit_gpus": "",
            "starts_on": request.starts_on.isoformat(), "ends_on": "", "justification": request.justification,
            "status": "approved", "decision_reason": "ok"}


def approve(request, manager, gpus):
    return request.approve(manager, gpus=gpus, borrowing_limit_gpus=None, starts_on=request.starts_on,
                           ends_on=None, cpu_cores=1, memory_gib=1)


@pytest.mark.parametrize("in_team", [True, False])
def test_finding_04_no_quota_manager_rewrites_a_pending_request_in_the_admin(client, filed, team, in_team):
    manager = make_user("quinn", quota_manager=True)
    if in_team:
        Membership.objects.create(team=team, user=manager, role=Membership.Role.MEMBER)
    client.force_login(manager)
    response = client.post(reverse("admin:quotas_quotarequest_change", args=[filed.pk]), admin_post(filed, 400))
    assert response.status_code == 403
    assert QuotaRequest.objects.get(pk=filed.pk).gpus == 2
    page = client.get(reverse("admin:quotas_quotarequest_change", args=[filed.pk]))
    assert page.status_code == 200 and b'name="gpus"' not in page.content  # read only
    assert client.post(reverse("admin:quotas_quotarequest_delete", args=[filed.pk]), {"post": "yes"}).status_code == 403
    assert client.get(reverse("admin:quotas_quotarequest_add")).status_code == 403


def test_finding_04_not_even_a_superuser_rewrites_a_decided_request_in_the_admin(client, filed):
    approve(filed, make_user("ruth", quota_manager=True), 2)
    root = make_user("root", is_superuser=True, is_staff=True)
    client.force_login(root)
    response = client.post(reverse("admin:quotas_quotarequest_change", args=[filed.pk]), admin_post(filed, 400))
    assert response.status_code == 403
    assert QuotaRequest.objects.get(pk=filed.pk).gpus == 2


def test_finding_04_the_model_refuses_to_change_what_a_request_asks_for(filed):
    filed.gpus = 400
    with pytest.raises(ValidationError) as err:
        filed.save()
    assert "gpus" in err.value.message_dict
    assert QuotaRequest.objects.get(pk=filed.pk).gpus == 2


def test_finding_04_a_decided_request_never_changes_and_its_grant_keeps_the_decided_numbers(client, filed):
    manager = make_user("ruth", quota_manager=True)
    grant = approve(filed, manager, 2)
    decided = QuotaRequest.objects.get(pk=filed.pk)
    decided.decision_reason = "rewritten"
    with pytest.raises(ValidationError, match="decided request cannot change"):
        decided.save()
    decided.status = QuotaRequest.Status.PENDING
    with pytest.raises(ValidationError):
        decided.save()
    other = make_user("sam", quota_manager=True)
    client.force_login(other)
    form = client.get(reverse("admin:quotas_quotagrant_change", args=[grant.pk]))
    assert b'name="gpus"' not in form.content  # the decision's numbers, as decided
    assert QuotaGrant.objects.get(pk=grant.pk).gpus == 2


def test_finding_04_the_decision_is_in_the_audit_trail_with_its_decider(filed):
    manager = make_user("ruth", quota_manager=True)
    approve(filed, manager, 2)
    last = filed.history.order_by("-history_id").first()
    assert (last.status, last.history_user, last.history_change_reason) == ("approved", manager, "approved")
