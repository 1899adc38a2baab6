"""Fixtures for the console tests: recorded reconciles and a quota (clients and the in-memory cluster come from tests/conftest.py)."""

import pytest

from ..builders import make_quota


@pytest.fixture
def reconciles(monkeypatch):
    """Record the teams whose reconcile was asked for instead of sending to a broker."""
    sent = []
    from tenants import tasks

    monkeypatch.setattr(tasks.reconcile_team, "delay", lambda pk: sent.append(pk))
    return sent


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8, cpu_cores=96, memory_gib=960)
