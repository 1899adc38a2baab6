"""The Helm chart (deploy/helm/gpuplatform), rendered by real Helm: it lints, every object
is valid for Kubernetes 1.36 (strict, unknown fields rejected), every pod keeps the
restricted Pod Security profile, the processes are laid out as docs/install.md says, and
the ClusterRole grants exactly what the code needs (gpuplatform/rbac.py). Needs the Helm
build; what needs no Helm: tests/install/test_chart.py."""

import kubernetes_validate
import pytest

from gpuplatform.rbac import LEASE_RULES, cluster_role_rules, flatten, required

from ...schemas import KUBERNETES_VERSION
from ...support.chart import CHART, PRODUCTION_VALUES, run_helm, template

VALUE_SETS = {"defaults": [], "production example": ["-f", str(PRODUCTION_VALUES)],
              "everything on": ["--set", "ingress.enabled=true", "--set", "ingress.tlsSecretName=tls"]}


@pytest.fixture(scope="module", params=list(VALUE_SETS), ids=list(VALUE_SETS))
def rendered(request, helm):
    return template(helm, *VALUE_SETS[request.param])


@pytest.fixture(scope="module")
def defaults(helm):
    return template(helm)


def find(objects, kind, suffix=""):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert found, f"no {kind} *{suffix}"
    return found[0] if suffix else found


def pod_specs(objects):
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def test_the_chart_lints_strictly(helm):
    run_helm(helm, "lint", "--strict", str(CHART))
    run_helm(helm, "lint", "--strict", str(CHART), "-f", str(PRODUCTION_VALUES))


def test_every_rendered_object_is_valid_for_kubernetes(rendered):
    for obj in rendered:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert {o["kind"] for o in rendered} >= {"Deployment", "Job", "ClusterRole", "NetworkPolicy", "PodDisruptionBudget"}


def test_every_pod_keeps_the_restricted_pod_security_profile(rendered):
    for name, spec in pod_specs(rendered):
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert not any(spec.get(f) for f in ("hostNetwork", "hostPID", "hostIPC")), name
        assert all(set(v) - {"name"} <= {"emptyDir", "configMap", "secret", "projected"} for v in spec.get("volumes", [])), name
        for container in spec["containers"] + spec.get("initContainers", []):
            ctx = container["securityContext"]
            assert ctx["allowPrivilegeEscalation"] is False, name
            assert ctx["capabilities"] == {"drop": ["ALL"]}, name
            assert ctx["readOnlyRootFilesystem"] is True, name
            assert not ctx.get("privileged"), name
            assert all("hostPort" not in port for port in container.get("ports", [])), name


def test_only_the_processes_that_talk_to_the_cluster_get_a_token(defaults):
    tokens = {name.removeprefix("gp-gpuplatform-"): spec.get("automountServiceAccountToken")
              for name, spec in pod_specs(defaults)}
    assert tokens == {"web": True, "worker": True, "watcher": True, "beat": False, "migrate": False,
                      "webhooks": False}  # the webhook sender calls outside addresses: no token
    accounts = find(defaults, "ServiceAccount")
    assert len(accounts) == 2 and all(a["automountServiceAccountToken"] is False for a in accounts)


def test_web_runs_twice_behind_a_disruption_budget_with_probes(defaults):
    web = find(defaults, "Deployment", "-web")
    assert web["spec"]["replicas"] >= 2
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["args"][0] == "gunicorn"
    assert find(defaults, "PodDisruptionBudget", "-web")["spec"]["minAvailable"] == 1


