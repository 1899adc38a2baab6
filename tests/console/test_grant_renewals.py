"""Grant renewals (issue 34, item 3; ColdFront's model): an owner asks to carry a grant on
before it ends, from the grant's page or the reminder's link; a quota manager approves it
(with other dates or numbers) or refuses it with a reason, under the four eyes of quota
requests; a non-renewable grant says so and refuses; an extended grant keeps the
ClusterQueue's quota past its old end and lowers it at the new one."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone

from quotas import actions
from quotas.grants import last_day
from quotas.models import QuotaGrant, QuotaRequest
from tenants.models import Membership

from ..builders import make_user
from .test_grant_sweep import DAY, cluster_queue_gpus, run_sweep

MIDNIGHT = datetime(2026, 12, 1, tzinfo=UTC)  # grants from whole days, as approvals make them

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager(db):
    return make_user("ruth", quota_manager=True)


@pytest.fixture
def grant(team, flavor, quota, manager, enqueued):
    """+8 GPUs on the team's 8, granted by a manager, ending in five days."""
    now = timezone.now()
    return actions.grant(team=team, flavor=flavor, gpus=8, cpu_cores=96, memory_gib=960, granted_by=manager,
                         starts_at=now - DAY, ends_at=now + 5 * DAY)


def renew(grant, who, *, days=30, **fields):
    return QuotaRequest.objects.renew(grant, requested_by=who, justification="The paper runs on.",
                                      ends_on=last_day(grant.ends_at) + timedelta(days=days), **fields)


def approve(renewal, manager, **changes):
    grant = renewal.renews
    numbers = dict(gpus=grant.gpus, borrowing_limit_gpus=grant.borrowing_limit_gpus, cpu_cores=grant.cpu_cores,
                   memory_gib=grant.memory_gib, starts_on=renewal.starts_on, ends_on=renewal.ends_on)
    numbers.update(changes)
    return actions.approve(renewal, manager, **numbers)


def approve_data(renewal, **changes):
    grant = renewal.renews
    data = {"gpus": grant.gpus, "borrowing_limit_gpus": "", "cpu_cores": grant.cpu_cores,
            "memory_gib": grant.memory_gib, "starts_on": renewal.starts_on.isoformat(),
            "ends_on": renewal.ends_on.isoformat(), "reason": "Carry on."}
    data.update(changes)
    return data


# --- asking ---------------------------------------------------------------------------------
def test_an_owner_asks_to_renew_a_grant_and_the_request_says_which(grant, owner):
    renewal = renew(grant, owner)
    assert (renewal.renews, renewal.team, renewal.flavor, renewal.gpus) == (grant, grant.team, grant.flavor, 8)
    assert renewal.starts_on == timezone.localtime(grant.ends_at).date() and renewal.is_pending
    assert renewal.history.first().history_user == owner


@pytest.mark.parametrize("who", ["member", "viewer", "outsider", "quota_manager"])
def test_nobody_but_an_owner_asks_to_renew(request, grant, who):
    with pytest.raises(PermissionDenied):
        renew(grant, request.getfixturevalue(who))
    assert not QuotaRequest.objects.exists()


def test_a_non_renewable_grant_refuses_a_renewal_and_says_so(grant, owner):
    QuotaGrant.objects.filter(pk=grant.pk).update(renewable=False)
    grant.refresh_from_db()
    with pytest.raises(ValidationError, match="is not renewable"):
        renew(grant, owner)
    assert not QuotaRequest.objects.exists()


def test_an_ended_grant_or_one_without_an_end_is_not_renewed(grant, owner, manager):
    actions.end_grant(grant, manager)
    with pytest.raises(ValidationError, match="has ended"):
        renew(grant, owner)
    endless = actions.grant(team=grant.team, flavor=grant.flavor, gpus=2, starts_at=timezone.now(),
                            granted_by=manager)
    assert "has no end" in endless.why_not_renew()


def test_one_pending_renewal_at_a_time_and_never_one_that_ends_sooner(grant, owner):
    renew(grant, owner)
    with pytest.raises(ValidationError, match="already waiting"):
        renew(grant, owner, days=60)
    QuotaRequest.objects.all().delete()
    with pytest.raises(ValidationError) as err:
        renew(grant, owner, days=-10)
    assert "ends_on" in err.value.message_dict


