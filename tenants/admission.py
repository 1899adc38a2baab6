"""The cluster's own guard for team namespaces: a ValidatingAdmissionPolicy (CEL, built into
Kubernetes) that the platform renders and reconciles. Pure: rows in, dicts out.

RBAC already keeps members to reading (``tenants.manifests``). The policy holds whoever
writes into a team namespace, a person or a controller someone else gave rights there, to
what the platform itself renders:

- workloads carry the platform's labels; pods and ReplicaSets are made by a controller;
- a batch Job names a Kueue LocalQueue (LocalQueues live in the namespace, so it can only be
  the team's own); a Volcano Job, or a Deployment that Volcano schedules, names one of the
  team's Volcano queues, listed in the namespace's parameters ConfigMap;
- pod templates keep the hardened rules: the workload ServiceAccount, no host namespaces, no
  privileged containers, no hostPath volumes, none of the variables the GPU runtime reads;
- Services are ClusterIP (the ResourceQuota also holds LoadBalancers and NodePorts at 0).

Kueue stays at ``manageJobsWithoutQueueName: false``, as Kueue's own "job admission policy"
guide pairs it with such a policy: turned on, Kueue's pod integration (which Deployments need)
would also take every pod without a queue name in team namespaces, Volcano's gang pods
included. Refusing an unqueued Job at admission closes the same door and says why.
"""

from cluster import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from core.ownership import TEAM_LABEL, WORKLOAD_SERVICE_ACCOUNT, owned
from schedulers.kueue import QUEUE_LABEL
from schedulers.volcano import QUEUE_ANNOTATION
from schedulers.workloads import GPU_RUNTIME_ENV_NAMES, GPU_RUNTIME_ENV_PREFIXES

API = "admissionregistration.k8s.io/v1"
POLICY_NAME = "gpuplatform-team-workloads"
PARAMS_NAME = "gpuplatform-admission"  # a ConfigMap in each team namespace: queue -> flavor
ADMISSION_KINDS = [(API, "ValidatingAdmissionPolicy"), (API, "ValidatingAdmissionPolicyBinding")]

_SUBMIT = "submit it through GPU Platform (web, API or gpuctl)"


