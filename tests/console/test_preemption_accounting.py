"""GPU-hours lost to preemption in the accounting (docs/preemption.md): lost on the victim's
lines, charged on the preemptor's, each team seeing its own; and the victim's sentence on its
job page and in the API, for the owner, a member and an outsider."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from console import preemptions
from console.accounting import month_window, usage_rows
from jobs.models import Job, Preemption
from quotas.models import PriorityClass
from tenants.models import Membership, Team

from ..builders import make_job, make_team, make_user

pytestmark = pytest.mark.django_db

NOVEMBER = month_window("2026-11", UTC)


@pytest.fixture
def utc(settings):
    settings.TIME_ZONE = "UTC"


@pytest.fixture
def bystander(db):
    user = make_user("bea")
    make_team("bystanders", members={user: Membership.Role.OWNER})
    return user


@pytest.fixture
def preempted(utc, team, flavor, member, outsider):
    """vision's job bert (max's) preempted twice by other-team's llama-ft (oscar's), 3.20 and
    1.00 GPU-hours lost; once more by a workload not ours, 0.50."""
    high = PriorityClass.objects.create(name="high", value=0)
    other = Team.objects.get(slug="other-team")
    victim = make_job(team, flavor, name="bert", submitter=member)
    by = make_job(other, flavor, name="llama-ft", submitter=outsider, priority=high)
    common = dict(job=victim, reason="InClusterQueue", run_started_at=datetime(2026, 11, 5, 13, 0, tzinfo=UTC))
    Preemption.objects.create(**common, by_job=by, by_team=other, by_priority="high", lost_gpu_hours=Decimal("3.20"),
                              preempted_at=datetime(2026, 11, 5, 14, 10, tzinfo=UTC),
                              checkpoint_at=datetime(2026, 11, 5, 14, 2, tzinfo=UTC))
    Preemption.objects.create(**common, by_job=by, by_team=other, by_priority="high", lost_gpu_hours=Decimal("1.00"),
                              preempted_at=datetime(2026, 11, 6, 9, 0, tzinfo=UTC))
    Preemption.objects.create(**common, lost_gpu_hours=Decimal("0.50"), preempted_at=datetime(2026, 11, 7, 9, 0, tzinfo=UTC))
    Preemption.objects.create(**common, lost_gpu_hours=Decimal("9.99"), preempted_at=datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    return victim, by


def test_lost_and_charged_add_up_per_team(preempted):
    totals = {t.team: t for t in preemptions.totals(*NOVEMBER)}
    assert (totals["vision"].lost_gpu_hours, totals["vision"].charged_gpu_hours, totals["vision"].preempted) == (
        Decimal("4.70"), 0, 3)
    assert (totals["other-team"].lost_gpu_hours, totals["other-team"].charged_gpu_hours,
            totals["other-team"].preempting) == (0, Decimal("4.20"), 2)
    assert set(totals) == {"vision", "other-team"}  # the workload not ours is charged to nobody


def test_the_lines_put_lost_on_the_victims_line_and_charged_on_the_preemptors(preempted):
    rows = [(r.day.isoformat(), r.team, r.flavor, r.user, r.gpu_hours, r.lost_to_preemption_gpu_hours,
             r.charged_for_preemption_gpu_hours) for r in usage_rows(*NOVEMBER)]
    assert rows == [
        ("2026-11-05", "other-team", "h100", "oscar", 0, 0, Decimal("3.20")),
        ("2026-11-05", "vision", "h100", "max", 0, Decimal("3.20"), 0),
        ("2026-11-06", "other-team", "h100", "oscar", 0, 0, Decimal("1.00")),
        ("2026-11-06", "vision", "h100", "max", 0, Decimal("1.00"), 0),
        ("2026-11-07", "vision", "h100", "max", 0, Decimal("0.50"), 0),
    ]


def csv_of(client) -> list[list[str]]:
    response = client.get(reverse("console:usage-csv"), {"month": "2026-11"})
    return [row[:2] + row[-2:] for row in csv.reader(io.StringIO(response.content.decode()))][1:]


@pytest.mark.parametrize("who, expected", [
    ("owner", [["2026-11-05", "vision", "3.20", "0.00"], ["2026-11-06", "vision", "1.00", "0.00"],
               ["2026-11-07", "vision", "0.50", "0.00"]]),
    ("member", [["2026-11-05", "vision", "3.20", "0.00"], ["2026-11-06", "vision", "1.00", "0.00"],
                ["2026-11-07", "vision", "0.50", "0.00"]]),
    ("outsider", [["2026-11-05", "other-team", "0.00", "3.20"], ["2026-11-06", "other-team", "0.00", "1.00"]]),
    ("bystander", []),
], ids=["the victim's owner", "the victim's member", "the preemptor's owner", "a third team"])
def test_each_team_sees_its_own_side_of_a_preemption_in_the_csv(request, client_for, preempted, who, expected):
    assert csv_of(client_for(request.getfixturevalue(who))) == expected


@pytest.mark.parametrize("who, shown, hidden", [
    ("owner", "4.70 GPU-hours (3×)", "other-team"),
    ("outsider", "4.20 GPU-hours (2×)", "vision"),
    ("bystander", "No preemption this month.", "vision"),
])
def test_the_usage_page_has_a_lost_to_preemption_table(request, client_for, preempted, who, shown, hidden):
    html = client_for(request.getfixturevalue(who)).get(reverse("console:usage"), {"month": "2026-11"}).content.decode()
    section = html[html.index("Lost to preemption"):]
    assert shown in section and hidden not in section


SENTENCE = ("Preempted by other-team's job llama-ft (priority high); 3.20 GPU-hours since its last checkpoint at "
            "14:02 are charged to other-team.")


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_the_victims_people_read_why_on_its_page_and_in_the_api(request, client_for, preempted, who):
    victim, _ = preempted
    person = request.getfixturevalue(who)
    html = client_for(person).get(reverse("jobs:detail", args=[victim.pk])).content.decode()
    assert SENTENCE.replace("'", "&#x27;") in html
    api = APIClient()
    api.force_login(person)
    found = api.get(f"/api/v1/jobs/{victim.pk}").json()["preemption"]
    assert found["preemptions"][-1]["explanation"] == SENTENCE
    assert [p["lost_gpu_hours"] for p in found["preemptions"]] == ["9.99", "0.50", "1.00", "3.20"]
    assert found["preemptions"][-1]["by_team"] == "other-team" and found["preemptions"][-1]["by_job"] == "llama-ft"
    assert found["checkpoint_grace_seconds"] == 30 and found["protected_until"] is None


def test_an_outsider_learns_nothing_of_the_victim(client_for, preempted, bystander):
    victim, _ = preempted
    assert client_for(bystander).get(reverse("jobs:detail", args=[victim.pk])).status_code == 404
    api = APIClient()
    api.force_login(bystander)
    assert api.get(f"/api/v1/jobs/{victim.pk}").status_code == 404


def test_the_preemptors_page_says_what_its_team_is_charged(client_for, preempted, outsider):
    _, by = preempted
    html = client_for(outsider).get(reverse("jobs:detail", args=[by.pk])).content.decode()
    assert ("Preempted vision's job bert at <time datetime=\"2026-11-05T14:10:00+00:00\">Nov 5, 14:10</time>; its 3.20 "
            "lost GPU-hours are charged to other-team.") in html


def test_a_protected_job_says_until_when(client_for, preempted, owner, flavor, team, utc):
    protecting = PriorityClass.objects.create(name="protecting", value=0, minimum_runtime_seconds=3600)
    job = make_job(team, flavor, name="protected", priority=protecting)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, run_admitted_at=datetime.now(UTC))
    html = client_for(owner).get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "Protected from preemption until" in html and "priority class protecting" in html
