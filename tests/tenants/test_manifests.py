"""Team rendering: namespace, quota ceilings, defaults, RBAC, network policies, queues.

Each case builds a team with the small builders, renders it, checks the fields that
matter, and validates every object against the real schemas.
"""

import pytest

from core.ownership import MANAGED_BY_LABEL, TEAM_LABEL
from quotas.models import Cohort, Scheduler
from tenants.admission import PARAMS_NAME, PLACEMENT_PREFIX
from tenants.models import Membership
from workloads import queue_name
from workloads.pods import EPHEMERAL_STORAGE_LIMIT, EPHEMERAL_STORAGE_REQUEST

from ..builders import make_flavor, make_quota, make_team, make_user, render_team_and_quotas
from ..schemas import validate

pytestmark = pytest.mark.django_db


def rendered(team) -> dict[tuple[str, str], dict]:
    objects = render_team_and_quotas(team)
    for obj in objects:
        validate(obj)
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == "gpuplatform"
        assert obj["metadata"]["labels"][TEAM_LABEL] == team.slug
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_namespace_comes_first_and_enforces_restricted_pod_security(team):
    objects = render_team_and_quotas(team)
    assert objects[0]["kind"] == "Namespace"
    labels = objects[0]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert rendered(team)  # and everything validates


def test_quota_sums_gpus_of_flavors_sharing_a_resource_name(team):
    make_quota(team, make_flavor("h100"), nominal_gpus=16, cpu_cores=100, memory_gib=1000)
    make_quota(team, make_flavor("t4-shared", gpus_per_node=16), nominal_gpus=8, cpu_cores=20, memory_gib=100)
    hard = rendered(team)["ResourceQuota", "team-quota"]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "24"
    assert hard["requests.cpu"] == "120"
    assert hard["requests.memory"] == "1100Gi"


def test_mig_slices_are_their_own_resource_in_the_quota(team):
    make_quota(team, make_flavor("h100"), nominal_gpus=8)
    make_quota(team, make_flavor("mig", resource_name="nvidia.com/mig-1g.10gb", gpus_per_node=14), nominal_gpus=7)
    hard = rendered(team)["ResourceQuota", "team-quota"]["spec"]["hard"]
    assert (hard["requests.nvidia.com/gpu"], hard["requests.nvidia.com/mig-1g.10gb"]) == ("8", "7")


def test_a_team_without_quota_gets_no_gpu_ceiling_and_no_queues(team):
    objects = rendered(team)
    hard = objects["ResourceQuota", "team-quota"]["spec"]["hard"]
    assert not any("nvidia.com" in key for key in hard)
    assert not any(kind in ("LocalQueue", "ClusterQueue", "Queue") for kind, _ in objects)


def test_borrowing_raises_the_ceiling_by_what_the_cohort_lends(team, outsider):
    research = Cohort.objects.create(name="research")
    h100 = make_flavor("h100")
    other = outsider.memberships.get().team
    make_quota(other, h100, nominal_gpus=16, lending_limit_gpus=4, cohort=research)
    make_quota(team, h100, nominal_gpus=8, borrowing_limit_gpus=10, cohort=research, cpu_cores=80, memory_gib=800)
    hard = rendered(team)["ResourceQuota", "team-quota"]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "12"  # 8 own + the 4 the peer lends (< limit 10)
    assert hard["requests.cpu"] == "120"  # CPU grows with the GPUs it may borrow


def test_members_read_their_namespace_and_only_the_platform_writes_workloads(team):
    objects = rendered(team)
    editor = objects["RoleBinding", "gpuplatform-workload-editor"]
    viewer = objects["RoleBinding", "gpuplatform-workload-viewer"]
    assert [s["name"] for s in editor["subjects"]] == ["max", "olivia"]
    assert [s["name"] for s in viewer["subjects"]] == ["vera"]
    assert editor["metadata"]["namespace"] == viewer["metadata"]["namespace"] == "team-vision"
    viewer_verbs = {v for rule in objects["Role", "gpuplatform-workload-viewer"]["rules"] for v in rule["verbs"]}
    assert viewer_verbs == {"get", "list", "watch"}
    editor_rules = objects["Role", "gpuplatform-workload-editor"]["rules"]
    writes = {(r, v) for rule in editor_rules for r in rule["resources"] for v in rule["verbs"]
              if v not in ("get", "list", "watch")}
    assert writes == {("pods/portforward", "create")}
    readable = {r for rule in editor_rules if "get" in rule["verbs"] for r in rule["resources"]}
    assert {"pods", "pods/log", "jobs", "deployments", "workloads", "podgroups"} <= readable


