"""Used and idle GPU-hours: the rule (jobs.use.gpu_use.use_of), the sampler against a real HTTP
server standing in for Prometheus (cluster/prometheus_standin.py), and the accounting's
columns (rows, CSV, page, per flavor), scoped to the teams a person sees."""

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from cluster.prometheus import PrometheusUnavailable
from console.accounting import CSV_HEADER, flavor_totals, month_window, usage_rows, usage_summary
from jobs.lifecycle import State
from jobs.models import GpuInterval, GpuUse
from jobs.use import gpu_use, idle
from tests.standin import gpus_of

from ..builders import make_job

pytestmark = pytest.mark.django_db
S = State
NOV = month_window("2026-11", UTC)


def at(day, hour, minute=0, second=0):
    return datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


ADMITTED = at(5, 10)


def running(team, flavor, submitter, *, gpus=4, since=ADMITTED, name="train"):
    job = make_job(team, flavor, name=name, submitter=submitter, workers=1, gpus_per_worker=gpus)
    for state in (S.SUBMITTED, S.QUEUED, S.ADMITTED, S.RUNNING):
        assert job.transition(state, reason=state.label, at=since)
    return job


# --- the rule --------------------------------------------------------------------------------
@pytest.mark.parametrize(("percents", "expected"), [
    ([80, 80, 80, 80], gpu_use.Use(400.0, 320.0, 0.0)),
    ([90, 90, 2, 2], gpu_use.Use(400.0, 184.0, 200.0)),
    ([0, 0, 0, 0], gpu_use.Use(400.0, 0.0, 400.0)),
    ([100], gpu_use.Use(400.0, 400.0, 0.0)),  # one GPU reports: the mean of those that do
    ([], gpu_use.Use(0.0, 0.0, 0.0)),  # none reports: unmeasured, neither used nor idle
], ids=["steady 80 %", "two busy two idle", "all idle", "one of four reporting", "none reporting"])
def test_used_is_measured_time_times_mean_utilization_and_idle_the_share_below_the_threshold(percents, expected):
    assert gpu_use.use_of(4, 100.0, percents, threshold=5.0) == expected


def test_the_idle_threshold_is_the_reclaim_default_when_set(settings):
    settings.IDLE_GPU_THRESHOLD_PERCENT = 12
    assert gpu_use.idle_threshold() == 12.0
    settings.IDLE_GPU_THRESHOLD_PERCENT = None
    assert gpu_use.idle_threshold() == idle.DEFAULT_THRESHOLD_PERCENT


def test_a_sample_across_midnight_is_split_into_the_two_days():
    pieces = gpu_use.split_by_day(datetime(2026, 11, 5, 23, 59, 30, tzinfo=UTC), datetime(2026, 11, 6, 0, 0, 30, tzinfo=UTC))
    assert [(day.day, seconds) for day, seconds in pieces] == [(5, 30.0), (6, 30.0)]


# --- the sampler -------------------------------------------------------------------------------
def test_the_sampler_records_what_the_jobs_gpus_did_once_per_stretch(standin, team, flavor, member, settings):
    settings.GPU_USE_SAMPLE_SECONDS = 60
    job = running(team, flavor, member)
    gpus_of(standin, job, [90, 90, 2, 2])
    assert gpu_use.sample(at(5, 10, 1, 40)) == {"intervals": 1, "jobs_reporting": 1}  # 100 s since admission
    assert gpu_use.sample(at(5, 10, 1, 40)) == {"intervals": 0}  # nothing new to count
    gpu_use.sample(at(5, 10, 2, 40))  # 60 s more
    [use] = GpuUse.objects.all()
    assert (use.day, use.team, use.flavor, use.submitter) == (at(5, 0).date(), team, flavor, member)
    assert use.measured_gpu_seconds == pytest.approx(4 * 160)
    assert use.used_gpu_seconds == pytest.approx(4 * 160 * 0.46)
    assert use.idle_gpu_seconds == pytest.approx(2 * 160)
    assert standin.queries == 2  # one query a sample, whatever the number of jobs


def test_a_gap_longer_than_the_window_stays_unmeasured(standin, team, flavor, member, settings):
    settings.GPU_USE_SAMPLE_SECONDS = 60
    job = running(team, flavor, member, gpus=1)
    gpus_of(standin, job, [50])
    gpu_use.sample(at(5, 11))  # an hour after admission: only the last 120 s are measured
    [use] = GpuUse.objects.all()
    assert (use.measured_gpu_seconds, use.used_gpu_seconds) == (pytest.approx(120), pytest.approx(60))


def test_one_query_samples_many_jobs_and_a_job_without_gpus_reporting_is_unmeasured(standin, team, flavor, member):
    busy = running(team, flavor, member, name="busy")
    quiet = running(team, flavor, member, name="quiet")
    gpus_of(standin, busy, [100, 100, 100, 100])
    assert gpu_use.sample(at(5, 10, 1)) == {"intervals": 2, "jobs_reporting": 1}
    assert standin.queries == 1
    assert list(GpuUse.objects.values_list("interval__job", flat=True)) == [busy.pk]
    assert GpuInterval.objects.get(job=quiet).measured_until == at(5, 10, 1)


def test_the_last_stretch_of_an_ended_job_is_still_counted(standin, team, flavor, member):
    job = running(team, flavor, member, gpus=2)
    gpus_of(standin, job, [50, 50])
    gpu_use.sample(at(5, 10, 1))
    assert job.transition(S.SUCCEEDED, reason="Succeeded", at=at(5, 10, 1, 30))
    gpu_use.sample(at(5, 10, 2))
    [use] = GpuUse.objects.all()
    assert use.measured_gpu_seconds == pytest.approx(2 * 90)  # until it ended, not until the sample


