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

- what the kinds of work put there is matched and admitted, and nothing else that makes pods
  (DaemonSets, ReplicationControllers, CronJobs and RayServices are refused). Each kind's
  integrations declare it (`Integration.admits`, `workloads.kinds.admission`): the objects they
  render, the objects their controllers make in turn (a batch Job's Pods, a Deployment's
  ReplicaSet and its Pods, a RayJob's RayCluster, a Volcano Job's Service, a TrainJob's JobSet
  and its Jobs), and the team queue each names; the policy's kinds, owner rules and queue rules
  are built from the registry. A kind held to a queue where rendered that a controller makes
  with none (a JobSet's batch Jobs: their TrainJob waits in the queue) is let off the queue and
  our labels only when that controller controls it;
- workloads carry the platform's labels (what controllers make need not); owner references
  name only what makes the object (a Pod: its Job, Volcano Job, ReplicaSet, RayCluster or
  StatefulSet, as its controller; what the platform renders: none), so a bare Pod or
  ReplicaSet cannot pass for a controller's;
- an object that waits in a queue names one of the team's: Kueue's queue label names a
  LocalQueue (named after its flavor; the team's flavors are listed in the namespace's
  parameters ConfigMap), a Volcano Job's ``spec.queue`` or a Volcano-scheduled Deployment's
  pod annotation one of the team's Volcano queues; notebooks' StatefulSets make no claims;
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
from workloads.kinds import KINDS, integrations
from workloads.kinds.admission import Admitted, Fragments, Queue
from workloads.kueue import QUEUE_LABEL
from workloads.pods import GPU_RUNTIME_ENV_NAMES, GPU_RUNTIME_ENV_PREFIXES
from workloads.trainer import GROUP as TRAINER_GROUP
from workloads.trainer import JOBSET
from workloads.volcano import QUEUE_ANNOTATION

API = "admissionregistration.k8s.io/v1"
POLICY_NAME = "gpuplatform-team-workloads"
PARAMS_NAME = "gpuplatform-admission"  # a ConfigMap in each team namespace: queue -> flavor
# ...and "_placement.<flavor>" -> the flavor's placement, as tokens between '|' (no queue name
# starts with '_', and no label or toleration field holds '|').
PLACEMENT_PREFIX = "_placement."
JOBSET_GROUP = JOBSET[0].rpartition("/")[0]
# What the policy matches beyond what the kinds of work put in team namespaces (each
# integration's `admits`, `workloads.kinds.admission`): the other kinds that make pods, to
# refuse them (no RayService: docs/ray.md), and the pods' ephemeral containers, to check them.
ALSO_MATCHED = {"": ["pods/ephemeralcontainers", "replicationcontrollers"], "apps": ["daemonsets"],
                "batch": ["cronjobs"], "ray.io": ["rayservices"]}
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


def fragments() -> Fragments:
    """What every kind of work puts in team namespaces, from the registry."""
    return Fragments.of(integrations())


def matched_resources() -> dict[str, list[str]]:
    """API group -> the resources the policy matches: what the kinds put there, and ALSO_MATCHED."""
    found = {group: set(names) for group, names in ALSO_MATCHED.items()}
    for group, names in fragments().resources().items():
        found.setdefault(group, set()).update(names)
    return {group: sorted(found[group]) for group in sorted(found)}


def _is(admitted: Admitted, who: str = "o") -> str:
    """Whether ``who`` is of ``admitted``'s kind. The object under review: at any version of its
    group. An owner reference: Kubernetes' own kinds at the version the platform writes, an
    operator's (a group with a dot: a CRD) at any version."""
    any_version = "." in admitted.group or (who == "object" and admitted.group)
    version = (f"{who}.apiVersion.startsWith({_cel(admitted.group + '/')})" if any_version
               else f"{who}.apiVersion == {_cel(admitted.api_version)}")
    return f"({who}.kind == {_cel(admitted.name)} && {version})"


def _any(alternatives: list[str]) -> str:
    return alternatives[0] if len(alternatives) == 1 else "(" + " || ".join(alternatives) + ")"


def _owner_allowed(owners: dict[str, list[Admitted]]) -> str:
    """Each kind a controller makes may be owned by what makes it; the others by nothing."""
    return "".join(f"object.kind == {_cel(kind)} ? {_any([_is(o) for o in made_by])} : "
                   for kind, made_by in owners.items()) + "false"


def _words(items: list[str], last: str = "and") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _runs() -> str:
    """What each kind of work runs in a team namespace, by its label: "Training: a Job or ..."."""
    runs = {kind.label: list(dict.fromkeys(a.words for i in kind.integrations for a in i.admits if a.makes))
            for kind in KINDS}
    return "; ".join(f"{label}: a {_words(words, 'or a')}" for label, words in runs.items() if words)


# How an object names a team queue (`Queue`): the CEL, what the queues are called, and where it names one.
_VOLCANO_PODS = ("variables.templates.all(s, has(s.schedulerName) && s.schedulerName == 'volcano')"
                 " && variables.annotations.all(a, " + _cel(QUEUE_ANNOTATION) + " in a"
                 " && a[" + _cel(QUEUE_ANNOTATION) + "] in variables.queues)")
QUEUES = {
    Queue.KUEUE: (f"({_has_label(QUEUE_LABEL)} && variables.kueueQueue in variables.teamFlavors)",
                  "Kueue queues", f"Kueue's {QUEUE_LABEL} label"),
    Queue.VOLCANO: ("(has(object.spec.queue) && object.spec.queue in variables.queues)",
                    "queues", "Volcano's spec.queue"),
    Queue.VOLCANO_PODS: (f"({_VOLCANO_PODS})", "queues", f"Volcano with {QUEUE_ANNOTATION}"),
}


def _made_free(found: Fragments) -> str:
    """Whether the object is one a controller makes with no queue and none of our labels (a
    JobSet's batch Job), controlled by such a controller ("false" when no kind is)."""
    free = [f"({_is(Admitted(kind), 'object')} && variables.owners.exists(o, has(o.controller) && o.controller && "
            f"{_any([_is(owner) for owner in owners])}))" for kind, owners in found.made_free().items()]
    return _any(free) if free else "false"


def _queue_rules(found: Fragments) -> list[dict]:
    """Each object that waits in a queue names one of the team's, one rule per way of naming it
    (what a controller makes free of a queue aside: its owner waits in one)."""
    rules = []
    free = _made_free(found)
    for queues, objects in found.queues().items():
        called = QUEUES[queues[0]][1] if len(queues) == 1 else "queues"
        freed = f" || {free}" if any(o.kind in found.made_free() for o in objects) else ""
        rules.append(_rule(
            f"!{_any([_is(o, 'object') for o in objects])}{freed} || " + " || ".join(QUEUES[q][0] for q in queues),
            f"A {_words([o.words for o in objects], 'or')} in a team namespace waits in one of the team's own "
            f"{called} ({_words([QUEUES[q][2] for q in queues], 'or')}): {_SUBMIT}."))
    return rules


def _validations() -> list[dict]:
    return [*_workload_rules(), *_pod_rules()]


def _workload_rules() -> list[dict]:
    """What may be written at all: the kinds, their labels and owners, the queues they name,
    and Services that stay inside the cluster."""
    found = fragments()
    ours = f"{_has_label(MANAGED_BY_LABEL)} && object.metadata.labels[{_cel(MANAGED_BY_LABEL)}] == {_cel(MANAGED_BY_VALUE)}"
    owners, controlled = found.owners(), found.controlled()
    makers = list(dict.fromkeys(o.words + "s" for kind in controlled for o in owners[kind]))
    owned = "; ".join(f"a {kind}'s: its {_words([o.words for o in made_by], 'or')}" for kind, made_by in owners.items())
    return [
        _rule(f"variables.volcano || object.kind in {_cel(found.kinds())}",
              f"The platform runs its kinds of work in team namespaces ({_runs()}), and nothing else that makes "
              f"pods (no DaemonSet, ReplicationController, CronJob or RayService): {_SUBMIT}."),
        _rule(f"object.kind in {_cel(found.unlabelled())} || ({ours}) || {_made_free(found)}",
              f"Workloads in team namespaces are the platform's: {_SUBMIT}."),
        _rule(f"!(object.kind in {_cel(controlled)}) || variables.owners.exists(o, has(o.controller) && o.controller)",
              f"{_words([kind + 's' for kind in controlled])} in team namespaces are made by the platform's "
              f"{_words(makers)}: {_SUBMIT}."),
        _rule(f"variables.owners.all(o, {_owner_allowed(owners)})",
              f"Owner references in team namespaces name only what the platform makes ({owned}): {_SUBMIT}."),
        *_queue_rules(found),
        _rule("object.kind != 'StatefulSet' || !has(object.spec.volumeClaimTemplates) || "
              "size(object.spec.volumeClaimTemplates) == 0",
              "A StatefulSet in a team namespace makes no claims of its own (volumeClaimTemplates): it mounts the "
              "team's volumes, which owners create on the team's page."),
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


# Where each kind keeps its pod templates (the pod specs the pod rules read).
_TEMPLATES = (
    "object.kind == 'Service' ? [] : "
    "object.kind == 'Pod' ? [object.spec] : "
    "object.kind == 'CronJob' ? [object.spec.jobTemplate.spec.template.spec] : "
    # A TrainJob holds no pod template (its runtime's JobSet, checked below, does); a
    # JobSet keeps one in each replicated job's Job template.
    "variables.trainer ? [] : "
    "variables.jobset ? object.spec.replicatedJobs.map(r, r.template.spec.template.spec) : "
    "variables.volcano ? (has(object.spec.tasks) ? object.spec.tasks.map(t, t.template.spec) : []) : "
    "variables.ray ? variables.rayGroups.map(g, g.template.spec) : "
    "[object.spec.template.spec]"
)


def _variables() -> list[dict]:
    # A RayJob's cluster spec (none when it names an existing cluster) or a RayCluster's spec:
    # its head group and worker groups, each with a pod template.
    ray_groups = (
        "!variables.ray ? [] : "
        "(object.kind == 'RayJob' ? (has(object.spec.rayClusterSpec) ? [object.spec.rayClusterSpec] : []) : "
        "[object.spec]).map(c, (has(c.headGroupSpec) ? [c.headGroupSpec] : []) + "
        "(has(c.workerGroupSpecs) ? c.workerGroupSpecs : [])).flatten()"
    )
    template_metadata = (
        "object.kind in ['Service', 'Pod', 'CronJob'] || variables.volcano || variables.ray || variables.trainer ? [] : "
        "variables.jobset ? object.spec.replicatedJobs.map(r, has(r.template.spec.template.metadata) && "
        "has(r.template.spec.template.metadata.annotations) ? r.template.spec.template.metadata.annotations : {}) : "
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
        {"name": "trainer", "expression": f"object.apiVersion.startsWith({_cel(TRAINER_GROUP + '/')})"},
        {"name": "jobset", "expression": f"object.apiVersion.startsWith({_cel(JOBSET_GROUP + '/')})"},
        {"name": "rayGroups", "expression": ray_groups},
        {"name": "data", "expression": "has(params.data) ? params.data : {}"},
        {"name": "queues", "expression": "variables.data.filter(k, !k.startsWith('_'))"},
        {"name": "teamFlavors", "expression": "variables.queues.map(q, variables.data[q])"},
        {"name": "owners", "expression": "has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []"},
        {"name": "templates", "expression": _TEMPLATES},
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
            for group, names in matched_resources().items()]


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
