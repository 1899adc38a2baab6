"""Topology-aware placement (docs/topology.md): a flavor's block and rack labels become a Kueue
Topology its ResourceFlavor names; a training job kept in one rack or block carries Kueue's
podset topology annotation; what the flavor or scheduler cannot honour is a field error.
Every rendered object validates against the upstream CRDs."""

import pytest
from django.core.exceptions import ValidationError

from jobs.forms import JobForm
from jobs.manifests import render_job
from quotas.manifests import render_cluster
from tenants.admission import placement

from ..builders import build_job, make_flavor, make_quota, make_user
from ..schemas import validate

pytestmark = pytest.mark.django_db
RACKED = dict(topology_block_label="gpuplatform.io/block", topology_rack_label="gpuplatform.io/rack")


def batch_job(job):
    objects = render_job(job)
    for obj in objects:
        validate(obj)
    return next(o for o in objects if o["kind"] == "Job")


def test_a_flavor_with_racks_renders_a_topology_its_resource_flavor_names():
    flavor = make_flavor("h100", **RACKED)
    objects = render_cluster([flavor, make_flavor("t4")], [], [])
    for obj in objects:
        validate(obj)
    [topology] = [o for o in objects if o["kind"] == "Topology"]
    assert topology["metadata"]["name"] == "h100"
    assert topology["spec"]["levels"] == [{"nodeLabel": "gpuplatform.io/block"}, {"nodeLabel": "gpuplatform.io/rack"},
                                          {"nodeLabel": "kubernetes.io/hostname"}]
    flavors = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ResourceFlavor"}
    assert flavors["h100"]["topologyName"] == "h100"
    assert "topologyName" not in flavors["t4"]
    # The Topology comes first: a ResourceFlavor naming a missing one leaves TAS workloads inadmissible.
    assert [o["kind"] for o in objects][:2] == ["Topology", "ResourceFlavor"]


def test_racks_without_blocks_make_two_levels():
    flavor = make_flavor("h100", topology_rack_label="example.com/rack")
    [topology] = [o for o in render_cluster([flavor], [], []) if o["kind"] == "Topology"]
    validate(topology)
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == ["example.com/rack", "kubernetes.io/hostname"]


@pytest.mark.parametrize("placement, annotation", [
    ("rack", {"kueue.x-k8s.io/podset-required-topology": "gpuplatform.io/rack"}),
    ("rack-preferred", {"kueue.x-k8s.io/podset-preferred-topology": "gpuplatform.io/rack"}),
    ("block", {"kueue.x-k8s.io/podset-required-topology": "gpuplatform.io/block"}),
    ("block-preferred", {"kueue.x-k8s.io/podset-preferred-topology": "gpuplatform.io/block"}),
])
def test_a_training_job_kept_together_carries_the_podset_topology_annotation(team, placement, annotation):
    flavor = make_flavor("h100", **RACKED)
    make_quota(team, flavor)
    job = build_job(team, flavor, workers=2, gpus_per_worker=8, placement=placement)
    job.full_clean()
    job.save()
    assert batch_job(job)["spec"]["template"]["metadata"]["annotations"] == annotation


def test_a_job_placed_anywhere_has_no_topology_annotation(team):
    flavor = make_flavor("h100", **RACKED)
    job = build_job(team, flavor, workers=2)
    job.save()
    assert "annotations" not in batch_job(job)["spec"]["template"]["metadata"]


def test_a_flavor_without_topology_refuses_a_rack_on_its_field(team):
    flavor = make_flavor("t4")
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, workers=2, placement="rack").full_clean()
    assert "declares no network topology" in err.value.message_dict["placement"][0]


def test_a_flavor_with_racks_only_refuses_a_block(team):
    flavor = make_flavor("h100", topology_rack_label="example.com/rack")
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, workers=2, placement="block").full_clean()
    assert "has racks but no blocks" in err.value.message_dict["placement"][0]


@pytest.mark.parametrize("fields, field, words", [
    (dict(topology_block_label="example.com/block"), "topology_rack_label", "give the racks' node label"),
    (dict(topology_rack_label="kubernetes.io/hostname"), "topology_rack_label", "its own node label"),
    (dict(topology_rack_label="not a label!"), "topology_rack_label", "not a valid label key"),
])
def test_a_topology_that_cannot_be_built_is_a_field_error(fields, field, words):
    flavor = make_flavor("h100")
    for name, value in fields.items():
        setattr(flavor, name, value)
    with pytest.raises(ValidationError) as err:
        flavor.full_clean()
    assert words in " ".join(err.value.message_dict[field])


def test_the_form_keeps_the_placement_and_says_its_error_on_its_field(team):
    member = make_user()
    team.memberships.create(user=member, role="member")
    t4 = make_flavor("t4")
    make_quota(team, t4)
    form = JobForm(data=dict(kind="training", team=team.pk, name="spread", flavor=t4.pk, image="pytorch/pytorch:2",
                             workers=2, gpus_per_worker=1, cpu_per_worker=2, memory_per_worker_gib=8,
                             placement="rack"), user=member)
    assert not form.is_valid()
    assert "declares no network topology" in form.errors["placement"][0]
    assert 'value="rack" selected' in str(form["placement"])


def test_the_admission_policy_reads_the_topology_levels_as_labels_kueue_may_add():
    flavor = make_flavor("h100", node_labels={"gpuplatform.io/pool": "h100"}, tolerations=[], **RACKED)
    assert placement(flavor) == ("|node:gpuplatform.io/pool=h100|nodes:1|tol:nvidia.com/gpu:Exists::NoSchedule:"
                                 "|topo:gpuplatform.io/block|topo:gpuplatform.io/rack|topo:kubernetes.io/hostname|")
    assert "topo:" not in placement(make_flavor("t4", tolerations=[]))


def test_the_job_page_says_which_racks_the_pods_landed_in(team):
    from cluster import FakeCluster
    from jobs.watch.logs import PodView, landed

    flavor = make_flavor("h100", **RACKED)
    fake = FakeCluster()
    for name, rack in (("n0", "r1"), ("n1", "r1"), ("n2", "r2")):
        fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "gpuplatform.io/block": "b1", "gpuplatform.io/rack": rack}}})
    job = build_job(team, flavor, workers=2)
    pods = lambda *nodes: [PodView(f"p{i}", "Running", node, 0, "") for i, node in enumerate(nodes)]  # noqa: E731
    assert landed(fake, job, pods("n0", "n1")) == "Placed in one block: b1 (n0, n1); in one rack: r1 (n0, n1)."
    assert landed(fake, job, pods("n0", "n2")) == "Placed in one block: b1 (n0, n2); in 2 racks: r1 (n0); r2 (n2)."
    assert landed(fake, job, pods("", "")) == ""  # not placed yet
    assert landed(fake, build_job(team, make_flavor("t4"), workers=2), pods("n0")) == ""  # no topology
