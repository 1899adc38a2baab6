"""Render a team's namespace and what the team itself needs in it. Pure: models in, dicts out.

Namespace (Pod Security Admission), LimitRange, the workload ServiceAccount, Roles and
RoleBindings for members and for the web's own identity, NetworkPolicies. The team's
ResourceQuota and queues come from
its quotas (``quotas.manifests``).
"""

from django.conf import settings

from core.ownership import WORKLOAD_SERVICE_ACCOUNT, owned
from workloads.pods import EPHEMERAL_STORAGE, EPHEMERAL_STORAGE_LIMIT, EPHEMERAL_STORAGE_REQUEST

from .models import Membership, SystemNamespace, Team
from .models.identities import GroupMapping, cluster_user_name

# Kinds inside a team's namespace that the team's own reconcile keeps (the Namespace
# itself is never pruned by a team reconcile, only by offboarding; the ResourceQuota and the
# queues are the team's quotas, kept by `quotas.tasks`).
TEAM_KINDS = [
    ("v1", "LimitRange"), ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
]
EDITOR_ROLE = "gpuplatform-workload-editor"
VIEWER_ROLE = "gpuplatform-workload-viewer"
WEB_READER_ROLE = "gpuplatform-web-reader"
# What the web reads in a team namespace, as its own identity (WEB_SERVICE_ACCOUNT, the
# chart's web ServiceAccount): a job's pods and their logs (jobs.watch.logs, the jobs API) and an
# inference server's Deployment (its replicas). Nothing else, and only in team namespaces.
WEB_TEAM_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
]

# What people may do with kubectl in their own namespace. Workloads are written only by the
# platform, so they go through the queues and get the hardened pod template; people read
# everything, follow logs and port-forward to their servers, which the platform cannot do
# for them. Editors (owners, members) and viewers differ only in port-forwarding.
_WORKLOAD_RESOURCES = [
    ("", ["pods", "pods/log", "services", "configmaps", "events", "persistentvolumeclaims"]),
    ("apps", ["deployments", "replicasets"]),
    ("batch", ["jobs"]),
    ("autoscaling", ["horizontalpodautoscalers"]),
    ("batch.volcano.sh", ["jobs"]),
    ("scheduling.volcano.sh", ["podgroups"]),
    ("kueue.x-k8s.io", ["workloads", "localqueues"]),
    ("trainer.kubeflow.org", ["trainjobs"]),
    ("jobset.x-k8s.io", ["jobsets"]),
]
_READ = ["get", "list", "watch"]


def _rules(write: bool) -> list[dict]:
    rules = [{"apiGroups": [group], "resources": list(resources), "verbs": list(_READ)}
             for group, resources in _WORKLOAD_RESOURCES]
    if write:
        rules.append({"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["create"]})
    return rules


def render_namespace(team: Team) -> dict:
    if team.owns_system_namespace:
        raise SystemNamespace(team.namespace_name)
    level = settings.POD_SECURITY_LEVEL
    labels = {f"pod-security.kubernetes.io/{mode}": level for mode in ("enforce", "audit", "warn")}
    labels["pod-security.kubernetes.io/enforce-version"] = "latest"
    return owned({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": team.namespace_name, "labels": labels}}, team=team.slug)


def render_limit_range(team: Team) -> dict:
    # Pods that state no requests still get admitted by the ResourceQuota. No default CPU
    # limit: it would also land on workers that request more CPU than it, and a request
    # above its limit is invalid. Local disk: the numbers every pod template we render states
    # (`workloads.pods`), for the containers others add (a runtime's initializers).
    return owned({"apiVersion": "v1", "kind": "LimitRange",
                  "metadata": {"name": "defaults", "namespace": team.namespace_name},
                  "spec": {"limits": [{"type": "Container",
                                       "defaultRequest": {"cpu": "100m", "memory": "256Mi",
                                                          EPHEMERAL_STORAGE: EPHEMERAL_STORAGE_REQUEST},
                                       "default": {"memory": "1Gi", EPHEMERAL_STORAGE: EPHEMERAL_STORAGE_LIMIT}}]}},
                 team=team.slug)


def render_service_account(team: Team) -> dict:
    return owned({"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": WORKLOAD_SERVICE_ACCOUNT, "namespace": team.namespace_name},
                  "automountServiceAccountToken": False}, team=team.slug)


def render_rbac(team: Team, memberships: list[Membership], groups: list[GroupMapping] = ()) -> list[dict]:
    """People by the name the cluster knows them by (``cluster_user_name``: the OIDC
    authenticator's prefix + claim after an SSO login); ``groups`` are IdP groups mapped to
    the team, bound as Group subjects when CLUSTER_OIDC_BIND_GROUPS is on."""
    namespace = team.namespace_name
    objects = []
    for role, write, roles in (
        (EDITOR_ROLE, True, (Membership.Role.OWNER, Membership.Role.MEMBER)),
        (VIEWER_ROLE, False, (Membership.Role.VIEWER,)),
    ):
        objects.append(owned({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                              "metadata": {"name": role, "namespace": namespace},
                              "rules": _rules(write)}, team=team.slug))
        # A deactivated account loses its access to the cluster with its login.
        users = sorted(cluster_user_name(m.user) for m in memberships if m.role in roles and m.user.is_active)
        subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u} for u in users]
        if settings.CLUSTER_OIDC_BIND_GROUPS:
            subjects += [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": f"{settings.CLUSTER_OIDC_GROUPS_PREFIX}{g}"}
                         for g in sorted({g.group for g in groups if g.role in roles})]
        objects.append(owned({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subjects,
        }, team=team.slug))
    return objects


def render_web_reader(team: Team) -> list[dict]:
    """The web's read access to this namespace (``WEB_TEAM_RULES``), bound to the web's own
    ServiceAccount in the platform's namespace; none when WEB_SERVICE_ACCOUNT is not set
    (the web then talks to the cluster as the rest of the platform does)."""
    if not settings.WEB_SERVICE_ACCOUNT:
        return []
    meta = {"name": WEB_READER_ROLE, "namespace": team.namespace_name}
    return [
        owned({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(meta),
               "rules": WEB_TEAM_RULES}, team=team.slug),
        owned({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(meta),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": WEB_READER_ROLE},
               "subjects": [{"kind": "ServiceAccount", "name": settings.WEB_SERVICE_ACCOUNT,
                             "namespace": settings.PLATFORM_NAMESPACE}]}, team=team.slug),
    ]


def render_network_policies(team: Team) -> list[dict]:
    namespace = team.namespace_name

    def policy(name: str, ingress: list) -> dict:
        return owned({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                      "metadata": {"name": name, "namespace": namespace},
                      "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": ingress}},
                     team=team.slug)

    by_name = "kubernetes.io/metadata.name"
    return [
        policy("default-deny-ingress", []),
        policy("allow-same-namespace", [{"from": [{"podSelector": {}}]}]),
        policy("allow-from-platform", [{"from": [
            {"namespaceSelector": {"matchLabels": {by_name: settings.PLATFORM_NAMESPACE}}}
        ]}]),
    ]


def render_team(team: Team, memberships: list[Membership], groups: list[GroupMapping] = ()) -> list[dict]:
    """The team's namespace and what lives in it for the team itself, namespace first.
    Raises ``SystemNamespace`` rather than render into a namespace of the cluster's."""
    if team.owns_system_namespace:
        raise SystemNamespace(team.namespace_name)
    return [
        render_namespace(team),
        render_limit_range(team),
        render_service_account(team),
        *render_rbac(team, memberships, groups),
        *render_web_reader(team),
        *render_network_policies(team),
    ]
