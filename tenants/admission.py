"""The cluster's own guard for team namespaces: a ValidatingAdmissionPolicy (CEL, built into
Kubernetes) and its binding, rendered here and installed by whoever installs the platform, with
the installer's rights: the Helm chart ships them as ``files/team-workloads.yaml`` (written by
``manage.py team_policy --write``; tests/install/test_chart.py fails when it drifts), and the
local cluster's ``up`` applies that file as cluster admin. The platform's own identity never
writes admission policies: Kubernetes runs no admission policy on writes of admission policies,
and RBAC cannot limit ``create`` by name, so a right to write its own would be a right to
install one that denies every write in the cluster. It keeps only each team's parameters (the
ConfigMap below) up to date. Pure: rows in, dicts out.

RBAC already keeps members to reading (``tenants.manifests``). The policy holds whoever
writes into a team namespace, a person or a controller someone else gave rights there, to
what the platform itself renders:

- every kind that makes pods is matched, and only the platform's are admitted: Jobs,
  Deployments, Volcano Jobs, RayJobs, RayClusters and StatefulSets (notebooks, queued by
  Kueue, without claims of their own), and the Pods, ReplicaSets, RayClusters and Services
  their controllers make (DaemonSets, ReplicationControllers, CronJobs and RayServices are
  refused);
- workloads carry the platform's labels; owner references name only kinds the platform makes
  (a Pod: a Job, a Volcano Job or a ReplicaSet, as its controller; a ReplicaSet: a Deployment;
  a Service: a Volcano Job's, for its pods' host names; a Job, Deployment or Volcano Job:
  none), so a bare Pod or ReplicaSet cannot pass for a controller's;
- a batch Job, a RayJob or a RayCluster names one of the team's Kueue LocalQueues (a LocalQueue is named after its
  flavor, and the team's flavors are listed in the namespace's parameters ConfigMap); a
  Volcano Job, or a Deployment that Volcano schedules, names one of the team's Volcano queues;
- pod templates keep the hardened rules: the workload ServiceAccount, no host namespaces, no
  host ports, no privileged containers, no hostPath volumes, none of the variables the GPU
  runtime reads, no ``envFrom`` (a ConfigMap's keys could be those variables), no ephemeral
  containers (the ``pods/ephemeralcontainers`` subresource is matched too);
- placement is the flavor's: the nodeSelector of the flavor of the queue named (any of the
  team's flavors for a Pod that names none), its tolerations only (plus the ones Kubernetes
  adds itself), no node affinity, no nodeName: ``tolerations: [{operator: Exists}]`` with
  another pool's nodeSelector does not reach that pool. On a flavor with a network topology
  (docs/topology.md), the labels of its levels may be added with any value: Kueue's
  topology-aware scheduling ungates each pod with the domain it assigned (e.g.
  ``kubernetes.io/hostname``), always beside the flavor's own labels;
- Services are ClusterIP without ``externalIPs`` (the ResourceQuota also holds LoadBalancers
  and NodePorts at 0).

The team's queues and the placement of each of its flavors come from the parameters
ConfigMap in its namespace (reconciled with its quotas), not from the cluster-wide policy:
the policy is the same whatever the flavors, and a flavor edited in the admin reaches the
teams that use it with their queues.

Kueue stays at ``manageJobsWithoutQueueName: false``, as Kueue's own "job admission policy"
guide pairs it with such a policy: turned on, Kueue's pod integration (which Deployments need)
would also take every pod without a queue name in team namespaces, Volcano's gang pods
included. Refusing an unqueued Job at admission closes the same door and says why.
"""

from cluster import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from core.ownership import TEAM_LABEL, WORKLOAD_SERVICE_ACCOUNT, owned
from workloads.kueue import QUEUE_LABEL
from workloads.pods import GPU_RUNTIME_ENV_NAMES, GPU_RUNTIME_ENV_PREFIXES
from workloads.volcano import QUEUE_ANNOTATION

API = "admissionregistration.k8s.io/v1"
POLICY_NAME = "gpuplatform-team-workloads"
PARAMS_NAME = "gpuplatform-admission"  # a ConfigMap in each team namespace: queue -> flavor
# ...and "_placement.<flavor>" -> the flavor's placement, as tokens between '|' (no queue name
# starts with '_', and no label or toleration field holds '|').
PLACEMENT_PREFIX = "_placement."
# What the policy matches: every built-in kind that makes pods, and Volcano's Job.
MATCHED_RESOURCES = {"": ["pods", "pods/ephemeralcontainers", "replicationcontrollers", "services"],
                     "apps": ["daemonsets", "deployments", "replicasets", "statefulsets"],
                     "batch": ["cronjobs", "jobs"], "batch.volcano.sh": ["jobs"],
                     "ray.io": ["rayclusters", "rayjobs", "rayservices"]}
