"""The chart's common values, as Kueue's and KubeRay's charts have them (docs/install.md):
nameOverride and fullnameOverride, pod labels and annotations, priorityClassName and placement
(nodeSelector, tolerations, affinity, topologySpreadConstraints) chart-wide with each
component's own overriding, a PodDisruptionBudget for every component running more than one
replica, and an optional Prometheus Operator ServiceMonitor. Rendered by real Helm and
checked against the Kubernetes schemas and the ServiceMonitor's CRD (tests/schemas.py)."""

import re

import pytest
import yaml

from ...schemas import validate
from ...support.chart import CHART, run_helm, template

COMPONENTS = ("web", "worker", "webhooks", "beat", "watcher")
SPREAD = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
EVERYTHING = {
    "priorityClassName": "platform-critical",
    "podLabels": {"team": "platform"},
    "podAnnotations": {"example.com/owner": "platform"},
    "nodeSelector": {"node-role.example.com/platform": "true"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}]}},
    "topologySpreadConstraints": [SPREAD],
    "web": {"priorityClassName": "web-critical", "podLabels": {"tier": "frontend"},
            "topologySpreadConstraints": [{**SPREAD, "topologyKey": "kubernetes.io/hostname"}]},
    "worker": {"replicas": 3, "nodeSelector": {"pool": "workers"}, "tolerations": [GPU_TAINT],
               "podAnnotations": {"example.com/owner": "reconcilers"}},
    "webhooks": {"replicas": 2, "podDisruptionBudget": {"minAvailable": 1}},  # wins over the default maxUnavailable
    "metrics": {"serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "10s",
                                   "labels": {"release": "kube-prometheus-stack"}}},
    "ingress": {"enabled": True},
}


def render(helm, tmp_path_factory, values: dict, *args) -> list[dict]:
    path = tmp_path_factory.mktemp("values") / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return template(helm, "-f", str(path), *args)


@pytest.fixture(scope="module")
def defaults(helm):
    return template(helm)


@pytest.fixture(scope="module")
def everything(helm, tmp_path_factory):
    return render(helm, tmp_path_factory, EVERYTHING)


def named(objects, kind) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def pods(objects) -> dict[str, dict]:
    """Each component's pod template, by its app.kubernetes.io/component label."""
    return {o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: o["spec"]["template"]
            for o in objects if o["kind"] in ("Deployment", "Job")}


def budgets(objects) -> dict[str, dict]:
    return {o["metadata"]["labels"]["app.kubernetes.io/component"]: o["spec"]
            for o in objects if o["kind"] == "PodDisruptionBudget"}


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items()) and all(
        (labels.get(e["key"]) in e["values"]) == (e["operator"] == "In")
        for e in selector.get("matchExpressions", []))


# --- defaults and PodDisruptionBudgets ----------------------------------------------------
def test_defaults_set_no_placement_and_no_service_monitor(defaults):
    for component, pod in pods(defaults).items():
        spec = pod["spec"]
        assert not {"priorityClassName", "nodeSelector", "tolerations", "affinity",
                    "topologySpreadConstraints"} & set(spec), component
        assert set(pod["metadata"]["labels"]) == {"app.kubernetes.io/name", "app.kubernetes.io/instance",
                                                   "app.kubernetes.io/component"}, component
        assert set(pod["metadata"]["annotations"]) == {"checksum/values"}, component
    assert not [o for o in defaults if o["kind"] == "ServiceMonitor"]
    assert [o["metadata"]["name"] for o in defaults if o["kind"] == "Service"] == ["gp-gpuplatform-web"]


def test_by_default_the_components_running_twice_have_a_budget_and_keep_todays(defaults):
    assert budgets(defaults) == {
        "web": {"minAvailable": 1, "selector": {"matchLabels": pods(defaults)["web"]["metadata"]["labels"]}},
        "watcher": {"maxUnavailable": 1, "selector": {"matchLabels": pods(defaults)["watcher"]["metadata"]["labels"]}},
    }


def test_a_component_scaled_past_one_replica_gets_a_budget_over_its_own_pods(everything):
    found = budgets(everything)
    assert set(found) == {"web", "worker", "webhooks", "watcher"}  # beat runs once, always
    assert found["worker"]["maxUnavailable"] == 1 and "minAvailable" not in found["worker"]
    assert found["webhooks"]["minAvailable"] == 1 and "maxUnavailable" not in found["webhooks"]
    templates = pods(everything)
    for component, spec in found.items():
        assert [c for c, pod in templates.items() if selects(spec["selector"], pod["metadata"]["labels"])] == [component]


def test_the_web_takes_max_unavailable_once_its_min_available_is_null(helm):
    web = budgets(template(helm, "--set", "web.podDisruptionBudget.minAvailable=null",
                           "--set", "web.podDisruptionBudget.maxUnavailable=25%"))["web"]
    assert web["maxUnavailable"] == "25%" and "minAvailable" not in web


def test_a_watcher_scaled_to_one_replica_has_no_budget(helm):
    assert set(budgets(template(helm, "--set", "watcher.replicas=1"))) == {"web"}


