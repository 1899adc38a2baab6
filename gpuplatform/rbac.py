"""What the platform's own ServiceAccount may do on the cluster, derived from the code.

The Helm chart's ClusterRole (deploy/helm/gpuplatform/templates/rbac.yaml) spells these
rules out; tests/live/install/test_chart.py renders the chart and compares, so a renderer that
starts producing a new kind fails the tests until the chart grants it. `python manage.py
platform_rbac` prints them.

Where each right comes from:
- every kind a reconciled owner applies and prunes (`gpuplatform.owners.OWNERS`: cluster
  objects, team objects, team quotas, job workloads): get, list, create, patch, delete.
  Server-side apply is a PATCH, and one that creates the object also needs `create`; prune
  lists by label and deletes;
- the same kinds again for the worker's watch cache (`cluster.cache`), which holds every
  kind a reconcile reads: list and watch (`WatchCache.VERBS`). Without `watch` it can only
  LIST per reconcile, and says so once per kind (tests/live/install/test_chart_live.py runs the
  whole platform as the chart's identity and counts every 403);
- every kind the status watcher follows: list, watch;
- what the cluster sync reads and never writes (`quotas.tasks.READS`): the Kubeflow Trainer
  ClusterTrainingRuntimes, get and list, to record which runtimes are installed;
- pods: their logs for the job pages (get pods/log); nodes: list, for the capacity page;
- Kueue's visibility API: get the pending workloads of a ClusterQueue, for queue
  positions in Kueue's own order (`jobs.outlook.pending`);
- idle-GPU reclaim (`jobs.use.reclaim.RIGHTS`): patch a Kueue Workload's `spec.active` (found
  by a LIST of the namespace's), create a Volcano `bus.volcano.sh` Command;
- the rights granted by the team Roles the platform writes (`tenants.manifests`): the
  API server lets a Role or RoleBinding be written only by someone who holds its rights
  (or has `escalate`/`bind` on it). Holding them is the narrower choice: `escalate` and
  `bind` on the team roles' names would let the platform write any rules into a Role of
  that name, Secrets included, in any namespace, and bind it to itself.

Nothing here reads Secrets, writes nodes, or uses a wildcard, and nothing touches admission
policies: Kubernetes runs no admission policy on their writes and RBAC cannot limit `create`
by name, so the team-workloads policy is the installer's (`tenants.admission`). The watcher's Lease is not
cluster-wide: a Role in the platform's namespace (`LEASE_RULES`).

The web pods are internet-facing and have an identity of their own (the chart's web
ServiceAccount, WEB_SERVICE_ACCOUNT), holding only what the web reads, from what its pages
and API call through `cluster/`:
- in each team namespace, through a Role the platform writes there (`tenants.manifests.
  WEB_TEAM_RULES`): a job's pods and their logs (`jobs.watch.logs`, the jobs API's logs) and an
  inference server's Deployment (its replicas);
- cluster-wide (`WEB_CLUSTER_RULES`): nodes, listed by the capacity page, Kueue's
  pending workloads of a ClusterQueue (`jobs.outlook.pending`, queue positions), ClusterQueues,
  listed for their fair-sharing status (`quotas.fairshare`, the team and capacity pages),
  and the team admission policy and its binding, by name, which /readyz compares with this
  version's (`team_policy`; the chart installs them, `tenants.admission`);
- its own namespace's Namespace object (`web_namespace_rules`), which /readyz reads to say
  the cluster answers.
No ConfigMaps, no Secrets, no port-forward, no writes, nothing outside team namespaces but
those reads. (The platform's identity holds `create pods/portforward` only to write the
team editor Role; the chart's admission policy refuses it every CONNECT.)
"""

from __future__ import annotations

from collections import defaultdict

from cluster.cache import WatchCache
from core.owners import registered
from jobs.outlook.pending import VISIBILITY_GROUP
from jobs.use.reclaim import RIGHTS as RECLAIM_RIGHTS
from jobs.watch.watcher import WATCHED
from quotas.tasks import READS as CLUSTER_SYNC_READS
from tenants.admission import API as ADMISSION_API
from tenants.admission import POLICY_NAME
from tenants.manifests import WEB_TEAM_RULES
from tenants.manifests import _rules as team_role_rules

ADMISSION_GROUP = ADMISSION_API.rpartition("/")[0]
APPLY = {"get", "list", "create", "patch", "delete"}
CACHED = set(WatchCache.VERBS)
WATCH = {"list", "watch"}
VERB_ORDER = ["get", "list", "watch", "create", "update", "patch", "delete"]

# The Lease of the watcher's leader election, in the platform's own namespace. `create`
# cannot be limited to a name (the name is in the body); get and update can.
LEASE_NAME = "gpuplatform-watcher"
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE_NAME],
     "verbs": ["get", "update"]},
]

# The web's identity, cluster-wide (read only).
WEB_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
    {"apiGroups": [VISIBILITY_GROUP], "resources": ["clusterqueues/pendingworkloads"], "verbs": ["get"]},
    {"apiGroups": [ADMISSION_GROUP], "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
     "resourceNames": [POLICY_NAME], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["list"]},
]


def web_namespace_rules(namespace: str) -> list[dict]:
    """The web's identity in the platform's namespace: that Namespace object, read by /readyz."""
    return [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": [namespace], "verbs": ["get"]}]


def resource(kind: str) -> str:
    """The plural resource name of a kind, as the API server spells the ones we use."""
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    if lower.endswith("s"):
        return lower + "es"
    return lower + "s"


def group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def required() -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, over everything the platform does cluster-wide."""
    needs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for owner in registered():
        for api_version, kind in (*owner.kinds, *owner.also_applies):
            needs[(group(api_version), resource(kind))] |= APPLY | CACHED
    for (api_version, kind), _selector in WATCHED:
        needs[(group(api_version), resource(kind))] |= WATCH
    needs[("", "pods/log")] |= {"get"}
    needs[("", "nodes")] |= {"list"}
    needs[(VISIBILITY_GROUP, "clusterqueues/pendingworkloads")] |= {"get"}
    for key, verbs in RECLAIM_RIGHTS.items():
        needs[key] |= verbs
    for (api_version, kind), verbs in CLUSTER_SYNC_READS.items():
        needs[(group(api_version), resource(kind))] |= verbs
    for write in (True, False):
        for rule in [*team_role_rules(write), *WEB_TEAM_RULES]:
            for api_group in rule["apiGroups"]:
                for name in rule["resources"]:
                    needs[(api_group, name)] |= set(rule["verbs"])
    return dict(needs)


def cluster_role_rules() -> list[dict]:
    """`required()` as ClusterRole rules: one rule per API group and verb set, sorted."""
    by_verbs: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
    for (api_group, name), verbs in required().items():
        by_verbs[(api_group, tuple(v for v in VERB_ORDER if v in verbs))].append(name)
    return [{"apiGroups": [api_group], "resources": sorted(names), "verbs": list(verbs)}
            for (api_group, verbs), names in sorted(by_verbs.items())]


def flatten(rules: list[dict]) -> dict[tuple[str, str], set[str]]:
    """Rules (as a chart renders them) back to (apiGroup, resource) -> verbs, to compare."""
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rule in rules:
        for api_group in rule.get("apiGroups", []):
            for name in rule.get("resources", []):
                out[(api_group, name)] |= set(rule.get("verbs", []))
    return dict(out)
