"""Fixtures for the web UI tests: logged-in clients for each person, jobs in each state."""

import pytest

from jobs.lifecycle import State

from ..builders import make_job, make_quota

HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx(target: str | None = None) -> dict:
    """Headers of an htmx request swapping into the element with id ``target``."""
    return {**HTMX, **({"HTTP_HX_TARGET": target} if target else {})}


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
def no_reconcile(monkeypatch):
    """Record reconcile requests instead of sending them to a broker."""
    sent = []
    from jobs import tasks

    monkeypatch.setattr(tasks.reconcile_job, "delay", lambda pk: sent.append(pk))
    return sent