def _cel(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _has_label(key: str) -> str:
    return f"has(object.metadata.labels) && {_cel(key)} in object.metadata.labels"


def _rule(expression: str, message: str) -> dict:
    return {"expression": expression, "message": message, "reason": "Forbidden"}


def _validations() -> list[dict]:
    ours = f"{_has_label(MANAGED_BY_LABEL)} && object.metadata.labels[{_cel(MANAGED_BY_LABEL)}] == {_cel(MANAGED_BY_VALUE)}"
    gpu_env = " && ".join([*(f"!e.name.upperAscii().startsWith({_cel(p)})" for p in GPU_RUNTIME_ENV_PREFIXES),
                           *(f"e.name.upperAscii() != {_cel(n)}" for n in sorted(GPU_RUNTIME_ENV_NAMES))])
    volcano_template = ("variables.templates.all(s, has(s.schedulerName) && s.schedulerName == 'volcano')"
                        " && variables.annotations.all(a, " + _cel(QUEUE_ANNOTATION) + " in a"
                        " && a[" + _cel(QUEUE_ANNOTATION) + "] in variables.queues)")
    return [
        _rule(f"object.kind in ['Pod', 'ReplicaSet', 'Service'] || ({ours})",
              f"Workloads in team namespaces are the platform's: {_SUBMIT}."),
        _rule("!(object.kind in ['Pod', 'ReplicaSet']) || "
              "(has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) > 0)",
              f"Pods in team namespaces are made by the platform's Jobs and Deployments: {_SUBMIT}."),
        _rule(f"!(object.kind == 'Job' && !variables.volcano) || ({_has_label(QUEUE_LABEL)})",
              f"A Job in a team namespace waits in the team's Kueue queue ({QUEUE_LABEL}): {_SUBMIT}."),
        _rule("!variables.volcano || (has(object.spec.queue) && object.spec.queue in variables.queues)",
              "A Volcano Job in a team namespace names one of the team's own queues."),
        _rule(f"object.kind != 'Deployment' || ({_has_label(QUEUE_LABEL)}) || ({volcano_template})",
              "A Deployment in a team namespace waits in one of the team's own queues "
              f"(Kueue's {QUEUE_LABEL} label, or Volcano with {QUEUE_ANNOTATION})."),
        _rule("object.kind != 'Service' || !has(object.spec.type) || object.spec.type == 'ClusterIP'",
              "Services in team namespaces are ClusterIP: nothing outside the cluster reaches a team's workloads."),
        _rule("variables.templates.all(s, has(s.serviceAccountName) && "
              f"s.serviceAccountName == {_cel(WORKLOAD_SERVICE_ACCOUNT)})",
              f"Pods in team namespaces run as the '{WORKLOAD_SERVICE_ACCOUNT}' ServiceAccount."),
        _rule("variables.templates.all(s, "
              "!(has(s.hostNetwork) && s.hostNetwork) && !(has(s.hostPID) && s.hostPID) && !(has(s.hostIPC) && s.hostIPC))",
              "Pods in team namespaces do not share the node's network, PID or IPC namespaces."),
        _rule("variables.templates.all(s, !has(s.volumes) || s.volumes.all(v, !has(v.hostPath)))",
              "Pods in team namespaces mount no hostPath volumes."),
        _rule("variables.containers.all(c, !has(c.securityContext) || "
              "!has(c.securityContext.privileged) || !c.securityContext.privileged)",
              "Containers in team namespaces are not privileged."),
        _rule(f"variables.containers.all(c, !has(c.env) || c.env.all(e, {gpu_env}))",
              "Containers in team namespaces do not set the variables the GPU runtime reads "
              "(NVIDIA_*, AMD_VISIBLE_DEVICES): GPUs come from the scheduler only."),
    ]


def _variables() -> list[dict]:
    templates = (
        "object.kind == 'Service' ? [] : "
        "object.kind == 'Pod' ? [object.spec] : "
        "object.kind == 'CronJob' ? [object.spec.jobTemplate.spec.template.spec] : "
        "variables.volcano ? (has(object.spec.tasks) ? object.spec.tasks.map(t, t.template.spec) : []) : "
        "[object.spec.template.spec]"
    )
    template_metadata = (
        "object.kind in ['Service', 'Pod', 'CronJob'] || variables.volcano ? [] : "
        "[has(object.spec.template.metadata) && has(object.spec.template.metadata.annotations) ? "
        "object.spec.template.metadata.annotations : {}]"
    )
    return [
        {"name": "volcano", "expression": "object.apiVersion.startsWith('batch.volcano.sh/')"},
        {"name": "queues", "expression": "has(params.data) ? params.data : {}"},
        {"name": "templates", "expression": templates},
        {"name": "annotations", "expression": template_metadata},
        {"name": "containers", "expression": "variables.templates.map(s, s.containers + "
                                             "(has(s.initContainers) ? s.initContainers : [])).flatten()"},
    ]


def _resource_rules() -> list[dict]:
    resources = {"": ["pods", "services"], "apps": ["deployments", "replicasets", "statefulsets", "daemonsets"],
                 "batch": ["jobs", "cronjobs"], "batch.volcano.sh": ["jobs"]}
    return [{"apiGroups": [group], "apiVersions": ["*"], "resources": names, "operations": ["CREATE", "UPDATE"]}
            for group, names in resources.items()]


def render_admission() -> list[dict]:
    """The policy and its binding to every team namespace (cluster-wide, reconciled with the
    cluster objects)."""
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
    return [owned(policy), owned(binding)]


def render_admission_params(team, queues: dict[str, str]) -> dict:
    """The team's parameters for the policy: its Volcano and Kueue queue names -> flavor."""
    return owned({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": PARAMS_NAME, "namespace": team.namespace_name},
                  "data": dict(sorted(queues.items()))}, team=team.slug)