def test_the_namespace_quota_allows_no_load_balancers_node_ports_or_volumes(team):
    hard = rendered(team)["ResourceQuota", "team-quota"]["spec"]["hard"]
    assert (hard["services.loadbalancers"], hard["services.nodeports"], hard["persistentvolumeclaims"]) == ("0", "0", "0")


def test_an_outsider_is_in_no_binding_of_the_team(team, outsider):
    subjects = [s["name"] for kind, o in rendered(team).items() if kind[0] == "RoleBinding" for s in o["subjects"]]
    assert outsider.username not in subjects


def test_network_policies_deny_other_namespaces_and_admit_the_platform(team, settings):
    settings.PLATFORM_NAMESPACE = "gpuplatform-system"
    objects = rendered(team)
    deny = objects["NetworkPolicy", "default-deny-ingress"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}
    same = objects["NetworkPolicy", "allow-same-namespace"]["spec"]["ingress"]
    assert same == [{"from": [{"podSelector": {}}]}]
    platform = objects["NetworkPolicy", "allow-from-platform"]["spec"]["ingress"][0]["from"][0]
    assert platform == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gpuplatform-system"}}}


def test_workload_service_account_does_not_mount_a_token(team):
    account = rendered(team)["ServiceAccount", "workload"]
    assert account["automountServiceAccountToken"] is False


def test_limit_range_gives_pods_without_requests_defaults(team):
    [limits] = rendered(team)["LimitRange", "defaults"]["spec"]["limits"]
    assert limits["defaultRequest"] == {"cpu": "100m", "memory": "256Mi", "ephemeral-storage": EPHEMERAL_STORAGE_REQUEST}
    # A default CPU limit would sit below the request of any worker asking for more.
    assert "cpu" not in limits["default"]
    # Local disk: the numbers every rendered container states (tests/workloads/test_workload_kinds.py).
    assert limits["default"]["ephemeral-storage"] == EPHEMERAL_STORAGE_LIMIT


def test_team_queues_follow_each_flavors_scheduler(team):
    make_quota(team, make_flavor("h100"))
    make_quota(team, make_flavor("a100", scheduler=Scheduler.VOLCANO))
    kinds = sorted(k for k in rendered(team) if k[0] in ("ClusterQueue", "LocalQueue", "Queue"))
    assert kinds == [("ClusterQueue", "team-vision-h100"), ("LocalQueue", "h100"), ("Queue", "team-vision-a100")]


def test_baseline_pod_security_when_configured(team, settings):
    settings.POD_SECURITY_LEVEL = "baseline"
    assert rendered(team)["Namespace", "team-vision"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_rendering_is_deterministic(team):
    make_quota(team, make_flavor("h100"))
    make_team("spare", members={make_user(): Membership.Role.OWNER})
    assert render_team_and_quotas(team) == render_team_and_quotas(team)


def test_admission_parameters_name_the_teams_own_queues_only(team):
    """The policy's parameters list this team's queues; another team's never appear."""
    h100, a100 = make_flavor("h100"), make_flavor("a100", scheduler=Scheduler.VOLCANO)
    make_quota(team, h100, nominal_gpus=8)
    make_quota(team, a100, nominal_gpus=8)
    other = make_team("other")
    make_quota(other, a100, nominal_gpus=8)
    params = rendered(team)["ConfigMap", PARAMS_NAME]
    assert params["metadata"]["namespace"] == team.namespace_name
    queues = {key: value for key, value in params["data"].items() if not key.startswith(PLACEMENT_PREFIX)}
    assert queues == {queue_name(team.namespace_name, h100): "h100", queue_name(team.namespace_name, a100): "a100"}
    assert queue_name(other.namespace_name, a100) not in params["data"]
    # and where each of the team's flavors places its pods
    assert set(params["data"]) - set(queues) == {PLACEMENT_PREFIX + "h100", PLACEMENT_PREFIX + "a100"}


def test_a_team_without_quotas_gets_empty_admission_parameters(team):
    """No quota, no queue a workload may name (the policy admits no workload)."""
    assert rendered(team)["ConfigMap", PARAMS_NAME]["data"] == {}