# --- chart-wide values and each component's own ------------------------------------------
def test_the_chart_lints_strictly_with_every_convention_set(helm, tmp_path_factory):
    path = tmp_path_factory.mktemp("values") / "values.yaml"
    path.write_text(yaml.safe_dump(EVERYTHING))
    run_helm(helm, "lint", "--strict", str(CHART), "-f", str(path))


def test_every_object_is_valid_with_every_convention_set(everything):
    for obj in everything:
        validate(obj)
    assert {o["kind"] for o in everything} >= {"ServiceMonitor", "PodDisruptionBudget", "Ingress"}


def test_a_components_own_priority_class_and_spread_replace_the_chart_wide_ones(everything):
    templates = pods(everything)
    assert templates["web"]["spec"]["priorityClassName"] == "web-critical"
    assert templates["web"]["spec"]["topologySpreadConstraints"] == [
        {**SPREAD, "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector_of("web")}}]
    for component in ("worker", "webhooks", "beat", "watcher", "migrations"):
        spec = templates[component]["spec"]
        assert spec["priorityClassName"] == "platform-critical", component
        # a chart-wide constraint spreads each component's own pods
        assert spec["topologySpreadConstraints"] == [{**SPREAD, "labelSelector": {"matchLabels": selector_of(component)}}]


def selector_of(component):
    return {"app.kubernetes.io/name": "gpuplatform", "app.kubernetes.io/instance": "gp",
            "app.kubernetes.io/component": component}


def test_spread_constraints_select_exactly_their_components_pods(everything):
    templates = pods(everything)
    for component, pod in templates.items():
        [spread] = pod["spec"]["topologySpreadConstraints"]
        assert [c for c, other in templates.items()
                if selects(spread["labelSelector"], other["metadata"]["labels"])] == [component]


def test_a_components_own_node_selector_and_tolerations_land_on_its_pods_only(everything):
    templates = pods(everything)
    worker = templates["worker"]["spec"]
    assert worker["nodeSelector"] == {"node-role.example.com/platform": "true", "pool": "workers"}
    assert worker["tolerations"] == [GPU_TAINT]
    for component in ("web", "webhooks", "beat", "watcher", "migrations"):
        spec = templates[component]["spec"]
        assert spec["nodeSelector"] == EVERYTHING["nodeSelector"], component
        assert spec["tolerations"] == EVERYTHING["tolerations"], component
        assert spec["affinity"] == EVERYTHING["affinity"], component


def test_pod_labels_and_annotations_merge_with_the_components_keys_winning(everything):
    templates = pods(everything)
    assert templates["web"]["metadata"]["labels"]["tier"] == "frontend"
    assert templates["worker"]["metadata"]["annotations"]["example.com/owner"] == "reconcilers"
    for component, pod in templates.items():
        assert pod["metadata"]["labels"]["team"] == "platform", component
        assert "checksum/values" in pod["metadata"]["annotations"], component
        if component != "worker":
            assert pod["metadata"]["annotations"]["example.com/owner"] == "platform", component
        if component != "web":
            assert "tier" not in pod["metadata"]["labels"], component


def test_pod_labels_never_change_a_selector(helm):
    objects = template(helm, "--set", "podLabels.app\\.kubernetes\\.io/component=other",
                       "--set", "worker.podLabels.app\\.kubernetes\\.io/instance=other")
    for component, pod in pods(objects).items():
        assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == component
        assert pod["metadata"]["labels"]["app.kubernetes.io/instance"] == "gp"


@pytest.mark.parametrize("bad", [
    ["--set", "priorityClassName=Not_A_Name"],
    ["--set", "worker.tolerations[0].operator=Sometimes"],
    ["--set", "web.topologySpreadConstraints[0].maxSkew=1"],  # no topologyKey nor whenUnsatisfiable
    ["--set", "beat.podLabels.team=not a label value"],
    ["--set", "webhooks.affinity.nodeAfinity.x=1"],
    ["--set", "worker.podDisruptionBudget.minAvailable=half"],
    ["--set", "watcher.podDisruptionBudget.maxUnavailable=0"],
    ["--set", "metrics.serviceMonitor.interval=often"],
    ["--set", "fullnameOverride=Platform"],
    ["--set", "nameOverride=a-name-far-too-long-for-any-object-prefix-in-this-chart"],
], ids=lambda bad: bad[-1])
def test_values_outside_the_schema_are_refused(helm, bad):
    result = run_helm(helm, "template", "gp", str(CHART), *bad, check=False)
    assert result.returncode != 0, bad
    assert "schema" in result.stderr.lower() or "values don't meet" in result.stderr.lower(), result.stderr


# --- the ServiceMonitor ---------------------------------------------------------------------
def test_the_service_monitor_scrapes_every_metrics_port(everything):
    [monitor] = [o for o in everything if o["kind"] == "ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["gpuplatform-system"]}
    services = [s for s in named(everything, "Service").values()
                if selects(monitor["spec"]["selector"], s["metadata"]["labels"])]
    templates = pods(everything)
    scraped = set()
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["interval"] == "15s" and endpoint["scrapeTimeout"] == "10s"
        for service in services:
            for port in (p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]):
                scraped |= {c for c, pod in templates.items()
                            if selects({"matchLabels": service["spec"]["selector"]}, pod["metadata"]["labels"])
                            and port["targetPort"] in {p["name"] for c in pod["spec"]["containers"] for p in c["ports"]}}
    assert scraped == {"web", "worker", "webhooks", "watcher"}


def test_the_web_is_scraped_with_the_metrics_token_of_the_platforms_secret(everything):
    [monitor] = [o for o in everything if o["kind"] == "ServiceMonitor"]
    [web] = [e for e in monitor["spec"]["endpoints"] if e["port"] == "http"]
    assert web["path"] == "/metrics"
    assert web["authorization"] == {"type": "Bearer", "credentials": {"name": "gp-gpuplatform-secrets",
                                                                      "key": "METRICS_TOKEN"}}
    assert "gp-gpuplatform-secrets" in named(everything, "Secret")
    [metrics] = [e for e in monitor["spec"]["endpoints"] if e["port"] == "metrics"]
    assert "authorization" not in metrics


# --- names --------------------------------------------------------------------------------
def pod_references(obj):
    spec = obj["spec"]["template"]["spec"]
    if "serviceAccountName" in spec:
        yield "ServiceAccount", spec["serviceAccountName"]
    for source in (s for c in spec["containers"] for s in c.get("envFrom", [])):
        yield ("ConfigMap", source["configMapRef"]["name"]) if "configMapRef" in source else (
            "Secret", source["secretRef"]["name"])


def binding_references(obj):
    yield obj["roleRef"]["kind"], obj["roleRef"]["name"]
    yield from (("ServiceAccount", s["name"]) for s in obj["subjects"])


def policy_references(obj):
    """The identities an admission policy matches, by their user names."""
    for condition in obj["spec"].get("matchConditions", []):
        yield from (("ServiceAccount", name) for name in
                    re.findall(r"system:serviceaccount:[-a-z0-9]+:([-a-z0-9]+)", condition["expression"]))


REFERENCES = {
    "Deployment": pod_references, "Job": pod_references,
    "ClusterRoleBinding": binding_references, "RoleBinding": binding_references,
    "ValidatingAdmissionPolicy": policy_references,
    "ValidatingAdmissionPolicyBinding": lambda obj: [("ValidatingAdmissionPolicy", obj["spec"]["policyName"])],
    "ConfigMap": lambda obj: [("ServiceAccount", obj["data"]["WEB_SERVICE_ACCOUNT"])],
    "Ingress": lambda obj: [("Service", obj["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"])],
    "ServiceMonitor": lambda obj: [("Secret", e["authorization"]["credentials"]["name"])
                                   for e in obj["spec"]["endpoints"] if "authorization" in e],
}


def references(objects):
    """Every (kind, name) one rendered object names of another."""
    for obj in objects:
        yield from REFERENCES.get(obj["kind"], lambda _: [])(obj)


def unselected(objects):
    """The Services, budgets and network policies whose selector picks no pod of the chart."""
    labels = [pod["metadata"]["labels"] for pod in pods(objects).values()]
    for obj in objects:
        selector = {"Service": lambda s: {"matchLabels": s["selector"]}, "PodDisruptionBudget": lambda s: s["selector"],
                    "NetworkPolicy": lambda s: s["podSelector"]}.get(obj["kind"])
        if selector and not any(selects(selector(obj["spec"]), each) for each in labels):
            yield obj["kind"], obj["metadata"]["name"]


@pytest.mark.parametrize(("overrides", "prefix", "name"), [
    ({"nameOverride": "gpu"}, "gp-gpu", "gpu"),
    ({"fullnameOverride": "platform"}, "platform", "gpuplatform"),
    ({"nameOverride": "gpu", "fullnameOverride": "platform"}, "platform", "gpu"),
], ids=["nameOverride", "fullnameOverride", "both"])
def test_name_overrides_rename_every_object_and_every_reference_follows(
        helm, tmp_path_factory, overrides, prefix, name):
    objects = render(helm, tmp_path_factory, {**EVERYTHING, **overrides})
    from tenants.admission import POLICY_NAME

    for obj in objects:
        validate(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == name, obj["metadata"]["name"]
        assert obj["metadata"]["name"].startswith(prefix) or obj["metadata"]["name"] == POLICY_NAME, (
            obj["kind"], obj["metadata"]["name"])
    rendered = {(o["kind"], o["metadata"]["name"]) for o in objects}
    wanted = set(references(objects))
    assert ("ServiceAccount", prefix) in wanted and ("ServiceAccount", f"{prefix}-web") in wanted
    assert wanted <= rendered, wanted - rendered
    assert not list(unselected(objects))


def test_the_defaults_have_no_dangling_reference_either(defaults):
    assert set(references(defaults)) <= {(o["kind"], o["metadata"]["name"]) for o in defaults}
    assert not list(unselected(defaults))