def test_a_renewal_is_what_its_owner_filed(grant, owner):
    renewal = renew(grant, owner)
    renewal.renews = None
    with pytest.raises(ValidationError) as err:
        renewal.save()
    assert "renews_id" in err.value.message_dict


# --- deciding -------------------------------------------------------------------------------
def test_approved_with_its_numbers_the_grant_is_extended_in_place_and_audited(grant, owner, manager, enqueued):
    old_end = grant.ends_at
    renewal = renew(grant, owner)
    decided = approve(renewal, manager)
    grant.refresh_from_db()
    assert decided == grant and QuotaGrant.objects.count() == 2  # the standing grant and this one
    assert last_day(grant.ends_at) == renewal.ends_on and grant.ends_at > old_end
    last = grant.history.order_by("-history_id").first()
    assert (last.history_user, last.history_change_reason) == (manager, f"extended by renewal request #{renewal.pk}")
    assert QuotaRequest.objects.get(pk=renewal.pk).status == QuotaRequest.Status.APPROVED


def test_approved_with_other_numbers_a_grant_from_the_old_end_carries_it_on(grant, owner, manager):
    renewal = renew(grant, owner)
    follow = approve(renewal, manager, gpus=4, cpu_cores=48, memory_gib=480)
    grant.refresh_from_db()
    assert follow != grant and follow.request == renewal and follow.gpus == 4
    assert follow.starts_at == grant.ends_at  # back to back: the two never add up
    assert last_day(follow.ends_at) == renewal.ends_on


def test_a_manager_cannot_approve_a_renewal_to_end_before_the_grant_does(grant, owner, manager):
    renewal = renew(grant, owner)
    with pytest.raises(ValidationError) as err:
        approve(renewal, manager, ends_on=last_day(grant.ends_at) - timedelta(days=1))
    assert "ends_on" in err.value.message_dict
    assert QuotaRequest.objects.get(pk=renewal.pk).is_pending


def test_a_manager_in_the_team_or_lately_in_it_cannot_decide_a_renewal(grant, team, owner, enqueued):
    insider = make_user("quinn", quota_manager=True)
    Membership.objects.create(team=team, user=insider, role=Membership.Role.MEMBER)
    Membership.objects.get(team=team, user=insider).remove()  # leaving does not help
    renewal = renew(grant, owner)
    with pytest.raises(PermissionDenied, match="another quota manager"):
        approve(renewal, insider)
    with pytest.raises(PermissionDenied):
        renewal.deny(insider, "No.")
    assert QuotaRequest.objects.get(pk=renewal.pk).is_pending


def test_a_refusal_needs_a_reason_and_leaves_the_grant_as_it_was(grant, owner, manager):
    renewal = renew(grant, owner)
    with pytest.raises(ValidationError):
        renewal.deny(manager, "  ")
    assert renewal.deny(manager, "The cluster is full next quarter.")
    assert QuotaGrant.objects.get(pk=grant.pk).ends_at == grant.ends_at
    assert renew(grant, owner, days=10).is_pending  # a refusal frees the way for another ask


def test_the_admin_shows_a_renewal_read_only(client, grant, owner, manager):
    renewal = renew(grant, owner)
    client.force_login(manager)
    response = client.post(reverse("admin:quotas_quotarequest_change", args=[renewal.pk]),
                           {"gpus": 400, "ends_on": "2999-01-01"})
    assert response.status_code == 403
    assert QuotaRequest.objects.get(pk=renewal.pk).gpus == 8


# --- the pages ------------------------------------------------------------------------------
def test_the_owner_asks_on_the_grants_page_and_a_manager_approves_in_the_console(
        client_for, grant, team, owner, manager):
    page = client_for(owner).get(reverse("console:grant", args=[team.slug, grant.pk]))
    assert page.status_code == 200 and b"Ask to renew" in page.content
    new_end = last_day(grant.ends_at) + timedelta(days=30)
    response = client_for(owner).post(reverse("console:grant-renew", args=[team.slug, grant.pk]), {
        "ends_on": new_end.isoformat(), "gpus": 8, "justification": "The paper runs on."})
    assert response.status_code == 302
    renewal = QuotaRequest.objects.get(renews=grant)
    detail = client_for(manager).get(reverse("console:request", args=[renewal.pk])).content.decode()
    assert f"Grant #{grant.pk}" in detail and "the grant is extended" in detail
    response = client_for(manager).post(reverse("console:approve", args=[renewal.pk]), approve_data(renewal))
    assert response.status_code == 302
    assert last_day(QuotaGrant.objects.get(pk=grant.pk).ends_at) == new_end


