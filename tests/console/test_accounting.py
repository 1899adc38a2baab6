"""GPU-hour accounting against hand-computed cases: only admitted time counts."""

import csv
import io
import random
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import translation

from console.accounting import (
    month_window,
    split_by_day,
    totals,
    usage_rows,
    usage_summary,
)
from jobs.lifecycle import State
from jobs.use.usage import admitted_intervals

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


def test_inference_is_charged_the_replicas_it_ran_not_its_maximum(team, flavor, member):
    # 1-3 replicas x 2 GPUs: one replica 10:00-10:30, the HPA adds two, all three until 11:00:
    # 0.5 h x 2 + 0.5 h x 6 = 4 GPU-hours (its maximum for the hour would have been 6).
    job = job_with_path(team, flavor, member, [(S.SUBMITTED, at(8, 9))],
                        kind="inference", port=8000, min_replicas=1, max_replicas=3, gpus_per_worker=2)
    assert job.observe(S.RUNNING, reason="Serving", message="1 replica ready.", gpus=2, at=at(8, 10))
    assert job.observe(S.RUNNING, reason="Serving", message="3 replicas ready.", gpus=6, at=at(8, 10, 30))
    assert job.transition(S.CANCELLING, at=at(8, 11)) and job.transition(S.CANCELLED, at=at(8, 11))
    [row] = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert row.gpu_hours == Decimal("4.00")


def test_inference_admitted_before_the_watcher_counted_is_charged_its_minimum_replicas(team, flavor, member):
    job_with_path(team, flavor, member, [(S.SUBMITTED, at(8, 9)), (S.ADMITTED, at(8, 10)), (S.RUNNING, at(8, 10)),
                                         (S.CANCELLING, at(8, 11)), (S.CANCELLED, at(8, 11))],
                  kind="inference", port=8000, min_replicas=1, max_replicas=3, gpus_per_worker=2)
    [row] = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert row.gpu_hours == Decimal("2.00")


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
    t = lambda h: at(1, h)
    assert admitted_intervals([(t(h), s) for h, s in events], t(10)) == [(t(a), t(b)) for a, b in intervals]


def test_split_by_day_handles_a_23_hour_day():
    tz = ZoneInfo("Europe/Berlin")
    # Midnight of the 28th in Berlin is 23:00 UTC; of the 29th (summer time by then) 22:00 UTC.
    start, end = datetime(2027, 3, 27, 23, tzinfo=UTC), datetime(2027, 3, 29, 0, tzinfo=UTC)
    assert split_by_day(start, end, tz) == [(date(2027, 3, 28), 23 * 3600.0), (date(2027, 3, 29), 2 * 3600.0)]


def test_split_by_day_counts_the_25_hours_of_the_day_summer_time_ends():
    tz = ZoneInfo("Europe/Berlin")
    start, end = month_window("2026-10", tz)[0] + timedelta(days=23), month_window("2026-10", tz)[0] + timedelta(days=26)
    assert [hours for _, hours in split_by_day(start, end, tz)] == [24 * 3600.0, 25 * 3600.0, 24 * 3600.0]


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
        ["date", "team", "flavor", "user", "gpu_hours", "cost", "used_gpu_hours", "idle_gpu_hours",
         "measured_gpu_hours", "lost_to_preemption_gpu_hours", "charged_for_preemption_gpu_hours"],
        ["2026-11-05", "vision", "h100", "max", "8.00", "28.00", "0.00", "0.00", "0.00", "0.00", "0.00"],
        ["2026-11-09", "other-team", "h100", "oscar", "1.00", "3.50", "0.00", "0.00", "0.00", "0.00", "0.00"],
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


def test_the_charts_numbers_are_svg_numbers_in_any_language(client_for, quota_manager, two_teams):
    # Localized, a German page would write y="105,0": not a number to an SVG renderer.
    with translation.override("de"):
        html = client_for(quota_manager).get(reverse("console:usage"), {"month": "2026-11"}).content.decode()
    bars = re.findall(r'<rect x="([^"]*)" y="([^"]*)" width="14" height="([^"]*)"', html)
    assert len(bars) == 2  # console.usage_chart's layout: 22 a day after a 60 margin, 160 high for 8 GPU-hours
    assert {(float(x), float(y), float(h)) for x, y, h in bars} == {(152.0, 56.0, 160.0), (240.0, 196.0, 20.0)}


