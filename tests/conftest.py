"""The suite's shards and order, and the fixtures every test has. The shared fixtures are
plugins, one module per topic in tests/fixtures/ (the people of every permission test and a
ready-made team: tests/fixtures/people.py)."""

import os
from uuid import uuid4

import pytest

pytest_plugins = [
    "tests.fixtures.people",
    "tests.fixtures.api",
    "tests.fixtures.clock",
    "tests.fixtures.tasks",
    "tests.fixtures.prometheus",
    "tests.fixtures.cluster",
    "tests.fixtures.helm",
    "tests.fixtures.idp",
    "tests.fixtures.browser",
    "tests.fixtures.demo",
    # GPUPLATFORM_TEST_CLOCK_SHIFT_DAYS=365 runs the whole session a year ahead, to prove that
    # no test depends on today's date.
    "tests.clock",
]

# What builds a server from source on first use (minutes on a cold machine), in the order
# scripts/test.sh builds them in the background: the local cluster (most of these tests need
# it), KEDA on it, Helm, the IdP. Each is a session fixture, and the marker of tests that
# start it themselves (the short soak runs cluster.sh).
BUILDS = (("kube_cluster", "cluster"), ("keda_on_the_cluster", None), ("helm", None), ("hydra", "idp"))


def _build_rank(item) -> int:
    """The last of those builds the test needs (1 to 4), 0 for none."""
    names = getattr(item, "fixturenames", ())
    return max((rank for rank, (fixture, marker) in enumerate(BUILDS, start=1)
                if fixture in names or (marker and item.get_closest_marker(marker))), default=0)


# scripts/test.sh runs the whole suite as three pytests at once (GPUPLATFORM_TEST_SHARD):
# - ``unit``: the tests that need none of those builds (all but tests/live/), at low priority, so that on a cold
#   machine the cluster's build (which every other test waits for) goes first;
# - ``cluster``: the tests that need a build (tests/live/), on the local cluster (the `test` profile, deploy/stack/profiles.py), Helm, the IdP;
# - ``second-cluster``: the cluster's long tests, on a second local cluster of their own. They
#   mostly wait (on Prometheus windows, grace periods, Kueue and KEDA), so on a cluster of
#   their own that wait overlaps the rest. Chosen to take about as long as the cluster's other
#   tests with the short soak, Helm and the IdP.
SECOND_CLUSTER = frozenset(f"tests/live/cluster/test_{name}_live.py" for name in (
    "idle_reclaim", "gpu_autoscaling", "preemption", "logs", "eta", "gpu_use", "notifications", "max_runtime",
))
SHARDS = ("unit", "cluster", "second-cluster")


def _shard(item) -> str:
    if item.nodeid.split("::", 1)[0] in SECOND_CLUSTER:
        return "second-cluster"
    return "cluster" if _build_rank(item) else "unit"


# Where the tests that need one of those builds live: a reader knows by the path which tests
# need servers, and a test on the wrong side fails the collection (below).
LIVE = "tests/live/"


def _misplaced(items) -> list[str]:
    """The tests whose folder says the wrong thing: one that needs a build outside tests/live/,
    or one inside it that needs none."""
    return [item.nodeid for item in items if item.nodeid.startswith(LIVE) != bool(_build_rank(item))]


def _in_shard(config, items) -> None:
    """Only the tests of the shard GPUPLATFORM_TEST_SHARD names (none: all of them)."""
    shard = os.environ.get("GPUPLATFORM_TEST_SHARD", "")
    if not shard:
        return
    if shard not in SHARDS:
        raise pytest.UsageError(f"GPUPLATFORM_TEST_SHARD={shard!r}: expected one of {', '.join(SHARDS)}")
    keep, other = [], []
    for item in items:
        (keep if _shard(item) == shard else other).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = keep


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """In one process, the tests that need one of those run last, in the order they are built
    (each in its own random order), so that scripts/test.sh's background build overlaps the
    rest of the suite, and KEDA, Helm and the IdP build while the cluster's tests run. Under
    pytest-xdist (``--dist loadgroup``, as scripts/test.sh runs) they form one group that goes
    first to one worker, which runs them in that order (waiting for the build on a cold
    machine) while the other workers share the rest: they share one cluster whose GPUs they
    count, and mostly wait on its controllers."""
    misplaced = _misplaced(items)
    if misplaced:
        raise pytest.UsageError(f"needs a build outside {LIVE}, or none inside it: move these tests\n  "
                                + "\n  ".join(misplaced))
    _in_shard(config, items)
    under_xdist = "PYTEST_XDIST_WORKER" in os.environ
    items.sort(key=lambda item: (under_xdist == (_build_rank(item) == 0), _build_rank(item)))


def pytest_itemcollected(item):
    """Their xdist group, marked as each is collected: xdist reads the groups in its own
    collection_modifyitems (renaming each grouped item), which runs before the sort above."""
    if _build_rank(item):
        item.add_marker(pytest.mark.xdist_group("built-on-first-use"))


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Real hashers cost ~0.3 s a user; tests only need passwords to round-trip."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def own_cache_keys(settings):
    """Each test its own keys in the shared cache (Redis, shared with the other xdist
    worker), so no throttle bucket carries over from one test to the next; clearing the
    cache instead would empty the other worker's buckets mid-test."""
    settings.CACHES = {
        name: {**config, "KEY_PREFIX": f"test-{uuid4().hex}"} for name, config in settings.CACHES.items()
    }
