"""Issue 29, finding 6 (the web pods mounted the worker's ServiceAccount), rendered by real
Helm, then live on the local cluster as the chart's identities
(tests/live/install/test_chart_live.py installs the chart the same way). The finding, its fix
and what needs neither: tests/security/test_finding_06_web_identity.py."""

import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from django.test import override_settings
from django.urls import reverse

from deploy.stack import components
from gpuplatform.rbac import WEB_CLUSTER_RULES, flatten, web_namespace_rules
from jobs.manifests import render_job
from tenants.admission import POLICY_NAME, render_admission
from tenants.manifests import WEB_TEAM_RULES

from ...builders import make_job
from ...support.chart import kubectl, template

NAMESPACE = "gpuplatform-system"


# --- the chart, rendered ------------------------------------------------------------------
@pytest.fixture(scope="module")
def chart(helm):
    return template(helm, namespace=NAMESPACE)


def named(objects, kind, name):
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_finding_06_the_web_runs_as_its_own_service_account(chart):
    web = named(chart, "Deployment", "gp-gpuplatform-web")["spec"]["template"]["spec"]
    assert web["serviceAccountName"] == "gp-gpuplatform-web"
    for kind in ("Deployment", "Job"):
        for obj in (o for o in chart if o["kind"] == kind and not o["metadata"]["name"].endswith("-web")):
            assert obj["spec"]["template"]["spec"].get("serviceAccountName") != "gp-gpuplatform-web", obj["metadata"]["name"]
    config = next(o for o in chart if o["kind"] == "ConfigMap")["data"]
    assert config["WEB_SERVICE_ACCOUNT"] == "gp-gpuplatform-web"
    # the platform's bindings never name the web's account
    for binding in (o for o in chart if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        web_bound = any(s["name"] == "gp-gpuplatform-web" for s in binding["subjects"])
        assert web_bound == binding["metadata"]["name"].endswith("-web"), binding["metadata"]["name"]


def test_finding_06_the_web_holds_only_what_it_reads(chart):
    cluster_role = named(chart, "ClusterRole", "gp-gpuplatform-web")
    assert flatten(cluster_role["rules"]) == flatten(WEB_CLUSTER_RULES)
    role = named(chart, "Role", "gp-gpuplatform-web")
    assert role["rules"] == web_namespace_rules(NAMESPACE)
    for rule in [*cluster_role["rules"], *role["rules"], *WEB_TEAM_RULES]:
        assert not {"create", "update", "patch", "delete", "watch"} & set(rule["verbs"]), rule
        assert not {"pods/portforward", "pods/exec", "pods/attach", "configmaps", "secrets"} & set(rule["resources"])


def test_finding_06_no_identity_of_the_chart_may_connect(chart):
    policy = named(chart, "ValidatingAdmissionPolicy", "gp-gpuplatform-no-connect")
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["CONNECT"] and "pods/portforward" in rule["resources"]
    expression = policy["spec"]["matchConditions"][0]["expression"]
    for account in ("gp-gpuplatform", "gp-gpuplatform-web"):
        assert f'"system:serviceaccount:{NAMESPACE}:{account}"' in expression
    binding = named(chart, "ValidatingAdmissionPolicyBinding", "gp-gpuplatform-no-connect")
    assert binding["spec"] == {"policyName": "gp-gpuplatform-no-connect", "validationActions": ["Deny"]}


# --- live, as the chart's identities ------------------------------------------------------
KUBECTL = Path(components.get("kubernetes").binary("kubectl"))


def _kubeconfig_for(kube_cluster, namespace, account, tmp_path_factory) -> tuple[str, str]:
    token = kubectl(kube_cluster, "-n", namespace, "create", "token", account, "--duration", "2h").stdout.strip()
    config = yaml.safe_load(Path(kube_cluster).read_text())
    config["users"] = [{"name": account, "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = account
    path = tmp_path_factory.mktemp(account) / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path), token


@pytest.fixture(scope="module")
def identities(release, kube_cluster, tmp_path_factory):
    """Kubeconfigs and tokens of the chart's two identities."""
    web, platform = f"{release['sa']}-web", release["sa"]
    return {"web": (web, *_kubeconfig_for(kube_cluster, release["namespace"], web, tmp_path_factory)),
            "platform": (platform, *_kubeconfig_for(kube_cluster, release["namespace"], platform, tmp_path_factory))}


@pytest.fixture
def web_team(release, world, live):
    """The `world` team, synced by a platform that knows the chart's web identity."""
    from tenants.tasks import sync_team

    team, h100, a100 = world
    with override_settings(WEB_SERVICE_ACCOUNT=f"{release['sa']}-web", PLATFORM_NAMESPACE=release["namespace"]):
        sync_team(live, team)
        yield team, h100, a100


def _can(kube_cluster, user, verb, resource, *where) -> bool:
    result = kubectl(kube_cluster, "auth", "can-i", verb, resource, *where, "--as", user, check=False)
    return result.stdout.strip() == "yes"


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_06_live_the_web_identity_reads_team_pods_and_logs_only(release, kube_cluster, web_team):
    team, _, _ = web_team
    ns, user = team.namespace_name, f"system:serviceaccount:{release['namespace']}:{release['sa']}-web"
    cannot = [
        ("create", "pods/portforward", "-n", ns), ("create", "pods/portforward", "-n", "default"),
        ("create", "pods/portforward", "-n", "kube-system"), ("create", "pods/exec", "-n", ns),
        ("get", "configmaps", "--all-namespaces"), ("list", "configmaps", "-n", ns),
        ("get", "configmaps", "-n", release["namespace"]), ("list", "secrets", "--all-namespaces"),
        ("get", "secrets", "-n", ns), ("list", "pods", "--all-namespaces"), ("list", "pods", "-n", "kube-system"),
        ("get", "pods/log", "-n", "kube-system"), ("get", "pods/log", "-n", release["namespace"]),
        ("create", "jobs.batch", "-n", ns), ("patch", "deployments.apps", "-n", ns), ("delete", "pods", "-n", ns),
        ("create", "namespaces"), ("create", "validatingadmissionpolicies.admissionregistration.k8s.io"),
        ("list", "validatingadmissionpolicies.admissionregistration.k8s.io"),
        ("get", f"validatingadmissionpolicies.admissionregistration.k8s.io/{release['sa']}-confine-writes"),
        ("patch", f"validatingadmissionpolicies.admissionregistration.k8s.io/{POLICY_NAME}"),
        ("watch", "pods", "-n", ns), ("get", "namespaces/default"),
    ]
    can = [("list", "pods", "-n", ns), ("get", "pods", "-n", ns), ("get", "pods/log", "-n", ns),
           ("get", "deployments.apps", "-n", ns), ("list", "nodes"),
           ("get", "clusterqueues.visibility.kueue.x-k8s.io", "--subresource", "pendingworkloads"),
           ("get", f"namespaces/{release['namespace']}", "-n", release["namespace"]),
           ("get", f"validatingadmissionpolicies.admissionregistration.k8s.io/{POLICY_NAME}"),
           ("get", f"validatingadmissionpolicybindings.admissionregistration.k8s.io/{POLICY_NAME}")]
    wrong = ([("may", *c) for c in cannot if _can(kube_cluster, user, *c)]
             + [("may not", *c) for c in can if not _can(kube_cluster, user, *c)])
    assert wrong == [], wrong


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_06_live_the_web_serves_its_pages_as_its_own_identity(identities, web_team, live, watcher,
                                                                       client_for, monkeypatch):
    """The job's pods, logs (page, download, API), the capacity page, the queue position and
    /readyz, with the web's identity as the web's cluster: every one served, not one 403."""
    from cluster import Cluster
    from core import reconcile
    from jobs.lifecycle import State
    from jobs.outlook.pending import kueue_order

    from ...builders import make_user
    from ...support.cluster import reaches, submit

    team, h100, _ = web_team
    job = submit(live, team, h100, workers=1, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    reaches(job, State.RUNNING)
    account, kubeconfig, _ = identities["web"]
    web = Cluster(kubeconfig=kubeconfig)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: web)
    owner = team.memberships.get(role="owner").user
    client = client_for(owner)
    [pod] = live.list("v1", "Pod", namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    name = pod["metadata"]["name"]
    pods = client.get(reverse("jobs:pods", args=[job.pk])).content.decode()
    assert name in pods, pods[:2000]
    logs = client.get(reverse("jobs:logs", args=[job.pk]), {"pod": name}).content.decode()
    assert name in logs, logs[:2000]
    download = client.get(reverse("jobs:log_download", args=[job.pk]), {"pod": name})
    assert download.status_code == 200, download.content[:500]
    api = client.get(f"/api/v1/jobs/{job.pk}/logs")
    assert api.status_code == 200 and [p["pod"] for p in api.json()["pods"]] == [name], api.content[:500]
    kueue_order(job, web)  # Kueue's visibility API (a 403 would be counted below)
    manager = make_user(f"qm-{team.slug}", quota_manager=True)
    assert client_for(manager).get(reverse("console:capacity")).status_code == 200
    assert dict(web.forbidden) == {}, web.forbidden
    assert web.requests, "the web asked the cluster nothing"


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_06_live_readyz_reaches_the_cluster_as_the_web(identities, release, client, monkeypatch):
    from cluster import Cluster
    from core import reconcile
    from gpuplatform import health

    web = Cluster(kubeconfig=identities["web"][1])
    monkeypatch.setattr(health, "cluster_configured", lambda: True)  # imported by name there
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: web)
    with override_settings(PLATFORM_NAMESPACE=release["namespace"]):
        body = client.get("/readyz").json()
    assert body["cluster"] == "ok" and body["team_policy"] == "ok", body  # the chart's, as this version renders it
    assert dict(web.forbidden) == {}


def _post_as(kube_cluster, token, path) -> tuple[int, str]:
    """A bare POST (no upgrade) as ``token``: admission sees a CONNECT before any stream opens."""
    config = yaml.safe_load(Path(kube_cluster).read_text())
    cluster = config["clusters"][0]["cluster"]
    context = ssl.create_default_context()
    if "certificate-authority-data" in cluster:
        context.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif "certificate-authority" in cluster:
        context.load_verify_locations(cafile=cluster["certificate-authority"])
    request = urllib.request.Request(cluster["server"] + path, method="POST", data=b"",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_06_live_neither_identity_may_port_forward_anywhere(identities, kube_cluster, web_team):
    team, _, _ = web_team
    for namespace in (team.namespace_name, "default", "kube-system"):
        path = f"/api/v1/namespaces/{namespace}/pods/anything/portforward?ports=8080"
        status, body = _post_as(kube_cluster, identities["platform"][2], path)
        assert status == 403 and "connects to no pod" in body, (namespace, status, body)
        status, body = _post_as(kube_cluster, identities["web"][2], path)
        assert status == 403 and "cannot create resource" in body, (namespace, status, body)


def _as_platform(platform_kubeconfig, *args, manifest=None):
    import subprocess

    return subprocess.run([str(KUBECTL), "--kubeconfig", platform_kubeconfig, *args, "--dry-run=server"],
                          input=yaml.safe_dump(manifest) if manifest else None,
                          capture_output=True, text=True, timeout=120)


ADMISSION_RESOURCES = ["validatingadmissionpolicies.admissionregistration.k8s.io",
                       "validatingadmissionpolicybindings.admissionregistration.k8s.io",
                       "mutatingadmissionpolicies.admissionregistration.k8s.io",
                       "validatingwebhookconfigurations.admissionregistration.k8s.io",
                       "mutatingwebhookconfigurations.admissionregistration.k8s.io"]


def _get(kube_cluster, kind, name) -> dict:
    return yaml.safe_load(kubectl(kube_cluster, "get", kind, name, "-o", "yaml").stdout)


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_06_live_the_platform_cannot_install_a_foreign_admission_policy(identities, release, kube_cluster,
                                                                                 web_team, live, member_cluster):
    """Kubernetes runs no admission policy on writes of admission policies and RBAC cannot
    limit `create` by name, so the platform's identity holds no right on them at all: the chart
    installs the team policy with the installer's rights, and it still holds team namespaces."""
    from ..cluster.test_no_way_around_the_queues import POD, denied_by_policy, refused

    team, h100, _ = web_team
    kubeconfig, platform = identities["platform"][1], identities["platform"][0]
    user = f"system:serviceaccount:{release['namespace']}:{platform}"
    may = [(verb, resource) for resource in ADMISSION_RESOURCES
           for verb in ("create", "update", "patch", "delete", "deletecollection")
           if _can(kube_cluster, user, verb, resource)]
    assert may == [], may

    def refused_by_rbac(result) -> bool:
        return result.returncode != 0 and f'is forbidden: User "{user}" cannot' in result.stderr
    labels = {"app.kubernetes.io/managed-by": "gpuplatform"}
    deny_all = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "deny-every-configmap", "labels": labels},
                "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
                    {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]},
                         "validations": [{"expression": "false"}]}}
    foreign = _as_platform(kubeconfig, "create", "-f", "-", manifest=deny_all)
    assert foreign.returncode != 0 and 'cannot create resource "validatingadmissionpolicies"' in foreign.stderr, (
        foreign.stderr)
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "deny-everywhere", "labels": labels},
               "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]}}
    foreign_binding = _as_platform(kubeconfig, "create", "-f", "-", manifest=binding)
    assert foreign_binding.returncode != 0, foreign_binding.stdout
    assert 'cannot create resource "validatingadmissionpolicybindings"' in foreign_binding.stderr
    # the team policy, turned against the cluster: bound everywhere, matching everything, gone
    everywhere = _as_platform(kubeconfig, "patch", "validatingadmissionpolicybinding", POLICY_NAME, "--type", "json",
                              "-p", '[{"op": "remove", "path": "/spec/matchResources/namespaceSelector"}]')
    assert refused_by_rbac(everywhere), everywhere.stderr  # (kubectl reads it first: not even that)
    everything = _as_platform(kubeconfig, "patch", "validatingadmissionpolicy", POLICY_NAME, "--type", "json",
                              "-p", '[{"op": "add", "path": "/spec/matchConstraints/resourceRules/-", "value": '
                                    '{"apiGroups": [""], "apiVersions": ["*"], "operations": ["CREATE"], '
                                    '"resources": ["configmaps"]}}]')
    assert refused_by_rbac(everything), everything.stderr
    # neither the team policy nor the chart's own policies are the platform's to delete
    for kind, name in [("validatingadmissionpolicy", POLICY_NAME), ("validatingadmissionpolicybinding", POLICY_NAME),
                       *(("validatingadmissionpolicy", f"{platform}-{own}") for own in ("confine-writes", "no-connect"))]:
        gone = _as_platform(kubeconfig, "delete", kind, name)
        assert refused_by_rbac(gone), (kind, name, gone.stderr)
    # the team policy is the chart's (this release took it over), as the code renders it ...
    [policy, policy_binding] = render_admission()
    installed = _get(kube_cluster, "validatingadmissionpolicy", POLICY_NAME)
    assert installed["metadata"]["annotations"]["meta.helm.sh/release-name"] == release["name"]
    for field in ("validations", "variables", "matchConditions", "paramKind", "failurePolicy"):
        assert installed["spec"][field] == policy["spec"][field], field
    installed_binding = _get(kube_cluster, "validatingadmissionpolicybinding", POLICY_NAME)
    assert installed_binding["metadata"]["annotations"]["meta.helm.sh/release-name"] == release["name"]
    assert installed_binding["spec"]["paramRef"] == policy_binding["spec"]["paramRef"]
    assert (installed_binding["spec"]["matchResources"]["namespaceSelector"]
            == policy_binding["spec"]["matchResources"]["namespaceSelector"])
    # ... and it still holds team namespaces: a member cannot create a workload (RBAC), and
    # the cluster admin, whom RBAC does not stop, cannot create one off the queues
    ns = team.namespace_name
    refused(member_cluster, POD, ns)
    [batch_job] = [o for o in render_job(make_job(team, h100, name="around")) if o["kind"] == "Job"]
    del batch_job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert "Kueue queue" in denied_by_policy(live, batch_job, ns)


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_06_live_the_platform_holds_one_lease_only(identities, release):
    kubeconfig = identities["platform"][1]
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "someone-elses-lock", "namespace": release["namespace"]}, "spec": {}}
    other = _as_platform(kubeconfig, "create", "-f", "-", manifest=lease)
    assert other.returncode != 0 and "holds one Lease" in other.stderr, other.stderr
    ours = _as_platform(kubeconfig, "create", "-f", "-",
                        manifest={**lease, "metadata": {**lease["metadata"], "name": "gpuplatform-watcher"}})
    assert ours.returncode == 0 or "already exists" in ours.stderr, ours.stderr