def test_the_team_picker_offers_the_teams_one_sees_with_the_chosen_one_selected(client_for, quota_manager, two_teams):
    html = client_for(quota_manager).get(reverse("console:usage"), {"month": "2026-11", "team": "other-team"}).content.decode()
    assert '<option value="other-team" selected>other-team</option>' in html
    assert '<option value="vision">vision</option>' in html


def test_past_a_select_of_teams_the_picker_is_an_input_with_suggestions(client_for, quota_manager, two_teams):
    from tenants.picker import TEAM_SELECT_MAX

    from ..builders import make_team

    for index in range(TEAM_SELECT_MAX):
        make_team(f"lab-{index:02d}")
    client = client_for(quota_manager)
    html = client.get(reverse("console:usage"), {"month": "2026-11", "team": "lab-07"}).content.decode()
    assert 'list="team-options"' in html and 'value="lab-07"' in html  # kept as typed
    assert html.count("<option") <= 20  # a first few suggestions, not every team
    suggested = client.get(reverse("console:usage"), {"team": "lab-1"}, HTTP_HX_REQUEST="true",
                           HTTP_HX_TARGET="team-options").content.decode()
    assert suggested.startswith('<datalist id="team-options">') and "<html" not in suggested
    assert suggested.count("<option") == 10 and 'value="lab-10"' in suggested and "vision" not in suggested


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
        ["date", "team", "flavor", "user", "gpu_hours", "cost", "used_gpu_hours", "idle_gpu_hours",
         "measured_gpu_hours", "lost_to_preemption_gpu_hours", "charged_for_preemption_gpu_hours"],
        ["2026-11-05", "vision", "h100", "max", "8.00", "28.00", "0.00", "0.00", "0.00", "0.00", "0.00"],
    ]


def test_usage_report_command_refuses_a_bad_month(db):
    with pytest.raises(CommandError, match="not a month"):
        call_command("usage_report", "--month", "2026-13")


def test_a_month_window_is_the_whole_month():
    assert month_window("2026-12", UTC) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert month_window("2027-02", UTC)[1] - month_window("2027-02", UTC)[0] == timedelta(days=28)



# --- the figures of the stored intervals are those of the replayed events -------------------
def replayed_rows(start, end, now, tz):
    """The report as it was computed before the intervals were stored: every job's events
    walked by ``admitted_intervals``, cut at the window and at local midnights in Python."""
    from collections import defaultdict

    from jobs.models import Job

    until = min(end, now)
    seconds = defaultdict(float)
    for job in Job.objects.select_related("team", "flavor", "submitter"):
        events = list(job.events.order_by("created_at", "id").values_list("created_at", "to_state"))
        for lo, hi in admitted_intervals(events, until):
            lo, hi = max(lo, start), min(hi, until)
            if lo >= hi:
                continue
            user = job.submitter.get_username() if job.submitter_id else "(deleted user)"
            for day, secs in split_by_day(lo, hi, tz):
                seconds[(day, job.team.slug, job.flavor.name, user, job.flavor.cost_per_gpu_hour)] += secs * job.total_gpus
    rows = []
    for (day, team, flavor, user, price), secs in sorted(seconds.items(), key=lambda kv: kv[0][:4]):
        hours = (Decimal(secs) / 3600).quantize(Decimal("0.01"))
        if hours:
            rows.append((day, team, flavor, user, hours, None if price is None else (hours * price).quantize(Decimal("0.01"))))
    return rows