# Of those, the kinds admitted at all (a Volcano Job is a "Job" too; no RayService: docs/ray.md).
ADMITTED_KINDS = ["Deployment", "Job", "Pod", "RayCluster", "RayJob", "ReplicaSet", "Service", "StatefulSet"]
# KubeRay's pods and Services are its RayClusters' (a RayJob's cluster is a RayCluster the
# RayJob owns; the RayJob owns its head's Service too).
_RAY_CLUSTER_OWNER = "(o.kind == 'RayCluster' && o.apiVersion.startsWith('ray.io/'))"
_RAY_JOB_OWNER = "(o.kind == 'RayJob' && o.apiVersion.startsWith('ray.io/'))"
# Tolerations Kubernetes puts on pods itself (DefaultTolerationSeconds).
SYSTEM_TOLERATION_KEYS = ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]

_SUBMIT = "submit it through GPU Platform (web, API or gpuctl)"


def _cel(value) -> str:
    """A CEL string literal, or a list of them."""
    if isinstance(value, list):
        return "[" + ", ".join(_cel(v) for v in value) + "]"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _has_label(key: str) -> str:
    return f"has(object.metadata.labels) && {_cel(key)} in object.metadata.labels"


def _rule(expression: str, message: str) -> dict:
    return {"expression": expression, "message": message, "reason": "Forbidden"}


def toleration_key(toleration: dict) -> str:
    """One toleration as one string, the way the policy spells the pod's (``_TOLERATION``)."""
    seconds = toleration.get("tolerationSeconds")
    return ":".join([toleration.get("key") or "", toleration.get("operator") or "Equal", toleration.get("value") or "",
                     toleration.get("effect") or "", "" if seconds is None else str(seconds)])


_TOLERATION = ("(has(t.key) ? t.key : '') + ':' + (has(t.operator) ? t.operator : 'Equal') + ':' + "
               "(has(t.value) ? t.value : '') + ':' + (has(t.effect) ? t.effect : '') + ':' + "
               "(has(t.tolerationSeconds) ? string(t.tolerationSeconds) : '')")
_SYSTEM_TOLERATION = (f"(has(t.key) && t.key in {_cel(SYSTEM_TOLERATION_KEYS)} && has(t.operator) && "
                      "t.operator == 'Exists' && has(t.effect) && t.effect == 'NoExecute')")


def placement(flavor) -> str:
    """Where a flavor's pods go, as the policy reads it: its nodeSelector entries and their
    count, and the tolerations its pods may carry (its own, and the one Kubernetes'
    ExtendedResourceToleration plugin adds for its GPU resource)."""
    labels = dict(flavor.node_labels or {})
    levels = [label for _, label in flavor.topology_levels if label not in labels]
    tolerations = [*(flavor.tolerations or []), {"key": flavor.resource_name, "operator": "Exists", "effect": "NoSchedule"}]
    tokens = sorted({f"nodes:{len(labels)}", *(f"node:{k}={v}" for k, v in labels.items()),
                     *(f"topo:{label}" for label in levels),
                     *(f"tol:{toleration_key(t)}" for t in tolerations)})
    return "|" + "|".join(tokens) + "|"


def _owner_allowed() -> str:
    volcano_job = "(o.kind == 'Job' && o.apiVersion.startsWith('batch.volcano.sh/'))"
    return ("object.kind == 'Pod' ? ((o.kind == 'Job' && o.apiVersion == 'batch/v1') || "
            f"{volcano_job} || (o.kind == 'ReplicaSet' && o.apiVersion == 'apps/v1') || {_RAY_CLUSTER_OWNER} || "
            "(o.kind == 'StatefulSet' && o.apiVersion == 'apps/v1')) : "
            "object.kind == 'ReplicaSet' ? (o.kind == 'Deployment' && o.apiVersion == 'apps/v1') : "
            f"object.kind == 'Service' ? ({volcano_job} || {_RAY_CLUSTER_OWNER} || {_RAY_JOB_OWNER}) : "
            f"object.kind == 'RayCluster' ? {_RAY_JOB_OWNER} : false")


def _validations() -> list[dict]:
    return [*_workload_rules(), *_pod_rules()]


