"""Quota rendering: Kueue ResourceFlavor / Cohort / ClusterQueue / LocalQueue /
WorkloadPriorityClass and Volcano Queue, validated against the CRD schemas."""

import pytest

from quotas.manifests import render_cluster, render_team_queues
from quotas.models import Cohort, PriorityClass, Scheduler

from ..builders import make_flavor, make_quota
from ..schemas import validate

pytestmark = pytest.mark.django_db


def queues(team):
    quotas = list(team.quotas.select_related("flavor", "cohort").with_cohort_lendable())
    objects = render_team_queues(quotas, team.namespace_name, team.slug)
    for obj in objects:
        validate(obj)
    return {o["kind"]: o for o in objects}


def test_kueue_quota_renders_a_cluster_queue_selecting_exactly_the_team_namespace(team):
    make_quota(team, make_flavor("h100"), nominal_gpus=16, cpu_cores=192, memory_gib=2048)
    cq = queues(team)["ClusterQueue"]
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-vision"}}
    [group] = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    assert group["flavors"] == [{"name": "h100", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "16"},
        {"name": "cpu", "nominalQuota": "192"},
        {"name": "memory", "nominalQuota": "2Ti"},  # canonical, as the API server stores it
    ]}]
    assert "cohortName" not in cq["spec"]


def test_cluster_queue_in_a_cohort_carries_borrowing_and_lending_limits(team):
    make_quota(team, make_flavor("h100"), nominal_gpus=16, borrowing_limit_gpus=8, lending_limit_gpus=4,
               cohort=Cohort.objects.create(name="research"), weight=3)
    spec = queues(team)["ClusterQueue"]["spec"]
    assert spec["cohortName"] == "research"
    gpu = spec["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert (gpu["borrowingLimit"], gpu["lendingLimit"]) == ("8", "4")
    assert spec["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                  "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert spec["fairSharing"] == {"weight": "3"}


def test_local_queue_points_at_the_teams_cluster_queue(team):
    make_quota(team, make_flavor("h100"))
    lq = queues(team)["LocalQueue"]
    assert lq["metadata"] == {"name": "h100", "namespace": "team-vision", "labels": lq["metadata"]["labels"]}
    assert lq["spec"] == {"clusterQueue": "team-vision-h100"}


def test_volcano_quota_renders_a_reclaimable_queue_with_capability_above_deserved(team, outsider):
    research = Cohort.objects.create(name="research")
    a100 = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    make_quota(outsider.memberships.get().team, a100, nominal_gpus=8, cohort=research)
    make_quota(team, a100, nominal_gpus=8, borrowing_limit_gpus=4, lending_limit_gpus=2, cohort=research,
               cpu_cores=64, memory_gib=512, weight=2)
    kinds = queues(team)
    assert set(kinds) == {"Queue"}
    queue = kinds["Queue"]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    spec = queue["spec"]
    assert spec["reclaimable"] is True and spec["weight"] == 2
    assert spec["deserved"] == {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"}
    assert spec["capability"] == {"nvidia.com/gpu": "12", "cpu": "96", "memory": "768Gi"}
    assert spec["guarantee"] == {"resource": {"nvidia.com/gpu": "6", "cpu": "48", "memory": "384Gi"}}


def test_volcano_queue_outside_a_cohort_guarantees_everything_and_lends_nothing(team):
    make_quota(team, make_flavor("a100", scheduler=Scheduler.VOLCANO), nominal_gpus=8)
    spec = queues(team)["Queue"]["spec"]
    assert spec["reclaimable"] is False
    assert spec["guarantee"]["resource"]["nvidia.com/gpu"] == "8" == spec["capability"]["nvidia.com/gpu"]


def test_resource_flavor_carries_node_labels_taints_and_tolerations():
    flavor = make_flavor("h100", node_labels={"gpuplatform.io/pool": "h100"})
    [rf] = [o for o in render_cluster([flavor], [], []) if o["kind"] == "ResourceFlavor"]
    validate(rf)
    assert rf["spec"]["nodeLabels"] == {"gpuplatform.io/pool": "h100"}
    assert rf["spec"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert rf["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_cluster_objects_cover_kueue_flavors_cohorts_and_priorities():
    flavors = [make_flavor("h100"), make_flavor("a100", scheduler=Scheduler.VOLCANO)]
    cohorts = [Cohort.objects.create(name="research")]
    priorities = [PriorityClass.objects.create(name="high", value=1000, description="Deadlines")]
    objects = render_cluster(flavors, cohorts, priorities)
    for obj in objects:
        validate(obj)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ResourceFlavor", "h100"), ("Cohort", "research"), ("WorkloadPriorityClass", "high"),
        # Where a job inside its class's minimum runtime runs (docs/preemption.md).
        ("WorkloadPriorityClass", "gpuplatform-minimum-runtime"),
    ]  # the team-workloads admission policy is the installer's (tenants.admission), never reconciled
    assert objects[2]["value"] == 1000 and objects[2]["description"] == "Deadlines"
    assert objects[3]["value"] == 1_000_000_000  # the top of a class's range: nothing preempts it for priority