@pytest.fixture
def history(team, priced, member, owner, outsider):
    """Seven teams' jobs over October 2026 (Berlin leaves summer time on the 25th): preempted,
    requeued, cancelled, crossing midnight and the month's edges, some still running."""
    from ..builders import make_team

    rng = random.Random(11)
    flavor = make_flavor("a100")
    teams = [team, team.__class__.objects.get(slug="other-team")] + [make_team(f"t{i}") for i in range(5)]
    people = {team.pk: [member, owner], teams[1].pk: [outsider]}
    begin = datetime(2026, 9, 29, tzinfo=UTC)
    for n in range(60):
        crew = teams[n % len(teams)]
        job = make_job(crew, priced if n % 3 else flavor, submitter=rng.choice(people.get(crew.pk, [None, owner])),
                       workers=1 + n % 3, gpus_per_worker=1 + n % 4)
        when = begin + timedelta(seconds=rng.randrange(0, 34 * 86400))
        path = rng.choice([
            [S.SUBMITTED, S.QUEUED, S.ADMITTED, S.RUNNING, S.SUCCEEDED],
            [S.SUBMITTED, S.ADMITTED, S.RUNNING, S.PREEMPTED, S.QUEUED, S.ADMITTED, S.RUNNING, S.FAILED],
            [S.SUBMITTED, S.ADMITTED, S.PREEMPTED, S.ADMITTED, S.CANCELLING, S.CANCELLED],
            [S.SUBMITTED, S.QUEUED, S.ADMITTED, S.RUNNING],
            [S.SUBMITTED, S.QUEUED, S.CANCELLING, S.CANCELLED],
        ])
        for state in path:
            assert job.transition(state, reason=state.label, at=when)
            when += timedelta(seconds=rng.choice([0, 7, 1800, 5400, 40000, 100000]), microseconds=rng.randrange(10**6))


@pytest.mark.parametrize("tz", [UTC, ZoneInfo("Europe/Berlin")], ids=["UTC", "Berlin"])
@pytest.mark.parametrize("now", [datetime(2026, 10, 20, 12, 30, tzinfo=UTC), datetime(2026, 11, 15, tzinfo=UTC)],
                         ids=["mid-month", "after"])
def test_the_stored_intervals_give_the_figures_of_the_replayed_events(history, tz, now):
    start, end = month_window("2026-10", tz)
    expected = replayed_rows(start, end, now, tz)
    rows = usage_rows(start, end, now=now, tz=tz)
    assert len(rows) > 20
    assert [(r.day, r.team, r.flavor, r.user, r.gpu_hours, r.cost) for r in rows] == expected
    summary = usage_summary(start, end, now=now, tz=tz)
    assert summary.total == sum(r.gpu_hours for r in rows)
    assert summary.total_cost == sum(r.cost for r in rows if r.cost is not None)
    for key, table in (("team", summary.by_team), ("flavor", summary.by_flavor), ("user", summary.by_user)):
        assert table == totals(rows, key)
    # The chart: five teams apart, the others stacked; every day's column is the day's lines.
    names = [t["name"] for t in summary.chart["teams"]]
    assert names[-1] == "other teams" and len(names) == 6
    by_day = {d: h for d, h, _ in totals(rows, "day")}
    assert {c["day"]: c["total"] for c in summary.chart["columns"] if c["total"]} == by_day


def test_the_page_sums_lines_rounded_half_to_even(team, priced, member):
    # 18 GPU-seconds is 0.005 GPU-hour: each such line rounds to 0.00, and 54 s (0.015) to
    # 0.02; the page adds the lines, not the seconds.
    for day, seconds in ((5, 18), (6, 18), (7, 54)):
        job_with_path(team, priced, member, [(S.SUBMITTED, at(day, 9)), (S.ADMITTED, at(day, 10)),
                                             (S.SUCCEEDED, at(day, 10) + timedelta(seconds=seconds))])
    rows = usage_rows(*NOV, now=END_OF_NOV, tz=UTC)
    assert [(r.day.day, r.gpu_hours, r.cost) for r in rows] == [(7, Decimal("0.02"), Decimal("0.07"))]
    summary = usage_summary(*NOV, now=END_OF_NOV, tz=UTC)
    assert (summary.total, summary.total_cost) == (Decimal("0.02"), Decimal("0.07"))
    assert summary.by_team == [("vision", Decimal("0.02"), Decimal("0.07"))]
