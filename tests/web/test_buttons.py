"""Buttons are offered only where they can work: "Submit a job" (the dashboard, a team's
page) and the Submit link of the layout only for people who may submit to some team, as
the submit page itself decides (``Team.objects.submittable_by``)."""

import pytest
from django.urls import reverse

from tenants.models import Membership

from ..builders import make_team, make_user

pytestmark = pytest.mark.django_db

SUBMIT_LINK = f'href="{reverse("jobs:submit")}"'


def submit_links(client, url) -> int:
    return client.get(url).content.decode().count(SUBMIT_LINK)


@pytest.mark.parametrize("who, offered", [
    ("owner", True), ("member", True), ("viewer", False),
    ("outsider", True),  # owner of her own team: she can submit there
    ("quota_manager", False),  # in no team: the submit page would refuse her
])
def test_the_dashboard_and_the_layout_offer_submitting_only_to_those_who_can(request, client_for, team, who, offered):
    client = client_for(request.getfixturevalue(who))
    html = client.get(reverse("dashboard")).content.decode()
    assert ("Submit a job" in html) is offered
    assert (SUBMIT_LINK in html) is offered  # the layout's Submit link too


@pytest.mark.parametrize("page", ["jobs:list", "console:quotas", "console:usage", "notifications:preferences"])
def test_no_page_of_the_layout_offers_a_viewer_the_submit_link(client_for, team, viewer, page):
    assert submit_links(client_for(viewer), reverse(page)) == 0


def test_a_quota_manager_who_is_a_member_of_a_team_may_submit_and_is_offered_it(client_for, team):
    manager = make_user("quincy", quota_manager=True)
    make_team("ops", members={manager: Membership.Role.MEMBER})
    assert "Submit a job" in client_for(manager).get(reverse("dashboard")).content.decode()


@pytest.mark.parametrize("who, offered", [("owner", True), ("member", True), ("viewer", False), ("quota_manager", False)])
def test_a_team_page_offers_submitting_to_that_team_only_to_its_owners_and_members(request, client_for, team, who, offered):
    html = client_for(request.getfixturevalue(who)).get(reverse("console:team", args=[team.slug])).content.decode()
    assert (f'{reverse("jobs:submit")}?team={team.pk}' in html) is offered


def test_the_layout_asks_once_a_page_whatever_asks_again(client_for, team, owner, django_assert_max_num_queries):
    # The dashboard's button and the layout's link share one answer.
    client = client_for(owner)
    client.get(reverse("dashboard"))
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    with CaptureQueriesContext(connection) as ctx:
        client.get(reverse("dashboard"))
    asked = [q["sql"] for q in ctx.captured_queries if '"tenants_membership"."role" IN' in q["sql"]]
    assert len(asked) == 1
