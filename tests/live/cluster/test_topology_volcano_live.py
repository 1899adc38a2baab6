"""Volcano's network-topology-aware scheduling on the real local cluster (docs/topology.md,
"Volcano flavors"). Volcano's label discovery has built HyperNodes from the nodes' labels
(deploy/local-cluster/config/volcano-controller.conf): rack-a1 (h100-0, h100-1) and rack-a2
(h100-2, h100-3) are tier-1 HyperNodes in block-a (tier 2). A Volcano flavor over those
nodes declares the same labels.

A 2-pod gang asking for one rack (required) lands inside one rack, the one that still holds
all of it, where the nodes free (one in rack-a1, two in rack-a2) would also hold it split.
"""

import uuid

import pytest

from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.watch.logs import job_pods, landed, pod_view
from quotas.models import Scheduler

from ...builders import make_flavor, make_quota
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, reaches, submit, team_of_its_own, wait_until
from .test_topology_live import LONG, RACK, nodes_of, rack_of

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
HYPERNODE = ("topology.volcano.sh/v1alpha1", "HyperNode")


@pytest.fixture
def racked_volcano(live):
    """A team of its own with 32 GPUs on a Volcano flavor of the four racked H100 nodes."""
    slug = f"hyper-{uuid.uuid4().hex[:6]}"
    team, _ = team_of_its_own(slug)
    flavor = make_flavor(f"vc-h100-{slug}", scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "h100"},
                         node_taints=TAINT, tolerations=TOLERATION, network_fabric="tcp",
                         topology_block_label="gpuplatform.io/block", topology_rack_label=RACK)
    make_quota(team, flavor, nominal_gpus=32, cpu_cores=64, memory_gib=512)
    with on_the_cluster(live, [team], [flavor]):
        yield team, flavor


def racks_discovered(live) -> dict[str, set[str]]:
    """rack -> its nodes, as Volcano's tier-1 HyperNodes of the rack label say."""
    racks: dict[str, set[str]] = {}
    for hypernode in live.list(*HYPERNODE):
        spec = hypernode["spec"]
        if spec["tier"] == 1 and spec.get("tierName") == RACK:
            rack = hypernode["metadata"]["labels"][RACK]
            racks.setdefault(rack, set()).update(m["selector"]["exactMatch"]["name"] for m in spec["members"])
    return racks


def test_a_gang_asking_for_one_rack_is_placed_by_volcano_within_one_rack(live, racked_volcano, watcher):
    team, flavor = racked_volcano
    racks = wait_until(lambda: (found := racks_discovered(live)).get("rack-a2") and found, timeout=60,
                       message="Volcano's HyperNodes of the racks")
    assert racks["rack-a1"] == {"h100-0", "h100-1"} and racks["rack-a2"] == {"h100-2", "h100-3"}, racks
    # One node taken: rack-a1 keeps one free node, rack-a2 two.
    blocker = submit(live, team, flavor, gpus_per_worker=8, env=LONG)
    [taken] = nodes_of(live, blocker, 1)
    together = submit(live, team, flavor, workers=2, gpus_per_worker=8, env=LONG, placement="rack")
    vcjob = live.get("batch.volcano.sh/v1alpha1", "Job", object_name(together), namespace=team.namespace_name)
    assert vcjob["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    nodes = nodes_of(live, together, 2)
    placed = {rack_of(live, node) for node in nodes}
    assert len(placed) == 1 and rack_of(live, taken) not in placed, (taken, nodes)
    reaches(together, State.RUNNING)
    # The job page's pods panel says where it landed.
    said = landed(live, together, [pod_view(p) for p in job_pods(live, together)])
    assert said.startswith(f"Placed in one block: block-a ({', '.join(nodes)}); in one rack: {placed.pop()}"), said
