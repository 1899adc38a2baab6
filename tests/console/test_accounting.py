"""GPU-hour accounting against hand-computed cases: only admitted time counts."""

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs.lifecycle import State
from console.accounting import admitted_intervals, month_window, split_by_day, usage_rows

from ..builders import make_flavor, make_job

pytestmark = pytest.mark.django_db

S = State
NOV = month_window("2026-11", UTC)
END_OF_NOV = NOV[1]


def at(day, hour, minute=0):
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def job_with_path(team, flavor, submitter, steps, **fields):
    """``steps``: (state, time) pairs walked through ``job.transition``."""
    job = make_job(team, flavor, submitter=submitter, **fields)
    for state, when in steps:
        assert job.transition(state, reason=state.label, at=when)
    return job


@pytest.fixture
def priced(db):
    return make_flavor("h100", cost_per_gpu_hour=Decimal("3.50"))


def test_preempted_and_requeued_job_counts_only_its_admitted_time(team, priced, member):
    # 2 workers x 4 GPUs; admitted 10:00-12:00, preempted, queued, admitted again 13:30-14:00:
    # 2.5 h x 8 GPUs = 20 GPU-hours, at 3.50 = 70.00.
    job_with_path(team, priced, member, [
        (S.SUBMITTED, at(5, 9)), (S.QUEUED, at(5, 9, 1)), (S.ADMITTED, at(5, 10)), (S.RUNNING, at(5, 10, 5)),
        (S.PREEMPTED, at(5, 12)), (S.QUEUED, at(5, 12, 1)), (S.ADMITTED, at(5, 13, 30)),
        (S.RUNNING, at(5, 13, 35)), (S.SUCCEEDED, at(5, 14)),
    ], workers=2, gpus_per_worker=4)
    [row] = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert (row.day, row.team, row.flavor, row.user) == (date(2026, 11, 5), "vision", "h100", "max")
    assert row.gpu_hours == Decimal("20.00") and row.cost == Decimal("70.00")


def test_a_job_that_never_got_admitted_counts_nothing(team, flavor, member):
    job_with_path(team, flavor, member, [(S.SUBMITTED, at(5, 9)), (S.QUEUED, at(5, 9)), (S.CANCELLING, at(5, 11)),
                                         (S.CANCELLED, at(5, 11, 1))])
    assert usage_rows(*NOV, now=END_OF_NOV, tz=UTC) == []


def test_a_cancelled_job_counts_until_it_is_gone_and_has_no_cost_without_a_price(team, flavor, member):
    # 1 GPU admitted 10:00, cancelling at 11:00 still holds it until cancelled at 11:30: 1.5 GPU-hours.
    job_with_path(team, flavor, member, [(S.SUBMITTED, at(6, 9)), (S.ADMITTED, at(6, 10)), (S.RUNNING, at(6, 10)),
                                         (S.CANCELLING, at(6, 11)), (S.CANCELLED, at(6, 11, 30))])
    [row] = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert row.gpu_hours == Decimal("1.50") and row.cost is None


def test_a_running_job_counts_until_now(team, flavor, member):
    job_with_path(team, flavor, member, [(S.SUBMITTED, at(7, 8)), (S.ADMITTED, at(7, 9)), (S.RUNNING, at(7, 9))],
                  gpus_per_worker=2)
    [row] = usage_rows(*NOV, now=at(7, 12), tz=UTC)
    assert row.gpu_hours == Decimal("6.00")


def test_time_is_split_at_midnight_in_the_platform_time_zone(team, flavor, member):
    # 22:00-02:00 UTC is 23:00-03:00 in Berlin (UTC+1 in November).
    job_with_path(team, flavor, member, [(S.SUBMITTED, at(5, 21)), (S.ADMITTED, at(5, 22)), (S.SUCCEEDED, at(6, 2))])
    utc = {r.day.day: r.gpu_hours for r in usage_rows(*NOV, now=END_OF_NOV, tz=UTC)}
    berlin = {r.day.day: r.gpu_hours for r in usage_rows(*NOV, now=END_OF_NOV, tz=ZoneInfo("Europe/Berlin"))}
    assert utc == {5: Decimal("2.00"), 6: Decimal("2.00")}
    assert berlin == {5: Decimal("1.00"), 6: Decimal("3.00")}


def test_the_month_cuts_jobs_that_cross_its_edges(team, flavor, member):
    job = make_job(team, flavor, submitter=member)
    job.transition(S.SUBMITTED, at=datetime(2026, 10, 31, 22, tzinfo=UTC))
    job.transition(S.ADMITTED, at=datetime(2026, 10, 31, 23, tzinfo=UTC))
    job.transition(S.SUCCEEDED, at=at(1, 1))
    [row] = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert (row.day, row.gpu_hours) == (date(2026, 11, 1), Decimal("1.00"))
    october = usage_rows(*month_window("2026-10", UTC), now=END_OF_NOV, tz=UTC)
    assert [r.gpu_hours for r in october] == [Decimal("1.00")]


def test_inference_counts_its_maximum_replicas(team, flavor, member):
    job_with_path(team, flavor, member, [(S.SUBMITTED, at(8, 9)), (S.ADMITTED, at(8, 10)), (S.RUNNING, at(8, 10)),
                                         (S.CANCELLING, at(8, 11)), (S.CANCELLED, at(8, 11))],
                  kind="inference", port=8000, min_replicas=1, max_replicas=3, gpus_per_worker=2)
    [row] = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert row.gpu_hours == Decimal("6.00")


