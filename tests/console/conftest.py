"""Fixtures for the console tests: recorded reconciles and enqueued tasks, and a quota (the people, clients and the in-memory cluster: tests/fixtures/people.py)."""

import pytest

from quotas import tasks as quota_tasks

from ..builders import make_quota


@pytest.fixture
def reconciles(monkeypatch):
    """Record the teams whose reconcile was asked for instead of sending to a broker."""
    sent = []
    monkeypatch.setattr(quota_tasks.reconcile_team_quotas, "delay", lambda pk: sent.append(pk))
    return sent


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8, cpu_cores=96, memory_gib=960)


@pytest.fixture
def enqueued(monkeypatch):
    """The primary keys of every task a quota action enqueued (none sent to a broker)."""
    sent = []
    monkeypatch.setattr("quotas.actions.enqueue", lambda task, pk: sent.append(pk))
    return sent
