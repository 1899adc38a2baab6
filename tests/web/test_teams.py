"""The team page: namespace and status, quotas with usage, members (owners add and remove)."""

import re
from collections import Counter

import pytest
from django.urls import reverse

from tenants.models import Membership

from ..builders import make_user
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db


def page(team):
    return reverse("console:team", args=[team.slug])


def add(team):
    return reverse("console:member-add", args=[team.slug])


def remove(team, user):
    return reverse("console:member-remove", args=[team.slug, team.memberships.get(user=user).pk])


@pytest.mark.parametrize("who, role", [("owner", "owner"), ("member", "member"), ("viewer", "viewer")])
def test_team_people_see_namespace_quotas_members_and_jobs(request, client_for, running_job, who, role):
    response = client_for(request.getfixturevalue(who)).get(page(running_job.team))
    html = response.content.decode()
    assert response.status_code == 200
    assert f"You are {role} of this team." in html
    assert "team-vision" in html and "Pending" in html
    assert "4 in use / 8 quota" in html
    assert "olivia" in html and "max" in html and "vera" in html
    assert "running-job" in html


def test_outsiders_get_404_for_another_teams_page(client_for, outsider, team):
    assert client_for(outsider).get(page(team)).status_code == 404


def test_quota_managers_see_any_team(client_for, quota_manager, team):
    html = client_for(quota_manager).get(page(team)).content.decode()
    assert "You see this team as a quota manager." in html and "Add a member" in html


def test_only_owners_see_the_member_forms(client_for, owner, member, viewer, team):
    assert "Add a member" in client_for(owner).get(page(team)).content.decode()
    for person in (member, viewer):
        html = client_for(person).get(page(team)).content.decode()
        assert "Add a member" not in html and "Remove" not in html


def test_an_owner_adds_a_member(client_for, owner, team):
    make_user("nina")
    response = client_for(owner).post(add(team), {"username": "nina", "role": "viewer"})
    assert response.status_code == 302
    assert team.memberships.get(user__username="nina").role == Membership.Role.VIEWER


def test_adding_over_htmx_returns_the_members_fragment(client_for, owner, team):
    make_user("nina")
    response = client_for(owner).post(add(team), {"username": "nina", "role": "member"}, **htmx("members"))
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="members"') and "nina" in html
    assert "Added nina to vision as member." in html


def test_an_unknown_username_is_explained_and_kept(client_for, owner, team):
    response = client_for(owner).post(add(team), {"username": "nobody-here", "role": "member"}, **htmx("members"))
    html = response.content.decode()
    assert response.status_code == 400
    assert "Nobody called &#x27;nobody-here&#x27; can log in here" in html
    assert 'value="nobody-here"' in html


def test_adding_someone_already_in_the_team_is_refused(client_for, owner, member, team):
    response = client_for(owner).post(add(team), {"username": "max", "role": "owner"})
    assert response.status_code == 400 and b"max is already in vision." in response.content
    assert team.memberships.get(user=member).role == Membership.Role.MEMBER


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_cannot_add_or_remove(request, client_for, owner, team, who):
    make_user("nina")
    client = client_for(request.getfixturevalue(who))
    assert client.post(add(team), {"username": "nina", "role": "owner"}).status_code == 403
    assert client.post(remove(team, owner)).status_code == 403
    assert team.memberships.count() == 3


def test_outsiders_get_404_when_changing_another_teams_members(client_for, outsider, owner, team):
    client = client_for(outsider)
    assert client.post(add(team), {"username": "oscar", "role": "owner"}).status_code == 404
    assert client.post(remove(team, owner)).status_code == 404
    assert not team.memberships.filter(user=outsider).exists()


def test_an_owner_removes_a_member(client_for, owner, viewer, team):
    response = client_for(owner).post(remove(team, viewer), **htmx("members"))
    assert response.status_code == 200 and b"Removed vera from vision." in response.content
    assert not team.memberships.filter(user=viewer).exists()


def test_the_last_owner_cannot_be_removed(client_for, owner, team):
    response = client_for(owner).post(remove(team, owner), **htmx("members"))
    assert response.status_code == 400 and b"the last owner of vision" in response.content
    assert team.memberships.filter(user=owner).exists()


def test_member_changes_are_posts(client_for, owner, team):
    assert client_for(owner).get(add(team)).status_code == 405


def test_every_id_on_the_team_page_is_unique(client_for, owner, running_job):
    # The quota request form and the member cap form both ask for a flavor: labels must point
    # at their own field (and htmx targets at one element).
    html = client_for(owner).get(page(running_job.team)).content.decode()
    ids = Counter(re.findall(r'\sid="([^"]+)"', html))
    assert "request_flavor" in ids and "cap_flavor" in ids  # both forms are on the page
    assert [i for i, n in ids.items() if n > 1] == []