def test_there_is_exactly_one_beat_never_two_during_an_upgrade(defaults):
    beat = find(defaults, "Deployment", "-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}


def test_two_watchers_elect_a_leader_and_the_worker_drains(defaults):
    watcher = find(defaults, "Deployment", "-watcher")
    assert watcher["spec"]["replicas"] == 2
    assert "--leader-elect" in watcher["spec"]["template"]["spec"]["containers"][0]["args"]
    worker = find(defaults, "Deployment", "-worker")["spec"]["template"]["spec"]
    assert worker["terminationGracePeriodSeconds"] >= 60


def test_migrations_run_as_a_hook_after_their_settings_exist(defaults):
    job = find(defaults, "Job", "-migrate")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["python", "manage.py", "migrate", "--noinput"]
    for kind in ("ConfigMap", "Secret"):
        annotations = find(defaults, kind)[0]["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert int(annotations["helm.sh/hook-weight"]) < int(job["metadata"]["annotations"]["helm.sh/hook-weight"])


def test_an_existing_secret_is_used_and_none_is_made(helm):
    objects = template(helm, "-f", str(PRODUCTION_VALUES))
    assert not [o for o in objects if o["kind"] == "Secret"]
    web = find(objects, "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0]
    assert {"secretRef": {"name": "gpuplatform-secrets"}} in web["envFrom"]


def test_values_outside_the_schema_are_refused(helm):
    for bad in (["--set", "web.replicas=1"], ["--set", "secrets.databaseUrl=mysql://x"], ["--set", "nonsense=1"],
                ["--set", "config.podSecurityLevel=lax"]):
        result = run_helm(helm, "template", "gp", str(CHART), *bad, check=False)
        assert result.returncode != 0, bad
        assert "schema" in result.stderr.lower() or "values don't meet" in result.stderr.lower(), result.stderr


# --- RBAC ----------------------------------------------------------------------------------
def test_the_cluster_role_grants_exactly_what_the_code_needs(defaults):
    role = find(defaults, "ClusterRole", "-gpuplatform")
    assert flatten(role["rules"]) == required(), (
        "deploy/helm/gpuplatform/templates/rbac.yaml differs from gpuplatform/rbac.py; the code needs:\n"
        + "\n".join(str(rule) for rule in cluster_role_rules()))


def test_the_cluster_role_has_no_wildcards_secrets_or_node_writes(defaults):
    rules = [rule for role in find(defaults, "ClusterRole") for rule in role["rules"]]
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        assert "secrets" not in rule["resources"], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        if "nodes" in rule["resources"]:
            assert rule["verbs"] == ["list"], rule


def test_the_lease_is_granted_in_the_platform_namespace_only(defaults):
    role = find(defaults, "Role", "-leader-election")
    assert role["rules"] == LEASE_RULES
    binding = find(defaults, "RoleBinding", "-leader-election")
    assert binding["subjects"][0]["namespace"] == "gpuplatform-system"


def test_the_admission_policy_confines_every_write_the_cluster_role_allows(defaults):
    policy = find(defaults, "ValidatingAdmissionPolicy", "-confine-writes")
    matched = flatten([{**rule, "verbs": rule["operations"]} for rule in policy["spec"]["matchConstraints"]["resourceRules"]])
    # every write but CONNECT (pods/portforward: the no-connect policy's)
    writable = {(group, name) for (group, name), verbs in required().items()
                if verbs & {"create", "update", "patch", "delete"} and "/" not in name} | {
        (group, name) for rule in LEASE_RULES for group in rule["apiGroups"] for name in rule["resources"]}
    assert set(matched) == writable
    assert all(set(ops) == {"CREATE", "UPDATE", "DELETE"} for ops in matched.values())
    assert policy["spec"]["matchConditions"][0]["expression"] == (
        'request.userInfo.username == "system:serviceaccount:gpuplatform-system:gp-gpuplatform"')
    binding = find(defaults, "ValidatingAdmissionPolicyBinding", "-confine-writes")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_the_chart_installs_the_team_policy_and_keeps_it_on_uninstall(rendered):
    from tenants.admission import POLICY_NAME, render_admission

    installed = {o["kind"]: o for o in rendered if o["metadata"]["name"] == POLICY_NAME}
    assert set(installed) == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for want in render_admission():
        got = installed[want["kind"]]
        assert got["spec"] == want["spec"], want["kind"]
        assert got["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert got["metadata"]["labels"]["app.kubernetes.io/instance"] == "gp"


def test_no_identity_of_the_chart_may_write_admission_policies(defaults):
    """RBAC cannot limit `create` by name and no admission policy sees these writes: any right
    to write one is a right to deny every write in the cluster. The platform's identity holds
    none; the web's reads the team policy and binding, by name, for /readyz."""
    from gpuplatform.rbac import WEB_CLUSTER_RULES
    from tenants.admission import POLICY_NAME

    assert not {key for key in required() if key[0] == "admissionregistration.k8s.io"}
    web = find(defaults, "ClusterRole", "-web")
    assert web["rules"] == WEB_CLUSTER_RULES  # resourceNames included
    for role in [o for o in defaults if o["kind"] in ("ClusterRole", "Role")]:
        for rule in role["rules"]:
            if "admissionregistration.k8s.io" in rule["apiGroups"]:
                assert role is web and rule["verbs"] == ["get"] and rule["resourceNames"] == [POLICY_NAME], (
                    role["metadata"]["name"], rule)
