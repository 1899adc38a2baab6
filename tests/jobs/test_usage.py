"""What a team uses and waits for has one definition (jobs/usage.py): the dashboard's usage
bars, the team API and the managers' console say the same numbers for the same team."""

import pytest
from rest_framework.test import APIClient

from console.capacity import overview
from jobs.lifecycle import State
from jobs.usage import usage_for

from ..builders import make_job, make_quota

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
