"""Fixtures for the web UI tests: a quota, a running job; and for the browser tests the world
the page shows (the page itself, a signed-out browser on the live server: tests/fixtures/browser.py;
no broker: `no_reconcile`, tests/fixtures/tasks.py)."""

import pytest

from jobs.lifecycle import State

from ..builders import make_flavor, make_job, make_quota


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


@pytest.fixture
def running_job(team, flavor, quota, member):
    job = make_job(team, flavor, name="running-job", submitter=member, workers=1, gpus_per_worker=4)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        job.transition(state, reason=state.label, message=f"Now {state.label.lower()}.")
    return job


@pytest.fixture
def world(team, owner, flavor):
    """What the browser tests' ``page`` shows: the team with a 16-GPU quota, and a T4 flavor."""
    make_quota(team, flavor, nominal_gpus=16)
    make_flavor("t4", gpus_per_node=4, display_name="T4 small")
    return team
