import pytest

from cluster import FakeCluster


@pytest.fixture
def fake(monkeypatch):
    """Every task and command in this process talks to one in-memory cluster."""
    from gpuplatform import reconcile

    cluster = FakeCluster()
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    return cluster
