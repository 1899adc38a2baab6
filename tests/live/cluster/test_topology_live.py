"""Topology and fragmentation on the real local cluster (docs/topology.md). The fake H100 nodes
are racked as deploy/local-cluster/config/nodes.yaml says: rack-a1 (h100-0, h100-1) and
rack-a2 (h100-2, h100-3), both in block-a.

- A job asking for one rack is placed by Kueue's topology-aware scheduling within one rack,
  the rack that still has room for all of it, where the default scheduler could have split it.
- Feasibility on a fragmented pool (12 GPUs free, 3 on each node) says an 8-GPU pod cannot
  start until the job due to end first ends, and is right when it has: the pod then starts.
"""

import uuid

import pytest

from jobs.lifecycle import State
from jobs.manifests import object_name, render_job
from jobs.outlook import feasibility
from jobs.outlook.feasibility import Feasibility
from jobs.watch.logs import job_pods, landed, pod_view

from ...builders import build_job, make_flavor, make_quota
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, reaches, submit, team_of_its_own, wait_until
from .test_no_way_around_the_queues import denied_by_policy

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
RACK = "gpuplatform.io/rack"
LONG = {"GPUPLATFORM_FAKE_DURATION": "900s"}  # the fake pods run this long


@pytest.fixture
def racked(live):
    """A team of its own with 32 GPUs on a flavor of the four H100 nodes, racked."""
    slug = f"topo-{uuid.uuid4().hex[:6]}"
    team, _ = team_of_its_own(slug)
    flavor = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                         tolerations=TOLERATION, network_fabric="tcp",
                         topology_block_label="gpuplatform.io/block", topology_rack_label=RACK)
    make_quota(team, flavor, nominal_gpus=32, cpu_cores=64, memory_gib=512)
    with on_the_cluster(live, [team], [flavor]):
        yield team, flavor


def nodes_of(live, job, count):
    def placed():
        nodes = [p["spec"]["nodeName"] for p in job_pods(live, job)
                 if p["spec"].get("nodeName") and not p["spec"].get("schedulingGates")]
        return sorted(nodes) if len(nodes) >= count else None
    return wait_until(placed, timeout=120, message=f"{count} placed pods of job {job.name}")


def rack_of(live, node):
    return live.get("v1", "Node", node)["metadata"]["labels"][RACK]


def test_a_job_asking_for_one_rack_is_placed_by_kueue_within_one_rack(live, racked, watcher):
    team, flavor = racked
    topology = live.get("kueue.x-k8s.io/v1beta2", "Topology", flavor.name)
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "gpuplatform.io/block", RACK, "kubernetes.io/hostname"]
    # One node taken: rack-a1 keeps one free node, rack-a2 two.
    blocker = submit(live, team, flavor, gpus_per_worker=8, env=LONG)
    [taken] = nodes_of(live, blocker, 1)
    together = submit(live, team, flavor, workers=2, gpus_per_worker=8, env=LONG, placement="rack")
    nodes = nodes_of(live, together, 2)
    racks = {rack_of(live, node) for node in nodes}
    assert len(racks) == 1 and rack_of(live, taken) not in racks, (taken, nodes)
    # Kueue assigned the domain (TAS): the Workload says so.
    [workload] = [w for w in live.list("kueue.x-k8s.io/v1beta2", "Workload", namespace=team.namespace_name)
                  if w["metadata"]["ownerReferences"][0]["name"] == object_name(together)]
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment.get("topologyAssignment"), assignment
    reaches(together, State.RUNNING)
    # The job page's pods panel says where it landed.
    said = landed(live, together, [pod_view(p) for p in job_pods(live, together)])
    assert said.startswith(f"Placed in one block: block-a ({', '.join(nodes)}); in one rack: {racks.pop()}"), said


def test_feasibility_on_a_fragmented_pool_names_the_job_to_wait_for_and_is_right_when_it_ends(live, racked, watcher):
    team, flavor = racked
    # Four 5-GPU jobs, one per node (two never share a node of 8): 12 GPUs free, 3 on each node.
    first = submit(live, team, flavor, gpus_per_worker=5, env={"GPUPLATFORM_FAKE_DURATION": "40s"},
                   max_runtime_seconds=120)
    others = [submit(live, team, flavor, gpus_per_worker=5, env=LONG, max_runtime_seconds=3600) for _ in range(3)]
    for job in (first, *others):
        nodes_of(live, job, 1)
        reaches(job, State.RUNNING)
    big = build_job(team, flavor, name="big", gpus_per_worker=8, cpu_per_worker=4, memory_per_worker_gib=2)
    verdict = feasibility.assess(big)
    assert verdict.verdict == Feasibility.QUEUE, verdict.message
    assert "12 " + flavor.name + " GPUs free, but at most 3 on one node" in verdict.message
    assert f"cannot start until job {first.pk} ({team.slug}/{first.name}, ends by" in verdict.message
    assert verdict.waits_for == (first,) and verdict.room_by is not None
    # The quota alone would have said it starts now: 20 of 32 GPUs in use.
    reaches(first, State.SUCCEEDED, timeout=120)
    wait_until(lambda: feasibility.assess(big).verdict == Feasibility.NOW, timeout=60,
               message="room once the first job ended")
    started = submit(live, team, flavor, gpus_per_worker=8, env=LONG)
    nodes_of(live, started, 1)
    reaches(started, State.RUNNING)


@pytest.mark.parametrize("selector, allowed", [
    # What Kueue's TAS ungater writes: the flavor's labels and the assigned host.
    ({"gpuplatform.io/pool": "h100", "kubernetes.io/hostname": "h100-2"}, True),
    # A topology label alone, without the flavor's own: another pool's node.
    ({"kubernetes.io/hostname": "a100-0"}, False),
    ({"gpuplatform.io/pool": "a100", "gpuplatform.io/rack": "rack-b1"}, False),
])
def test_the_admission_policy_lets_topology_labels_beside_the_flavors_only(live, racked, selector, allowed):
    team, flavor = racked
    [batch_job] = [o for o in render_job(build_job(team, flavor, name=f"adm-{uuid.uuid4().hex[:5]}", pk=999))
                   if o["kind"] == "Job"]
    batch_job["spec"]["template"]["spec"]["nodeSelector"] = selector
    if allowed:
        live.create(batch_job)  # then gone with the namespace
    else:
        assert "nodes of the flavor" in denied_by_policy(live, batch_job, team.namespace_name)