def _workload_rules() -> list[dict]:
    """What may be written at all: the kinds, their labels and owners, the queues they name,
    and Services that stay inside the cluster."""
    ours = f"{_has_label(MANAGED_BY_LABEL)} && object.metadata.labels[{_cel(MANAGED_BY_LABEL)}] == {_cel(MANAGED_BY_VALUE)}"
    volcano_template = ("variables.templates.all(s, has(s.schedulerName) && s.schedulerName == 'volcano')"
                        " && variables.annotations.all(a, " + _cel(QUEUE_ANNOTATION) + " in a"
                        " && a[" + _cel(QUEUE_ANNOTATION) + "] in variables.queues)")
    return [
        _rule(f"variables.volcano || object.kind in {_cel(ADMITTED_KINDS)}",
              "The platform runs Jobs, Deployments, Volcano Jobs, RayJobs, RayClusters and notebooks' StatefulSets "
              "in team namespaces, and nothing else that makes pods (no DaemonSet, ReplicationController, CronJob "
              f"or RayService): {_SUBMIT}."),
        _rule(f"object.kind in ['Pod', 'ReplicaSet', 'Service'] || ({ours})",
              f"Workloads in team namespaces are the platform's: {_SUBMIT}."),
        _rule("!(object.kind in ['Pod', 'ReplicaSet']) || variables.owners.exists(o, has(o.controller) && o.controller)",
              f"Pods in team namespaces are made by the platform's Jobs and Deployments: {_SUBMIT}."),
        _rule(f"variables.owners.all(o, {_owner_allowed()})",
              "Owner references in team namespaces name only what the platform makes (a Pod's: its Job, "
              f"Volcano Job, ReplicaSet or StatefulSet; a ReplicaSet's: its Deployment): {_SUBMIT}."),
        _rule(f"!(object.kind == 'Job' && !variables.volcano) || ({_has_label(QUEUE_LABEL)} && "
              "variables.kueueQueue in variables.teamFlavors)",
              f"A Job in a team namespace waits in one of the team's own Kueue queues ({QUEUE_LABEL}): {_SUBMIT}."),
        _rule(f"!variables.ray || ({_has_label(QUEUE_LABEL)} && variables.kueueQueue in variables.teamFlavors)",
              f"A RayJob or RayCluster in a team namespace waits in one of the team's own Kueue queues ({QUEUE_LABEL}): "
              f"{_SUBMIT}."),
        _rule(f"object.kind != 'StatefulSet' || ({_has_label(QUEUE_LABEL)} && variables.kueueQueue in variables.teamFlavors)",
              f"A StatefulSet (a notebook) in a team namespace waits in one of the team's own Kueue queues "
              f"({QUEUE_LABEL}): {_SUBMIT}."),
        _rule("object.kind != 'StatefulSet' || !has(object.spec.volumeClaimTemplates) || "
              "size(object.spec.volumeClaimTemplates) == 0",
              "A StatefulSet in a team namespace makes no claims of its own (volumeClaimTemplates): it mounts the "
              "team's volumes, which owners create on the team's page."),
        _rule("!variables.volcano || (has(object.spec.queue) && object.spec.queue in variables.queues)",
              "A Volcano Job in a team namespace names one of the team's own queues."),
        _rule(f"object.kind != 'Deployment' || ({_has_label(QUEUE_LABEL)} && variables.kueueQueue in variables.teamFlavors)"
              f" || ({volcano_template})",
              "A Deployment in a team namespace waits in one of the team's own queues "
              f"(Kueue's {QUEUE_LABEL} label, or Volcano with {QUEUE_ANNOTATION})."),
        _rule("object.kind != 'Service' || !has(object.spec.type) || object.spec.type == 'ClusterIP'",
              "Services in team namespaces are ClusterIP: nothing outside the cluster reaches a team's workloads."),
        _rule("object.kind != 'Service' || !has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
              "Services in team namespaces have no externalIPs: nothing outside the cluster reaches a team's workloads."),
    ]