def test_the_renewal_form_keeps_what_was_typed_and_names_the_field(client_for, grant, team, owner):
    response = client_for(owner).post(reverse("console:grant-renew", args=[team.slug, grant.pk]), {
        "ends_on": (timezone.localdate() - timedelta(days=3)).isoformat(), "gpus": 12,
        "justification": "Typed with care."})
    assert response.status_code == 400
    form = response.context["renewal_form"]
    assert list(form.errors) == ["ends_on"] and "Typed with care." in response.content.decode()
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize("who, page, post", [("member", 200, 403), ("viewer", 200, 403), ("outsider", 404, 404)])
def test_members_see_the_grant_but_only_owners_ask_and_outsiders_see_nothing(
        request, client_for, grant, team, who, page, post):
    client = client_for(request.getfixturevalue(who))
    shown = client.get(reverse("console:grant", args=[team.slug, grant.pk]))
    assert shown.status_code == page
    if page == 200:
        assert b"Ask to renew" not in shown.content
    response = client.post(reverse("console:grant-renew", args=[team.slug, grant.pk]), {
        "ends_on": (timezone.localdate() + timedelta(days=60)).isoformat(), "gpus": 8, "justification": "x"})
    assert response.status_code == post
    assert not QuotaRequest.objects.exists()


def test_a_non_renewable_grants_page_says_so_and_offers_no_form(client_for, grant, team, owner):
    QuotaGrant.objects.filter(pk=grant.pk).update(renewable=False)
    page = client_for(owner).get(reverse("console:grant", args=[team.slug, grant.pk])).content.decode()
    assert "this grant is not renewable" in page and "Ask to renew" not in page
    response = client_for(owner).post(reverse("console:grant-renew", args=[team.slug, grant.pk]), {
        "ends_on": (timezone.localdate() + timedelta(days=60)).isoformat(), "gpus": 8, "justification": "x"})
    assert response.status_code == 400 and "is not renewable" in response.content.decode()


def test_a_manager_marks_a_grant_not_renewable_when_she_approves_it(client_for, team, flavor, quota, owner, manager,
                                                                     enqueued):
    asked = QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=2,
                                        starts_on=timezone.localdate(), justification="Once.")
    data = {"gpus": 2, "borrowing_limit_gpus": "", "cpu_cores": 24, "memory_gib": 240,
            "starts_on": timezone.localdate().isoformat(), "ends_on": "", "reason": "", "non_renewable": "on"}
    assert client_for(manager).post(reverse("console:approve", args=[asked.pk]), data).status_code == 302
    assert QuotaRequest.objects.get(pk=asked.pk).grant.renewable is False


# --- the cluster ----------------------------------------------------------------------------
def test_an_extended_grant_changes_the_cluster_queue_at_its_new_end_not_the_old_one(
        fake, team, flavor, quota, owner, manager, clock, inline_tasks, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    clock(MIDNIGHT)
    with capture(execute=True):
        grant = actions.grant(team=team, flavor=flavor, gpus=8, cpu_cores=96, memory_gib=960, granted_by=manager,
                              starts_at=MIDNIGHT, ends_at=MIDNIGHT + 2 * DAY, now=MIDNIGHT)
    run_sweep(clock, MIDNIGHT + timedelta(hours=1), capture)
    assert cluster_queue_gpus(fake) == "16"
    with capture(execute=True):
        renewal = renew(grant, owner, days=3)  # last day Dec 2, now Dec 5: the end moves to Dec 6 00:00
        approve(renewal, manager)
    run_sweep(clock, MIDNIGHT + 2 * DAY, capture)  # the old end
    assert cluster_queue_gpus(fake) == "16"
    run_sweep(clock, MIDNIGHT + 5 * DAY - timedelta(seconds=1), capture)
    assert cluster_queue_gpus(fake) == "16"
    run_sweep(clock, MIDNIGHT + 5 * DAY, capture)  # the new end
    assert cluster_queue_gpus(fake) == "8"
