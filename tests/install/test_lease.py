"""Leader election on a Lease (cluster.lease) against the fake cluster, with a hand clock:
who wins, who waits, a released Lease moves at once, a silent holder's Lease runs out."""

import threading

import pytest

from cluster import FakeCluster
from cluster.lease import API, LeaderElector, Leases


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def leases():
    cluster = FakeCluster()
    cluster.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "platform"}})
    return Leases(cluster)


def candidate(leases, clock, identity, lease_seconds=15):
    return LeaderElector(leases, name="watcher", namespace="platform", identity=identity,
                         lease_seconds=lease_seconds, renew_seconds=5, retry_seconds=0.01, clock=clock, wall=clock)


def test_the_first_candidate_creates_the_lease_and_leads(leases):
    clock = Clock()
    a = candidate(leases, clock, "a")
    assert a.try_acquire_or_renew()
    lease = leases.get("watcher", "platform")
    assert lease["apiVersion"] == API
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["leaseTransitions"] == 0


def test_a_second_candidate_waits_while_the_holder_renews(leases):
    clock = Clock()
    a, b = candidate(leases, clock, "a"), candidate(leases, clock, "b")
    assert a.try_acquire_or_renew()
    for _ in range(10):  # 50 s of renewals every 5 s: b never wins
        assert not b.try_acquire_or_renew()
        clock.now += 5
        assert a.try_acquire_or_renew()
    assert leases.get("watcher", "platform")["spec"]["holderIdentity"] == "a"


def test_a_silent_holders_lease_runs_out_on_the_standbys_own_clock(leases):
    clock = Clock()
    a, b = candidate(leases, clock, "a"), candidate(leases, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 14
    assert not b.try_acquire_or_renew()
    clock.now += 2  # 16 s without a change: a is gone
    assert b.try_acquire_or_renew()
    spec = leases.get("watcher", "platform")["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert not a.try_acquire_or_renew()  # a comes back: b's Lease is fresh


def test_a_released_lease_is_taken_at_once(leases):
    clock = Clock()
    a, b = candidate(leases, clock, "a"), candidate(leases, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert b.try_acquire_or_renew()
    assert leases.get("watcher", "platform")["spec"]["holderIdentity"] == "b"


def test_two_candidates_racing_for_a_free_lease_cannot_both_win(leases):
    clock = Clock()
    wins = []
    barrier = threading.Barrier(8)

    def race(identity):
        barrier.wait()
        if candidate(leases, clock, identity).try_acquire_or_renew():
            wins.append(identity)

    threads = [threading.Thread(target=race, args=(f"c{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert leases.get("watcher", "platform")["spec"]["holderIdentity"] == wins[0]


def test_a_leader_that_sees_another_holder_reports_the_loss(leases):
    clock = Clock()
    a, b = candidate(leases, clock, "a"), candidate(leases, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 20
    assert b.try_acquire_or_renew()  # a was paused past its lease
    lost, stop = threading.Event(), threading.Event()
    a.renew_seconds = 0.01
    a.keep_renewing(stop, lost.set)
    assert lost.wait(5)
    assert not a.leading
    stop.set()


def test_a_failing_api_server_only_makes_a_standby_wait(leases):
    from cluster import TransientError

    clock = Clock()
    leases.cluster.fail_next("GET", TransientError("connection refused"))
    a = candidate(leases, clock, "a")
    assert not a.try_acquire_or_renew()
    assert a.try_acquire_or_renew()