def test_prometheus_away_records_nothing_and_says_why(settings, team, flavor, member):
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing listens on the discard port
    from cluster.prometheus import prometheus_from_settings
    prometheus_from_settings.cache_clear()
    running(team, flavor, member)
    with pytest.raises(PrometheusUnavailable):
        gpu_use.sample(at(5, 10, 1))
    assert "cannot be reached" in gpu_use.sample_quietly(at(5, 10, 1))["skipped"]
    assert not GpuUse.objects.exists()
    assert GpuInterval.objects.get().measured_until is None
    prometheus_from_settings.cache_clear()


# --- the accounting ------------------------------------------------------------------------------
@pytest.fixture
def measured(standin, team, flavor, member, outsider):
    """vision's job at 80 % on 4 GPUs for 100 s, other-team's at 0 % on 1 GPU."""
    job = running(team, flavor, member)
    gpus_of(standin, job, [80, 80, 80, 80])
    other_team = team.__class__.objects.get(slug="other-team")
    other = running(other_team, flavor, outsider, gpus=1, name="idle")
    gpus_of(standin, other, [0])
    gpu_use.sample(at(5, 10, 1, 40))
    for one in (job, other):
        assert one.transition(S.SUCCEEDED, reason="Succeeded", at=at(5, 10, 1, 40))
    return job, other


def test_the_rows_have_used_and_idle_beside_allocated(measured):
    rows = {row.team: row for row in usage_rows(*NOV, now=at(30, 0), tz=UTC)}
    vision, other = rows["vision"], rows["other-team"]
    assert vision.gpu_hours == Decimal("0.11")  # 400 GPU-seconds
    assert (vision.measured_gpu_hours, vision.used_gpu_hours, vision.idle_gpu_hours) == (
        Decimal("0.11"), Decimal("0.09"), Decimal("0.00"))  # 400 s x 80 % = 320 s
    assert (other.measured_gpu_hours, other.used_gpu_hours, other.idle_gpu_hours) == (
        Decimal("0.03"), Decimal("0.00"), Decimal("0.03"))


def test_the_summary_and_the_flavor_totals_agree_with_the_rows(measured, flavor):
    summary = usage_summary(*NOV, now=at(30, 0), tz=UTC)
    assert (summary.measured, summary.used, summary.idle) == (Decimal("0.14"), Decimal("0.09"), Decimal("0.03"))
    [line] = summary.tables["flavor"]
    assert (line.name, line.gpu_hours, line.used_gpu_hours, line.idle_gpu_hours) == (
        "h100", Decimal("0.14"), Decimal("0.09"), Decimal("0.03"))
    [total] = flavor_totals(*NOV, now=at(30, 0), tz=UTC)
    assert (total.name, total.gpu_hours, total.used_gpu_hours, total.idle_gpu_hours, total.measured_gpu_hours) == (
        "h100", Decimal("0.14"), Decimal("0.09"), Decimal("0.03"), Decimal("0.14"))


def test_the_csv_has_used_idle_and_measured_columns_of_the_teams_one_sees(measured, client_for, member, quota_manager):
    def rows(user):
        response = client_for(user).get(reverse("console:usage-csv"), {"month": "2026-11"})
        return list(csv.DictReader(io.StringIO(response.content.decode())))

    assert list(rows(quota_manager)[0]) == CSV_HEADER
    assert [(r["team"], r["gpu_hours"], r["used_gpu_hours"], r["idle_gpu_hours"], r["measured_gpu_hours"])
            for r in rows(quota_manager)] == [("other-team", "0.03", "0.00", "0.03", "0.03"),
                                              ("vision", "0.11", "0.09", "0.00", "0.11")]
    assert [r["team"] for r in rows(member)] == ["vision"]  # member of vision only


def test_the_usage_page_shows_used_and_idle_per_team_to_those_who_see_the_team(measured, client_for, member, outsider):
    page = client_for(member).get(reverse("console:usage"), {"month": "2026-11"}).content.decode()
    assert "<td>vision</td><td>0.11</td><td>—</td><td>0.09</td><td>0.00</td>" in page
    assert "other-team" not in page
    page = client_for(outsider).get(reverse("console:usage"), {"month": "2026-11"}).content.decode()
    assert "<td>other-team</td><td>0.03</td><td>—</td><td>0.00</td><td>0.03</td>" in page
    assert "<td>vision</td>" not in page


def test_the_usage_page_says_when_nothing_is_measured(client_for, member, team, settings):
    settings.PROMETHEUS_URL = ""
    page = client_for(member).get(reverse("console:usage")).content.decode()
    assert "GPU metrics unavailable: GPU metrics are not configured (PROMETHEUS_URL is not set)." in page


def test_measured_use_of_a_day_without_allocated_lines_still_counts(team, flavor, member):
    interval = GpuInterval.objects.create(job=make_job(team, flavor, submitter=member), team=team, flavor=flavor,
                                          submitter=member, gpus=1, started_at=at(5, 10), ended_at=at(5, 10, 0, 10))
    GpuUse.objects.add(interval, at(5, 0).date(), measured=36.0, used=36.0, idle=0.0)
    [row] = usage_rows(*NOV, now=at(30, 0), tz=UTC)
    assert (row.gpu_hours, row.used_gpu_hours) == (Decimal("0.00"), Decimal("0.01"))
    assert timedelta(seconds=10)  # 10 s held: under the report's hundredth of a GPU-hour