def _pod_rules() -> list[dict]:
    """The hardened pod template, and placement on the nodes of the flavor of the queue named."""
    gpu_env = " && ".join([*(f"!e.name.upperAscii().startsWith({_cel(p)})" for p in GPU_RUNTIME_ENV_PREFIXES),
                           *(f"e.name.upperAscii() != {_cel(n)}" for n in sorted(GPU_RUNTIME_ENV_NAMES))])
    return [
        _rule("variables.templates.all(s, has(s.serviceAccountName) && "
              f"s.serviceAccountName == {_cel(WORKLOAD_SERVICE_ACCOUNT)})",
              f"Pods in team namespaces run as the '{WORKLOAD_SERVICE_ACCOUNT}' ServiceAccount."),
        _rule("variables.templates.all(s, "
              "!(has(s.hostNetwork) && s.hostNetwork) && !(has(s.hostPID) && s.hostPID) && !(has(s.hostIPC) && s.hostIPC))",
              "Pods in team namespaces do not share the node's network, PID or IPC namespaces."),
        _rule("variables.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
              "Containers in team namespaces open no ports on the node (hostPort)."),
        _rule("variables.templates.all(s, !has(s.volumes) || s.volumes.all(v, !has(v.hostPath)))",
              "Pods in team namespaces mount no hostPath volumes."),
        _rule("variables.containers.all(c, !has(c.securityContext) || "
              "!has(c.securityContext.privileged) || !c.securityContext.privileged)",
              "Containers in team namespaces are not privileged."),
        _rule(f"variables.containers.all(c, !has(c.env) || c.env.all(e, {gpu_env}))",
              "Containers in team namespaces do not set the variables the GPU runtime reads "
              "(NVIDIA_*, AMD_VISIBLE_DEVICES): GPUs come from the scheduler only."),
        _rule("variables.containers.all(c, !has(c.envFrom) || size(c.envFrom) == 0)",
              "Containers in team namespaces take no variables from ConfigMaps or Secrets (envFrom): "
              "such keys could be the variables the GPU runtime reads."),
        _rule("variables.templates.all(s, !has(s.ephemeralContainers) || size(s.ephemeralContainers) == 0)",
              "Pods in team namespaces get no ephemeral containers (kubectl debug)."),
        _rule("variables.templates.all(s, (!has(s.nodeName) || (object.kind == 'Pod' && request.operation == 'UPDATE'))"
              " && (!has(s.affinity) || !has(s.affinity.nodeAffinity)))",
              "Pods in team namespaces are placed by the scheduler on their flavor's nodes: no nodeName, no node affinity."),
        _rule(_placed(),
              "Pods in team namespaces run on the nodes of the flavor of the team's queue they name: its "
              "nodeSelector exactly, and its tolerations only."),
    ]


def _placed() -> str:
    """Every pod template fits the placement (ConfigMap "_placement.<flavor>") of one of the
    flavors it may use: each nodeSelector entry is the flavor's or one of its topology levels,
    as many of the flavor's entries as it has, and only the flavor's or the system's tolerations."""
    where = f"variables.data[{_cel(PLACEMENT_PREFIX)} + f]"
    return ("variables.templates.all(s, variables.flavors.exists(f, "
            f"({_cel(PLACEMENT_PREFIX)} + f) in variables.data && "
            f"(!has(s.nodeSelector) || s.nodeSelector.all(k, {where}.contains('|node:' + k + '=' + s.nodeSelector[k] + '|')"
            f" || {where}.contains('|topo:' + k + '|'))) && "
            f"{where}.contains('|nodes:' + string(has(s.nodeSelector) ? "
            f"size(s.nodeSelector.filter(k, !{where}.contains('|topo:' + k + '|'))) : 0) + '|') && "
            f"(!has(s.tolerations) || s.tolerations.all(t, {_SYSTEM_TOLERATION} || "
            f"{where}.contains('|tol:' + {_TOLERATION} + '|')))))")


