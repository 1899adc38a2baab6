"""What a team uses and waits for has one definition (jobs/use/usage.py): the dashboard's usage
bars, the team API and the managers' console say the same numbers for the same team."""

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from console.accounting import month_window, usage_rows, write_csv
from console.capacity import overview
from jobs.lifecycle import State
from jobs.models import Job
from jobs.use.usage import job_gpus, usage_for
from tenants.models import Team
from workloads import EXCEEDS_QUOTA

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db

# (state, workers, GPUs per worker): 2x4 + 1x2 hold quota, 1x8 + 1x1 + 1x2 wait, the rest neither.
JOBS = [
    ([State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING], 2, 4),
    ([State.SUBMITTED, State.QUEUED, State.ADMITTED], 1, 2),
    ([State.SUBMITTED], 1, 8),
    ([State.SUBMITTED, State.QUEUED], 1, 1),
    ([State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.PREEMPTED], 1, 2),
    ([], 1, 8),  # a draft asks for nothing yet
    ([State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.SUCCEEDED], 4, 8),
    ([State.SUBMITTED, State.CANCELLING], 1, 8),
]
IN_USE, WAITING = 2 * 4 + 1 * 2, 8 + 1 + 2


@pytest.fixture
def busy_team(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    for path, workers, gpus in JOBS:
        job = make_job(team, flavor, workers=workers, gpus_per_worker=gpus)
        for state in path:
            assert job.transition(state)
    return team


def test_dashboard_team_api_and_console_agree_on_what_a_team_uses(busy_team, flavor, quota_manager):
    usage = usage_for([busy_team])[(busy_team.pk, flavor.pk)]
    [line] = [line for line in overview()["teams"] if line.label == busy_team.slug]
    client = APIClient()
    client.force_authenticate(quota_manager)
    [api_quota] = client.get(f"/api/v1/teams/{busy_team.slug}").json()["quotas"]

    assert usage.in_use == line.in_use == api_quota["running_gpus"] == IN_USE
    assert line.queued == api_quota["pending_gpus"] == WAITING
    assert usage.borrowed == line.borrowed == IN_USE - 8
    assert (usage.running, usage.queued) == (1, 3)  # jobs, not GPUs, on the dashboard's foot line


def test_usage_counts_gpus_of_admitted_and_running_jobs_and_waiting_jobs(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    running = make_job(team, flavor, gpus_per_worker=4)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        running.transition(state)
    waiting = make_job(team, flavor, gpus_per_worker=2)
    waiting.transition(State.SUBMITTED)
    make_job(team, flavor)  # a draft holds nothing
    item = usage_for([team])[(team.pk, flavor.pk)]
    assert (item.in_use, item.running, item.queued, item.nominal, item.free) == (4, 1, 1, 8, 4)
    assert item.bar() == {"used": 50, "nominal": 100, "borrowable": 0}


# --- what ran: one rule for the dashboard, the console, the team API and the CSV ---------------
T = datetime(2026, 11, 5, 10, tzinfo=UTC)


def everywhere(team, flavor, quota_manager, *, now):
    """(dashboard, console, team API, GPU-hours in the CSV) for the team on the flavor."""
    usage = usage_for([team])[(team.pk, flavor.pk)]
    [line] = [line for line in overview()["teams"] if line.label == team.slug]
    client = APIClient()
    client.force_authenticate(quota_manager)
    [api_quota] = client.get(f"/api/v1/teams/{team.slug}").json()["quotas"]
    out = io.StringIO()
    write_csv(usage_rows(*month_window("2026-11", UTC), teams=Team.objects.filter(pk=team.pk), now=now, tz=UTC), out)
    hours = sum(Decimal(row["gpu_hours"]) for row in csv.DictReader(io.StringIO(out.getvalue())))
    return (usage.in_use, line.in_use, api_quota["running_gpus"], hours)


def test_a_server_running_one_of_its_three_replicas_uses_and_is_charged_one_replica(team, flavor, quota_manager):
    """The reported case: llama-serve (1-3 replicas x 2 GPUs) ran one replica for 21.6 minutes
    and was shown using 6 GPUs and billed 2.16 GPU-hours instead of 0.72."""
    make_quota(team, flavor, nominal_gpus=8)
    serve = make_job(team, flavor, name="llama-serve", kind=Job.Kind.INFERENCE, port=8000, min_replicas=1,
                     max_replicas=3, gpus_per_worker=2)
    serve.transition(State.SUBMITTED, at=T)
    assert serve.observe(State.RUNNING, reason="Serving", message="1 replica ready.", gpus=2, at=T)
    assert everywhere(team, flavor, quota_manager, now=T + timedelta(minutes=21.6)) == (2, 2, 2, Decimal("0.72"))
    # The HPA adds a replica: the count changes, and so do use and the charge from then on.
    assert serve.observe(State.RUNNING, reason="Serving", message="1 replica ready.", gpus=4,
                         at=T + timedelta(minutes=21.6))
    assert everywhere(team, flavor, quota_manager, now=T + timedelta(minutes=51.6)) == (4, 4, 4, Decimal("2.72"))


def test_a_job_that_can_never_start_is_not_queued_demand_anywhere(team, flavor, quota_manager):
    make_quota(team, flavor, nominal_gpus=24)
    never = make_job(team, flavor, workers=4, gpus_per_worker=8)  # 32 > 24: said by the scheduler
    never.transition(State.SUBMITTED)
    never.transition(State.QUEUED, reason=EXCEEDS_QUOTA, message="Can never start: ...")
    unsaid = make_job(team, flavor, workers=4, gpus_per_worker=8)  # the same, before the scheduler said so
    unsaid.transition(State.SUBMITTED)
    fits = make_job(team, flavor, workers=1, gpus_per_worker=4)
    fits.transition(State.SUBMITTED)
    elsewhere = make_flavor("a100")  # no quota there: it never starts either
    make_job(team, elsewhere, gpus_per_worker=2).transition(State.SUBMITTED)

    usage = usage_for([team])[(team.pk, flavor.pk)]
    capacity = overview()
    [line] = [line for line in capacity["teams"] if line.label == team.slug]
    client = APIClient()
    client.force_authenticate(quota_manager)
    [api_quota] = client.get(f"/api/v1/teams/{team.slug}").json()["quotas"]
    assert usage.queued == 1
    assert line.queued == api_quota["pending_gpus"] == 4
    assert {f.flavor.name: f.queued for f in capacity["flavors"]} == {"h100": 4, "a100": 0}


def test_a_server_waits_for_its_minimum_replicas_not_its_maximum(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    serve = make_job(team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=3, gpus_per_worker=2)
    serve.transition(State.SUBMITTED)
    assert job_gpus([team])[(team.pk, flavor.pk)].waiting == 2
