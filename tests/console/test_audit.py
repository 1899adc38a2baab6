"""The audit trail: who changed what and when, with before and after values."""

import pytest
from django.urls import reverse
from django.utils import timezone

from quotas.models import Quota, QuotaRequest

pytestmark = pytest.mark.django_db


def test_a_quota_change_in_the_admin_is_recorded_with_who_and_what(client_for, quota_manager, quota):
    client = client_for(quota_manager)
    url = reverse("admin:quotas_quota_change", args=[quota.pk])
    response = client.post(url, {"team": quota.team_id, "flavor": quota.flavor_id, "nominal_gpus": 12,
                                 "cpu_cores": 96, "memory_gib": 960, "weight": 1})
    assert response.status_code == 302
    record = Quota.objects.get(pk=quota.pk).history.first()
    assert record.history_user == quota_manager
    html = client.get(reverse("console:object-history", args=["quota", quota.pk])).content.decode()
    assert "quinn" in html and "nominal gpus</strong>: 8 → 12" in html


def test_a_membership_change_is_in_the_history(client_for, owner, quota_manager, team):
    from ..builders import make_user

    make_user("nina")
    client_for(owner).post(reverse("console:member-add", args=[team.slug]), {"username": "nina", "role": "viewer"})
    html = client_for(quota_manager).get(reverse("console:history"), {"kind": "membership"}).content.decode()
    assert "olivia" in html and "created" in html and "nina in vision (viewer)" in html


def test_decisions_are_in_the_history_of_the_request(client_for, quota_manager, owner, team, flavor):
    req = QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=4,
                                      starts_on=timezone.localdate(), justification="More.")
    req.deny(quota_manager, "Not now.")
    html = client_for(quota_manager).get(reverse("console:object-history", args=["request", req.pk])).content.decode()
    assert "denied" in html and "pending → denied" in html and "Not now." in html


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "outsider"])
def test_only_quota_managers_read_the_audit_trail(request, client_for, team, who):
    client = client_for(request.getfixturevalue(who))
    assert client.get(reverse("console:object-history", args=["team", team.pk])).status_code == 403


def test_the_team_page_links_quota_managers_to_its_history(client_for, quota_manager, owner, team):
    link = reverse("console:object-history", args=["team", team.pk])
    assert link in client_for(quota_manager).get(reverse("console:team", args=[team.slug])).content.decode()
    assert link not in client_for(owner).get(reverse("console:team", args=[team.slug])).content.decode()


def test_unknown_kinds_of_history_are_404(client_for, quota_manager):
    assert client_for(quota_manager).get(reverse("console:object-history", args=["job", 1])).status_code == 404


def test_saves_that_change_nothing_are_left_out_and_people_are_named(client_for, quota_manager, owner, team, flavor):
    team.save()  # nothing changed
    req = QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=4,
                                      starts_on=timezone.localdate(), justification="More.")
    req.deny(quota_manager, "Not now.")
    html = client_for(quota_manager).get(reverse("console:history")).content.decode()
    assert f"team #{team.pk}" in html and html.count(f"team #{team.pk}") == 1  # created, not the empty save
    assert "decided by</strong>: — → quinn" in html
