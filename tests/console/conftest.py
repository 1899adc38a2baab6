"""Fixtures for the console tests: logged-in clients, the in-memory cluster, a quota."""

import pytest
from django.test import Client

from cluster import FakeCluster

from ..builders import make_quota


@pytest.fixture
def client_for(db):
    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def fake(monkeypatch):
    """Every task in this process talks to one in-memory cluster."""
    from gpuplatform import reconcile

    cluster = FakeCluster()
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    return cluster


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
