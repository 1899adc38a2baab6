"""The five busiest pages cost the same SQL queries however many teams and jobs there are:
a page asked with few rows and again with many more must not make one query more (an N+1
would). Timing lives in bench/pages.py, never here."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.lifecycle import State
from quotas.models import Cohort
from tenants.models import Membership

from ..builders import make_flavor, make_job, make_quota, make_team, make_user

pytestmark = pytest.mark.django_db


def queries(client, url, params=None) -> int:
    assert client.get(url, params).status_code == 200  # warm: the session, the permission cache
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, params).status_code == 200
    return len(ctx.captured_queries)


@pytest.fixture
def flavors(db):
    return [make_flavor("h100"), make_flavor("a100")]


def add_teams(count: int, flavors, *, member=None, jobs_each: int = 2, start: int = 0):
    """Teams with an owner, quotas on both flavors (in a cohort), jobs admitted and waiting."""
    cohort, _ = Cohort.objects.get_or_create(name="research")
    for index in range(start, start + count):
        owner = make_user(f"owner{index}")
        members = {owner: Membership.Role.OWNER}
        if member is not None:
            members[member] = Membership.Role.MEMBER
        team = make_team(f"team{index:03d}", members=members)
        for flavor in flavors:
            make_quota(team, flavor, nominal_gpus=4, cohort=cohort)
        add_jobs(team, flavors[0], owner, jobs_each, prefix=f"t{index}")


def add_jobs(team, flavor, submitter, count: int, prefix="job"):
    for index in range(count):
        job = make_job(team, flavor, name=f"{prefix}-{index}", submitter=submitter)
        path = [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING]
        if index % 2:
            path.append(State.SUCCEEDED)
        for state in path[: 2 + index % 4]:
            job.transition(state, reason=state.label)


def test_the_dashboard_costs_the_same_for_3_teams_as_for_30(client_for, flavors):
    member = make_user("max")
    client = client_for(member)
    add_teams(3, flavors, member=member)
    few = queries(client, reverse("dashboard"))
    add_teams(27, flavors, member=member, start=3)
    assert queries(client, reverse("dashboard")) == few


def test_the_team_page_costs_the_same_for_5_jobs_as_for_60(client_for, flavors):
    member = make_user("max")
    client = client_for(member)
    add_teams(1, flavors, member=member, jobs_each=5)
    url = reverse("console:team", args=["team000"])
    few = queries(client, url)
    team = Membership.objects.get(user=member).team
    add_jobs(team, flavors[1], member, 55, prefix="more")
    for index in range(10):
        Membership.objects.create(team=team, user=make_user(f"viewer{index}"), role=Membership.Role.VIEWER)
    assert queries(client, url) == few


def test_the_job_list_costs_the_same_for_5_jobs_as_for_60(client_for, flavors):
    member = make_user("max")
    client = client_for(member)
    add_teams(1, flavors, member=member, jobs_each=5)
    few = queries(client, reverse("jobs:list"))
    add_teams(5, flavors, member=member, jobs_each=11, start=1)
    assert queries(client, reverse("jobs:list")) == few


def test_the_quota_console_costs_the_same_for_3_teams_as_for_30(client_for, flavors, settings, tmp_path):
    settings.KUBECONFIG = str(tmp_path / "missing")  # no cluster: the page says so
    client = client_for(make_user("quinn", quota_manager=True))
    add_teams(3, flavors)
    few = queries(client, reverse("console:capacity"))
    add_teams(57, flavors, start=3)  # more than one page of teams
    assert queries(client, reverse("console:capacity")) == few


def test_the_quota_console_shows_one_page_of_teams_and_finds_the_others(client_for, flavors, settings, tmp_path):
    settings.KUBECONFIG = str(tmp_path / "missing")
    client = client_for(make_user("quinn", quota_manager=True))
    add_teams(60, flavors, jobs_each=0)
    html = client.get(reverse("console:capacity")).content.decode()
    assert "Page 1 of 2 (60 teams)" in html and ">team000<" in html and ">team059<" not in html
    html = client.get(reverse("console:capacity"), {"q": "team059"}).content.decode()
    assert ">team059<" in html and ">team000<" not in html


def test_the_usage_page_costs_the_same_for_3_teams_as_for_30(client_for, flavors):
    client = client_for(make_user("quinn", quota_manager=True))
    month = timezone.localdate().strftime("%Y-%m")
    add_teams(3, flavors)
    few = queries(client, reverse("console:usage"), {"month": month})
    add_teams(27, flavors, start=3)
    assert queries(client, reverse("console:usage"), {"month": month}) == few


def test_the_usage_page_sums_what_the_csv_lists(client_for, flavors):
    client = client_for(make_user("quinn", quota_manager=True))
    add_teams(8, flavors, jobs_each=4)
    # Push the admissions back an hour so every running job has GPU time to count.
    from jobs.models import GpuInterval, JobEvent
    JobEvent.objects.update(created_at=timezone.now() - timedelta(hours=1))
    GpuInterval.objects.update(started_at=timezone.now() - timedelta(hours=1))
    month = timezone.localdate().strftime("%Y-%m")
    csv = client.get(reverse("console:usage-csv"), {"month": month}).content.decode().splitlines()[1:]
    total = sum(float(line.split(",")[4]) for line in csv)
    html = client.get(reverse("console:usage"), {"month": month}).content.decode()
    assert total > 0 and f"Total: <strong>{total:.2f} GPU-hours</strong>" in html
    assert "other teams" in html  # eight teams: the chart keeps five apart


def test_the_dashboard_pages_a_quota_managers_teams(client_for, flavors):
    client = client_for(make_user("quinn", quota_manager=True))
    add_teams(30, flavors, jobs_each=0)
    html = client.get(reverse("dashboard")).content.decode()
    assert "Page 1 of 2 (30 teams)" in html and "Team000" in html and "Team029" not in html
    assert "Team029" in client.get(reverse("dashboard"), {"q": "team029"}).content.decode()
