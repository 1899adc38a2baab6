"""Topology-aware placement on Volcano flavors (docs/topology.md, "Volcano flavors"): a flavor
may declare block and rack labels (Volcano's label discovery builds its HyperNodes from the same
labels: tier 1 a rack, tier 2 a block); a gang kept in one rack or block carries
`spec.networkTopology` (hard with the level's tier when required, soft when preferred), valid
against the upstream Volcano Job CRD; a Volcano flavor without a topology refuses a placement
on its field, in the model and the form (the API: tests/api/test_topology_volcano_api.py)."""

import pytest

from jobs.forms import JobForm
from jobs.manifests import render_job
from quotas.models import Scheduler

from ..builders import build_job, make_flavor, make_quota
from ..schemas import validate

pytestmark = pytest.mark.django_db
RACKED = dict(topology_block_label="gpuplatform.io/block", topology_rack_label="gpuplatform.io/rack")


def volcano(name="a100", **fields):
    return make_flavor(name, scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"}, **fields)


def vcjob(job) -> dict:
    objects = render_job(job)
    for obj in objects:
        assert "batch.volcano.sh" in validate(obj) or obj["apiVersion"] == "v1"
    [rendered] = [o for o in objects if o["apiVersion"] == "batch.volcano.sh/v1alpha1"]
    return rendered


def test_a_volcano_flavor_may_declare_a_topology_and_says_what_volcano_does_with_it():
    flavor = volcano(**RACKED)
    flavor.full_clean()
    said = flavor.topology_description
    assert said.startswith("block (gpuplatform.io/block) > rack (gpuplatform.io/rack) > host")
    assert "HyperNode (tier 1 a rack, tier 2 a block)" in said and "label discovery" in said
    assert "Kueue: a Topology" in make_flavor("h100", **RACKED).topology_description


@pytest.mark.parametrize("placement, topology", [
    ("rack", {"mode": "hard", "highestTierAllowed": 1}),
    ("block", {"mode": "hard", "highestTierAllowed": 2}),
    # Volcano's soft mode takes no tier: both preferred levels are one request.
    ("rack-preferred", {"mode": "soft"}),
    ("block-preferred", {"mode": "soft"}),
])
def test_a_gang_kept_together_asks_volcano_for_one_hypernode(team, placement, topology):
    flavor = volcano(**RACKED)
    make_quota(team, flavor)
    job = build_job(team, flavor, workers=2, gpus_per_worker=8, placement=placement)
    job.full_clean()
    job.save()
    spec = vcjob(job)["spec"]
    assert spec["networkTopology"] == topology
    assert spec["minAvailable"] == 2  # still one gang


def test_a_gang_placed_anywhere_has_no_network_topology(team):
    job = build_job(team, volcano(**RACKED), workers=2)
    job.save()
    assert "networkTopology" not in vcjob(job)["spec"]


def test_a_rack_on_a_volcano_flavor_that_lost_its_topology_is_not_rendered(team):
    flavor = volcano(**RACKED)
    job = build_job(team, flavor, workers=2, placement="rack")
    job.save()
    flavor.topology_block_label = flavor.topology_rack_label = ""
    flavor.save()
    job.refresh_from_db()
    assert "networkTopology" not in vcjob(job)["spec"]


def test_a_volcano_flavor_without_topology_refuses_a_rack_on_its_field(team):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as err:
        build_job(team, volcano(), workers=2, placement="rack").full_clean()
    [message] = err.value.message_dict["placement"]
    assert "declares no network topology" in message and "choose Anywhere" in message


def test_the_form_takes_a_rack_on_a_racked_volcano_flavor_and_refuses_it_on_a_bare_one(team, member):
    racked, bare = volcano(**RACKED), volcano("a100-bare")
    make_quota(team, racked)
    make_quota(team, bare)
    data = dict(kind="training", team=team.pk, name="together", image="pytorch/pytorch:2", workers=2,
                gpus_per_worker=8, cpu_per_worker=2, memory_per_worker_gib=8, placement="rack")
    form = JobForm(data={**data, "flavor": racked.pk}, user=member)
    assert form.is_valid(), form.errors
    assert "Volcano: the gang stays within one HyperNode" in str(form["placement"].help_text)
    refused = JobForm(data={**data, "flavor": bare.pk}, user=member)
    assert not refused.is_valid()
    assert "declares no network topology" in refused.errors["placement"][0]
    assert 'value="rack" selected' in str(refused["placement"])


def test_the_local_clusters_volcano_discovers_the_demo_flavors_levels_and_schedules_by_them():
    """Volcano's label discovery lists the demo's topology labels, widest first, the host last
    (so a rack is tier 1 and a block tier 2, as the rendered tiers say), and its scheduler runs
    the plugin that reads `networkTopology`."""
    from pathlib import Path

    import yaml

    from gpuplatform.management.commands.seed_demo import TOPOLOGY
    from quotas.models.topology import HOST_LABEL, TIERS

    config = Path(__file__).resolve().parents[2] / "deploy/local-cluster/config"
    [discovery] = yaml.safe_load((config / "volcano-controller.conf").read_text())["networkTopologyDiscovery"]
    assert discovery["source"] == "label" and discovery["enabled"]
    [labels] = discovery["config"]["networkTopologyTypes"].values()
    levels = [level["nodeLabel"] for level in labels]
    assert levels == [TOPOLOGY["topology_block_label"], TOPOLOGY["topology_rack_label"], HOST_LABEL]
    # Volcano numbers the tiers from the hosts up.
    assert len(levels) - 1 - levels.index(TOPOLOGY["topology_rack_label"]) == TIERS["rack"]
    assert len(levels) - 1 - levels.index(TOPOLOGY["topology_block_label"]) == TIERS["block"]
    plugins = [plugin["name"] for tier in yaml.safe_load((config / "volcano-scheduler.conf").read_text())["tiers"]
               for plugin in tier["plugins"]]
    assert "network-topology-aware" in plugins
