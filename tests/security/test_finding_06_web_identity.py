"""Finding 6 (issue 29): the internet-facing web pods mounted the worker's ServiceAccount, which
may port-forward to any pod in any namespace and read ConfigMaps, pods and logs cluster-wide;
the chart's write-confining admission policy did not cover port-forward, and the identity
could install a new admission policy that would deny writes cluster-wide.

Now the web has its own ServiceAccount holding only what its pages and API read through
`cluster/` (gpuplatform/rbac.py): pods, logs and Deployments of team namespaces (a Role the
platform writes into each, tenants.manifests.WEB_TEAM_RULES), nodes and Kueue's pending
workloads cluster-wide, its own Namespace object for /readyz. The platform's identity keeps
`create pods/portforward` (it writes the team editor Role, which grants it), but the chart's
no-connect policy refuses it, and the web, every CONNECT; the confining policy covers every
write it may make (the watcher's Lease included). It holds no right on admission policies or
their bindings at all (Kubernetes runs no admission policy on their writes, and RBAC cannot
limit `create` by name): the chart installs the team-workloads policy with the installer's
rights (templates/team-workloads.yaml, from tenants/admission.py).

Here a team namespace's web reader Role, rendered by the platform. Rendered by real Helm, then
live on the local cluster as the chart's identities: tests/live/security/test_finding_06_web_identity.py."""

import pytest

from tenants.manifests import WEB_READER_ROLE, WEB_TEAM_RULES, render_web_reader

from ..builders import make_team


@pytest.mark.django_db
def test_finding_06_each_team_namespace_lets_the_web_read_its_pods_and_nothing_else(settings):
    team = make_team("webread")
    settings.WEB_SERVICE_ACCOUNT, settings.PLATFORM_NAMESPACE = "gp-gpuplatform-web", "gpuplatform-system"
    role, binding = render_web_reader(team)
    assert role["metadata"] == {**role["metadata"], "name": WEB_READER_ROLE, "namespace": team.namespace_name}
    assert role["rules"] == WEB_TEAM_RULES
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gp-gpuplatform-web",
                                    "namespace": "gpuplatform-system"}]
    settings.WEB_SERVICE_ACCOUNT = ""
    assert render_web_reader(team) == []


