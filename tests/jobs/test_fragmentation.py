"""Fragmentation-aware feasibility: whether a job's pods find room on its flavor's nodes, from
the free GPUs per node (and per rack), on the in-memory cluster: fits now, fits when these jobs
end (and when), or never."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster import FakeCluster
from core.ownership import JOB_LABEL, TEAM_LABEL
from jobs.lifecycle import State
from jobs.outlook import feasibility, fragmentation
from jobs.outlook.feasibility import Feasibility

from ..builders import build_job, make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db
POOL = {"gpuplatform.io/pool": "h100"}


@pytest.fixture
def racked(db):
    return make_flavor("h100", topology_block_label="example.com/block", topology_rack_label="example.com/rack")


@pytest.fixture
def quota(team, racked):
    return make_quota(team, racked, nominal_gpus=64)


def node(name, rack="r1", gpus=8, **spec):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**POOL, "example.com/block": "b1", "example.com/rack": rack}},
            "spec": spec, "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def pod(name, on, gpus, job=None, phase="Running"):
    labels = {TEAM_LABEL: job.team.slug, JOB_LABEL: str(job.pk)} if job else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "t", "labels": labels},
            "spec": {"nodeName": on, "containers": [{"name": "main", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}}}]}, "status": {"phase": phase}}


def running(team, flavor, gpus, *, workers=1, minutes_left=None):
    job = make_job(team, flavor, workers=workers, gpus_per_worker=gpus,
                   max_runtime_seconds=None if minutes_left is None else 3600)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        job.transition(state, reason=state.label)
    if minutes_left is not None:
        type(job).objects.filter(pk=job.pk).update(run_admitted_at=timezone.now() - timedelta(minutes=60 - minutes_left))
        job.refresh_from_db()
    return job


def cluster_of(*objects):
    fake = FakeCluster()
    for obj in objects:
        fake.put(obj)
    return fake


def test_sixteen_free_gpus_four_per_node_hold_no_pod_of_eight_until_a_job_ends(team, racked, quota):
    first, second = running(team, racked, 4, minutes_left=10), running(team, racked, 4, minutes_left=30)
    fake = cluster_of(*(node(f"n{i}") for i in range(4)),
                      pod("a", "n0", 4, first), pod("b", "n1", 4, second),
                      pod("c", "n2", 4), pod("d", "n3", 4))  # pods the platform does not run
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8), fake)
    assert result.verdict == Feasibility.QUEUE
    assert "16 h100 GPUs free, but at most 4 on one node" in result.message
    assert f"cannot start until job {first.pk} (vision/{first.name}, ends by" in result.message
    assert result.waits_for == (first,)  # the sooner of the two is enough
    assert abs((result.room_by - (first.run_admitted_at + timedelta(hours=1))).total_seconds()) < 1


def test_the_same_job_starts_now_once_that_job_has_ended(team, racked, quota):
    first = running(team, racked, 4)
    fake = cluster_of(node("n0"), node("n1"), pod("a", "n0", 4, first), pod("c", "n1", 4))
    job = build_job(team, racked, gpus_per_worker=8)
    assert feasibility.assess(job, fake).verdict == Feasibility.QUEUE
    fake.put(pod("a", "n0", 4, first, phase="Succeeded"))  # ended: holds nothing
    first.transition(State.SUCCEEDED, reason="Completed")
    assert feasibility.assess(job, fake).verdict == Feasibility.NOW


def test_only_the_jobs_that_make_room_are_named(team, racked, quota):
    small = running(team, racked, 2, minutes_left=5)  # ends first, but on a node that stays too full
    big = running(team, racked, 8, minutes_left=50)
    fake = cluster_of(node("n0"), node("n1"), pod("s", "n0", 2, small), pod("x", "n0", 4), pod("b", "n1", 8, big))
    result = fragmentation.assess(build_job(team, racked, gpus_per_worker=8), fake)
    assert result.verdict == fragmentation.WAIT
    assert result.waits_for == (big,)


def test_a_job_without_an_end_says_its_end_is_unknown(team, racked, quota):
    holder = running(team, racked, 8)
    fake = cluster_of(node("n0"), pod("a", "n0", 8, holder))
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8), fake)
    assert "end unknown" in result.message and result.room_by is None and result.waits_for == (holder,)


def test_a_pod_bigger_than_every_node_can_never_start(team, racked, quota):
    fake = cluster_of(node("n0", gpus=4), node("n1", gpus=4))
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8), fake)
    # The flavor says 8 per node, but the nodes offer 4: the nodes win.
    assert result.verdict == Feasibility.NEVER
    assert "holds at most 0 such pods even when empty" in result.message


def test_a_job_kept_in_one_rack_counts_the_rack_not_the_cluster(team, racked, quota):
    fake = cluster_of(node("n0", "r1"), node("n1", "r2"))
    spread = build_job(team, racked, workers=2, gpus_per_worker=8)
    one_rack = build_job(team, racked, workers=2, gpus_per_worker=8, placement="rack")
    assert feasibility.assess(spread, fake).verdict == Feasibility.NOW
    never = feasibility.assess(one_rack, fake)
    assert never.verdict == Feasibility.NEVER
    assert "one rack of h100 holds at most 1 such pods" in never.message
    # Preferred: placed as close as it can, so the cluster's room counts.
    assert feasibility.assess(build_job(team, racked, workers=2, gpus_per_worker=8, placement="rack-preferred"),
                              fake).verdict == Feasibility.NOW


def test_a_rack_busy_elsewhere_waits_for_the_job_in_that_rack(team, racked, quota):
    holder = running(team, racked, 8, minutes_left=20)
    fake = cluster_of(node("n0", "r1"), node("n1", "r1"), node("n2", "r2"), pod("a", "n1", 8, holder))
    result = feasibility.assess(build_job(team, racked, workers=2, gpus_per_worker=8, placement="rack"), fake)
    assert result.verdict == Feasibility.QUEUE
    assert "room for 1 of the 2 pods in one rack" in result.message and result.waits_for == (holder,)


def test_cordoned_nodes_and_other_pools_are_not_room(team, racked, quota):
    other = {**node("g0"), "metadata": {"name": "g0", "labels": {"gpuplatform.io/pool": "a100"}}}
    fake = cluster_of(node("n0", unschedulable=True), other, node("n1", gpus=4))
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8), fake)
    assert result.verdict == Feasibility.NEVER and "holds at most 0 such pods" in result.message


def test_only_the_flavors_nodes_are_read(team, racked, quota):
    # A submit or a preview reads the flavor's Nodes by its labels, not every Node of the cluster.
    others = [{**node(f"g{i}"), "metadata": {"name": f"g{i}", "labels": {"gpuplatform.io/pool": "a100"}}}
              for i in range(50)]
    fake, asked = cluster_of(node("n1", gpus=8), *others), []
    listing = fake.list
    fake.list = lambda api_version, kind, **kw: asked.append((kind, kw)) or listing(api_version, kind, **kw)
    assert fragmentation.assess(build_job(team, racked, gpus_per_worker=8), fake).verdict == fragmentation.NOW
    assert ("Node", {"label_selector": "gpuplatform.io/pool=h100"}) in asked


def test_no_node_of_the_flavor_leaves_the_quotas_verdict(team, racked, quota):
    # No node to judge by (an autoscaler may make them): the quota's answer stands.
    fake = cluster_of(node("n0", unschedulable=True))
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8), fake)
    assert result.verdict == Feasibility.NOW and result.message.startswith("Starts now")


def test_the_quota_verdict_stands_alone_without_a_cluster(team, racked, quota, settings):
    settings.KUBECONFIG = ""
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8))
    assert result.verdict == Feasibility.NOW and result.waits_for == ()


def test_a_quota_that_never_fits_is_said_before_the_nodes(team, racked):
    make_quota(team, racked, nominal_gpus=4)
    fake = cluster_of(node("n0"))
    result = feasibility.assess(build_job(team, racked, gpus_per_worker=8), fake)
    assert result.verdict == Feasibility.NEVER and "can use at most 4" in result.message