@pytest.mark.parametrize("case, events, intervals", [
    ("admitted then finished", [(1, S.ADMITTED), (2, S.RUNNING), (5, S.SUCCEEDED)], [(1, 5)]),
    ("preempted and admitted again", [(1, S.ADMITTED), (3, S.PREEMPTED), (4, S.QUEUED), (6, S.ADMITTED), (7, S.FAILED)],
     [(1, 3), (6, 7)]),
    ("still running at the cut", [(1, S.ADMITTED), (2, S.RUNNING)], [(1, 10)]),
    ("preempted straight back to admitted", [(1, S.ADMITTED), (2, S.PREEMPTED), (2, S.ADMITTED), (4, S.SUCCEEDED)],
     [(1, 2), (2, 4)]),
    ("never admitted", [(1, S.SUBMITTED), (2, S.QUEUED), (3, S.CANCELLING), (4, S.CANCELLED)], []),
])
def test_admitted_intervals(case, events, intervals):
    t = lambda h: at(1, h)  # noqa: E731
    assert admitted_intervals([(t(h), s) for h, s in events], t(10)) == [(t(a), t(b)) for a, b in intervals]


def test_split_by_day_handles_a_23_hour_day():
    tz = ZoneInfo("Europe/Berlin")
    # Midnight of the 28th in Berlin is 23:00 UTC; of the 29th (summer time by then) 22:00 UTC.
    start, end = datetime(2027, 3, 27, 23, tzinfo=UTC), datetime(2027, 3, 29, 0, tzinfo=UTC)
    assert split_by_day(start, end, tz) == [(date(2027, 3, 28), 23 * 3600.0), (date(2027, 3, 29), 2 * 3600.0)]


# --- the page and the CSV -------------------------------------------------------------------
@pytest.fixture
def two_teams(team, priced, member, outsider):
    job_with_path(team, priced, member, [(S.SUBMITTED, at(5, 9)), (S.ADMITTED, at(5, 10)), (S.SUCCEEDED, at(5, 12))],
                  gpus_per_worker=4)
    other = team.__class__.objects.get(slug="other-team")
    job_with_path(other, priced, outsider, [(S.SUBMITTED, at(9, 9)), (S.ADMITTED, at(9, 10)), (S.SUCCEEDED, at(9, 11))])


def csv_rows(response):
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_the_csv_has_one_row_per_day_team_flavor_and_user(client_for, quota_manager, two_teams):
    response = client_for(quota_manager).get(reverse("console:usage-csv"), {"month": "2026-11"})
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="gpu-usage-2026-11.csv"' in response["Content-Disposition"]
    assert csv_rows(response) == [
        ["date", "team", "flavor", "user", "gpu_hours", "cost"],
        ["2026-11-05", "vision", "h100", "max", "8.00", "28.00"],
        ["2026-11-09", "other-team", "h100", "oscar", "1.00", "3.50"],
    ]


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_team_people_see_only_their_teams_usage(request, client_for, two_teams, who):
    client = client_for(request.getfixturevalue(who))
    rows = csv_rows(client.get(reverse("console:usage-csv"), {"month": "2026-11"}))
    assert [r[1] for r in rows[1:]] == ["vision"]
    html = client.get(reverse("console:usage"), {"month": "2026-11"}).content.decode()
    assert "8.00" in html and "other-team" not in html


def test_the_usage_page_shows_totals_and_a_chart(client_for, quota_manager, two_teams):
    html = client_for(quota_manager).get(reverse("console:usage"), {"month": "2026-11"}).content.decode()
    assert "Total: <strong>9.00 GPU-hours</strong>" in html and "cost 31.50" in html
    assert "<svg" in html and "2026-11-05 vision: 8.00 GPU-hours" in html


def test_a_team_filter_narrows_the_csv(client_for, quota_manager, two_teams):
    rows = csv_rows(client_for(quota_manager).get(reverse("console:usage-csv"), {"month": "2026-11", "team": "other-team"}))
    assert [r[1] for r in rows[1:]] == ["other-team"]


def test_usage_report_command_prints_the_month(two_teams):
    out = io.StringIO()
    call_command("usage_report", "--month", "2026-11", stdout=out)
    text = out.getvalue()
    assert "GPU-hours in 2026-11 (UTC): 9.00" in text
    assert "vision" in text and "8.00 GPU-h  cost 28.00" in text and "oscar" in text


def test_usage_report_command_writes_csv(two_teams):
    out = io.StringIO()
    call_command("usage_report", "--month", "2026-11", "--format", "csv", "--team", "vision", stdout=out)
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [
        ["date", "team", "flavor", "user", "gpu_hours", "cost"],
        ["2026-11-05", "vision", "h100", "max", "8.00", "28.00"],
    ]


def test_usage_report_command_refuses_a_bad_month(db):
    with pytest.raises(CommandError, match="not a month"):
        call_command("usage_report", "--month", "2026-13")


def test_a_month_window_is_the_whole_month():
    assert month_window("2026-12", UTC) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert month_window("2027-02", UTC)[1] - month_window("2027-02", UTC)[0] == timedelta(days=28)

