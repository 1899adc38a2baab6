"""Fixtures of the reconcile tests: the fake cluster with a watch cache, and what it saw."""

import pytest

from cluster import FakeCluster
from cluster.cache import WatchCache


@pytest.fixture
def changes():
    """The (event, object) pairs the cache reported, in order."""
    return []


@pytest.fixture
def cached(fake: FakeCluster, changes) -> FakeCluster:
    """The fake with a watch cache that only learns what happened when told to catch up."""
    fake.cache = WatchCache(fake, threaded=False, on_change=lambda event, obj: changes.append((event, obj)))
    return fake