def _variables() -> list[dict]:
    templates = (
        "object.kind == 'Service' ? [] : "
        "object.kind == 'Pod' ? [object.spec] : "
        "object.kind == 'CronJob' ? [object.spec.jobTemplate.spec.template.spec] : "
        "variables.volcano ? (has(object.spec.tasks) ? object.spec.tasks.map(t, t.template.spec) : []) : "
        "variables.ray ? variables.rayGroups.map(g, g.template.spec) : "
        "[object.spec.template.spec]"
    )
    # A RayJob's cluster spec (none when it names an existing cluster) or a RayCluster's spec:
    # its head group and worker groups, each with a pod template.
    ray_groups = (
        "!variables.ray ? [] : "
        "(object.kind == 'RayJob' ? (has(object.spec.rayClusterSpec) ? [object.spec.rayClusterSpec] : []) : "
        "[object.spec]).map(c, (has(c.headGroupSpec) ? [c.headGroupSpec] : []) + "
        "(has(c.workerGroupSpecs) ? c.workerGroupSpecs : [])).flatten()"
    )
    template_metadata = (
        "object.kind in ['Service', 'Pod', 'CronJob'] || variables.volcano || variables.ray ? [] : "
        "[has(object.spec.template.metadata) && has(object.spec.template.metadata.annotations) ? "
        "object.spec.template.metadata.annotations : {}]"
    )
    annotation = _cel(QUEUE_ANNOTATION)
    volcano_queue = (
        "variables.volcano ? (has(object.spec.queue) ? object.spec.queue : '') : "
        f"object.kind == 'Pod' ? (has(object.metadata.annotations) && {annotation} in object.metadata.annotations ? "
        f"object.metadata.annotations[{annotation}] : '') : "
        f"variables.annotations.exists(a, {annotation} in a) ? "
        f"variables.annotations.filter(a, {annotation} in a)[0][{annotation}] : ''"
    )
    flavors_named = (
        "variables.volcanoQueue != '' ? (variables.volcanoQueue in variables.queues ? "
        "[variables.data[variables.volcanoQueue]] : []) : "
        "variables.kueueQueue != '' ? (variables.kueueQueue in variables.teamFlavors ? [variables.kueueQueue] : []) : "
        "variables.teamFlavors"
    )
    return [
        {"name": "volcano", "expression": "object.apiVersion.startsWith('batch.volcano.sh/')"},
        {"name": "ray", "expression": "object.apiVersion.startsWith('ray.io/')"},
        {"name": "rayGroups", "expression": ray_groups},
        {"name": "data", "expression": "has(params.data) ? params.data : {}"},
        {"name": "queues", "expression": "variables.data.filter(k, !k.startsWith('_'))"},
        {"name": "teamFlavors", "expression": "variables.queues.map(q, variables.data[q])"},
        {"name": "owners", "expression": "has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []"},
        {"name": "templates", "expression": templates},
        {"name": "annotations", "expression": template_metadata},
        {"name": "containers", "expression": "variables.templates.map(s, s.containers + "
                                             "(has(s.initContainers) ? s.initContainers : [])).flatten()"},
        {"name": "kueueQueue", "expression": f"{_has_label(QUEUE_LABEL)} ? object.metadata.labels[{_cel(QUEUE_LABEL)}] : ''"},
        {"name": "volcanoQueue", "expression": volcano_queue},
        # The flavors a workload may be placed on: its queue's, or the team's for a Pod that names none.
        {"name": "flavors", "expression": flavors_named},
    ]


def _resource_rules() -> list[dict]:
    return [{"apiGroups": [group], "apiVersions": ["*"], "resources": names, "operations": ["CREATE", "UPDATE"]}
            for group, names in MATCHED_RESOURCES.items()]


def render_admission() -> list[dict]:
    """The policy and its binding to every team namespace: the same whatever the teams and
    flavors, so rendered once, for the installer (not labelled as the platform's: it neither
    applies nor prunes them)."""
    policy = {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": _resource_rules()},
            # An object on its way out only loses finalizers: never block that.
            "matchConditions": [{"name": "not-being-deleted",
                                 "expression": "request.operation == 'CREATE' || !has(object.metadata.deletionTimestamp)"}],
            "variables": _variables(),
            "validations": _validations(),
        },
    }
    binding = {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": POLICY_NAME},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            # The parameters live in the namespace of the object under review; a team
            # namespace without them admits no workload at all.
            "paramRef": {"name": PARAMS_NAME, "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {
                "matchLabels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                "matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}],
            }},
        },
    }
    return [policy, binding]


def render_admission_params(team, queues: dict[str, str], flavors=()) -> dict:
    """The team's parameters for the policy: its Volcano and Kueue queue names -> flavor, and
    the placement of each of ``flavors`` (its quotas')."""
    data = {**queues, **{PLACEMENT_PREFIX + flavor.name: placement(flavor) for flavor in flavors}}
    return owned({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": PARAMS_NAME, "namespace": team.namespace_name},
                  "data": dict(sorted(data.items()))}, team=team.slug)


def _within(want, live) -> bool:
    """Whether ``live`` holds everything ``want`` says (the API server adds its defaults)."""
    if isinstance(want, dict):
        return isinstance(live, dict) and all(key in live and _within(value, live[key]) for key, value in want.items())
    if isinstance(want, list):
        return (isinstance(live, list) and len(want) == len(live)
                and all(_within(w, found) for w, found in zip(want, live, strict=True)))
    return want == live


def drift(installed: dict[str, dict | None]) -> str:
    """How the cluster's policy and binding (kind -> the live object, None when missing) stand
    against this version's rendering: "ok", or which is missing or differs. The platform
    only reads them (/readyz), it never writes them."""
    wrong = []
    for want in render_admission():
        found = installed.get(want["kind"])
        if found is None:
            wrong.append(f"{want['kind']} {POLICY_NAME} missing")
        elif not _within(want["spec"], found.get("spec")):
            wrong.append(f"{want['kind']} {POLICY_NAME} differs from this version's")
    return "ok" if not wrong else "; ".join(wrong) + ": install this version's chart (docs/install.md)"
