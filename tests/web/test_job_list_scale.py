"""The job list at scale: the same SQL queries for 5 jobs as for 60 (no count, no option per
team), keyset pages forward and back, a team filter that stays small for a quota manager,
and a form that keeps what was chosen and typed. Timing lives in bench/pages.py."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.web.views import PAGE_SIZE
from tenants.models import Membership
from tenants.picker import TEAM_SELECT_MAX

from ..builders import make_flavor, make_job, make_team, make_user
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db

LIST = reverse("jobs:list")


def queries(client, params=None, **headers) -> int:
    assert client.get(LIST, params, **headers).status_code == 200  # warm: session, permissions
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(LIST, params, **headers).status_code == 200
    return len(ctx.captured_queries)


def add_jobs(team, flavor, count: int, *, prefix: str, submitter=None):
    for index in range(count):
        make_job(team, flavor, name=f"{prefix}-{index:03d}", submitter=submitter)


def names(html: str) -> list[str]:
    return re.findall(r'<a href="/jobs/\d+/">([^<]+)</a>', html)


def link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a rel="{rel}" href="\?([^"]*)"', html)
    return found.group(1).replace("&amp;", "&") if found else None


@pytest.fixture
def flavors(db):
    return [make_flavor("h100"), make_flavor("a100")]


@pytest.mark.parametrize("params", [None, {"state": "draft"}, {"q": "job", "kind": "training"}])
def test_a_member_pays_the_same_queries_for_5_jobs_as_for_60(client_for, flavors, params):
    person = make_user("max")
    team = make_team("vision", members={person: Membership.Role.MEMBER})
    client = client_for(person)
    add_jobs(team, flavors[0], 5, prefix="job-few", submitter=person)
    few = queries(client, params)
    other = make_team("speech", members={person: Membership.Role.OWNER})
    add_jobs(team, flavors[1], 30, prefix="job-more", submitter=make_user("sam"))
    add_jobs(other, flavors[0], 25, prefix="job-other")
    assert queries(client, params) == few
    assert queries(client, params, **htmx("job-table")) <= few


@pytest.mark.parametrize("params", [None, {"state": "draft"}, {"team": "team-001"}])
def test_a_quota_manager_pays_the_same_queries_for_5_jobs_as_for_60(client_for, flavors, params):
    client = client_for(make_user("quinn", quota_manager=True))
    teams = [make_team(f"team-{index:03d}") for index in range(3)]
    add_jobs(teams[1], flavors[0], 5, prefix="few")
    few = queries(client, params)
    # Many more jobs, and more teams than the team filter would list as options.
    teams += [make_team(f"team-{index:03d}") for index in range(3, TEAM_SELECT_MAX + 10)]
    for index, team in enumerate(teams[:12]):
        add_jobs(team, flavors[index % 2], 5, prefix=f"more{index}")
    assert queries(client, params) == few


def test_pages_go_older_and_back_newer_through_every_job_once(client_for, owner, team, flavor):
    add_jobs(team, flavor, 2 * PAGE_SIZE + 10, prefix="job")
    client = client_for(owner)
    expected = [f"job-{index:03d}" for index in reversed(range(2 * PAGE_SIZE + 10))]

    pages, html = [], client.get(LIST, {"state": "draft"}).content.decode()
    while True:
        pages.append(names(html))
        if not (older := link(html, "next")):
            break
        assert "state=draft" in older  # the filter rides along
        html = client.get(f"{LIST}?{older}", **htmx("job-table")).content.decode()
    assert [len(page) for page in pages] == [PAGE_SIZE, PAGE_SIZE, 10]
    assert [name for page in pages for name in page] == expected
    assert link(html, "prev") is not None

    back = []
    while newer := link(html, "prev"):
        html = client.get(f"{LIST}?{newer}", **htmx("job-table")).content.decode()
        back.append(names(html))
    assert back == [pages[1], pages[0]]
    assert link(html, "next") is not None


def test_a_new_job_shows_up_as_newer_without_shifting_the_older_page(client_for, owner, team, flavor):
    add_jobs(team, flavor, PAGE_SIZE + 5, prefix="job")
    client = client_for(owner)
    older = link(client.get(LIST).content.decode(), "next")
    second = names(client.get(f"{LIST}?{older}").content.decode())
    make_job(team, flavor, name="brand-new")
    assert names(client.get(f"{LIST}?{older}").content.decode()) == second
    assert names(client.get(LIST).content.decode())[0] == "brand-new"


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "quota_manager"])
def test_who_sees_what_is_unchanged(request, client_for, team, flavor, who):
    make_job(team, flavor, name="theirs")
    elsewhere = make_team("elsewhere", members={make_user("eve"): Membership.Role.OWNER})
    make_job(elsewhere, flavor, name="elsewhere-job")
    html = client_for(request.getfixturevalue(who)).get(LIST).content.decode()
    assert "theirs" in names(html)
    assert ("elsewhere-job" in names(html)) == (who == "quota_manager")
    assert ('value="elsewhere"' in html) == (who == "quota_manager")


def test_outsiders_see_no_jobs_and_cannot_filter_by_a_team_they_cannot_see(client_for, outsider, team, flavor):
    make_job(team, flavor, name="theirs")
    client = client_for(outsider)
    assert names(client.get(LIST).content.decode()) == []
    html = client.get(LIST, {"team": team.slug}).content.decode()
    assert "Select a valid choice" in html and names(html) == []


def test_a_member_picks_a_team_from_a_select_of_their_teams(client_for, member, team, flavor):
    other = make_team("speech", members={member: Membership.Role.MEMBER})
    make_team("hidden")
    make_job(team, flavor, name="vision-job")
    make_job(other, flavor, name="speech-job")
    html = client_for(member).get(LIST, {"team": "speech"}).content.decode()
    assert '<select name="team" id="id_team">' in html
    assert '<option value="speech" selected>' in html and '<option value="vision">' in html
    assert 'value="hidden"' not in html
    assert names(html) == ["speech-job"]


def test_a_quota_manager_types_a_team_with_suggestions_instead_of_a_thousand_options(client_for, flavor):
    for index in range(TEAM_SELECT_MAX + 30):
        make_team(f"team-{index:03d}")
    client = client_for(make_user("quinn", quota_manager=True))
    html = client.get(LIST, {"team": "team-070"}).content.decode()
    assert '<input type="search" name="team" id="id_team" value="team-070"' in html
    assert html.count("<option") < 44  # a few suggestions, the states, kinds and flavors (notebooks added one of each)
    suggestions = client.get(LIST, {"team": "team-07"}, **htmx("team-options")).content.decode()
    assert suggestions.strip().startswith('<datalist id="team-options">') and "<html" not in suggestions
    assert re.findall(r'<option value="([^"]+)">', suggestions) == [f"team-{index:03d}" for index in range(70, 80)]


def test_suggestions_only_name_teams_one_can_see(client_for, member, team):
    make_team("vista")
    suggestions = client_for(member).get(LIST, {"team": "vi"}, **htmx("team-options")).content.decode()
    assert re.findall(r'<option value="([^"]+)">', suggestions) == ["vision"]


def test_a_team_that_does_not_exist_is_an_error_not_every_job(client_for, flavor):
    client = client_for(make_user("quinn", quota_manager=True))
    make_job(make_team("vision"), flavor, name="vision-job")
    html = client.get(LIST, {"team": "visoin"}).content.decode()
    assert "Select a valid choice" in html and names(html) == []
    assert 'value="visoin"' in html  # what was typed stays, to be corrected


def test_the_form_keeps_every_value_chosen_and_typed(client_for, owner, team, flavors):
    make_job(team, flavors[1], name="train-a", submitter=owner)
    params = {"team": "vision", "state": ["running", "draft"], "kind": "training", "flavor": "a100",
              "submitter": owner.username, "q": "train"}
    html = client_for(owner).get(LIST, params).content.decode()
    assert '<option value="vision" selected>' in html
    assert '<option value="running" selected>' in html and '<option value="draft" selected>' in html
    assert '<option value="training" selected>' in html
    assert '<option value="a100" selected>' in html
    assert f'id="id_submitter" value="{owner.username}"' in html
    assert 'id="id_q" value="train"' in html
    assert names(html) == ["train-a"]
