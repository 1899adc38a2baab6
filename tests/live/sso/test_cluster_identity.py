"""The same identity on the cluster: the local kube-apiserver trusts the local IdP (structured
authentication configuration, the file cluster.sh passes with --authentication-config,
which the apiserver reloads when it changes), and a member's ID token from the IdP lists
pods in their team's namespace and not in another team's.

The platform side is the real one: the member signs in here with SSO, their IdP group
makes them a member, and the team's reconcile binds them as the cluster's authenticator
names them (``CLUSTER_OIDC_USERNAME_PREFIX`` + the ``CLUSTER_OIDC_USERNAME_CLAIM`` claim)."""

import os
import uuid
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.test import Client
from kubernetes import client
from kubernetes.client.rest import ApiException

from tenants.models import Membership, Team
from tenants.models.identities import GroupMapping
from tenants.tasks import offboard, sync_team

from ...support.cluster import wait_until
from ...support.sso import CALLBACK, claims, sign_in, use_sso

pytestmark = [pytest.mark.cluster, pytest.mark.idp, pytest.mark.django_db(transaction=True)]
# The cluster's own OAuth2 client at the IdP: ID tokens for kubectl carry it as audience.
AUDIENCE, AUDIENCE_SECRET = "gpuplatform-local-kubernetes", "local-kubernetes-secret"
RELOAD_SECONDS = 120  # a write is seen at once; the apiserver also re-reads the file every minute


def apiserver_command_line(kubeconfig: str) -> str:
    pid = (Path(kubeconfig).parent / "pids" / "kube-apiserver.pid").read_text().strip()
    return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")


def authentication_config(hydra) -> dict:
    """What an operator writes for the cluster to trust the platform's IdP (docs/sso.md)."""
    return {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
        "jwt": [{
            "issuer": {"url": hydra.issuer, "audiences": [AUDIENCE],
                       "certificateAuthority": Path(hydra.ca_bundle).read_text()},
            "claimMappings": {
                "username": {"claim": settings.CLUSTER_OIDC_USERNAME_CLAIM,
                             "prefix": settings.CLUSTER_OIDC_USERNAME_PREFIX},
                "groups": {"claim": settings.OIDC_GROUPS_CLAIM, "prefix": settings.CLUSTER_OIDC_GROUPS_PREFIX},
            },
        }],
    }


@pytest.fixture
def cluster_trusts_the_idp(kube_cluster, hydra):
    if "--authentication-config" not in apiserver_command_line(kube_cluster):
        pytest.skip("this kube-apiserver was started before cluster.sh passed --authentication-config; "
                    "restart it once: deploy/local-cluster/cluster.sh restart-apiserver")
    path = Path(kube_cluster).parent / "authentication-config.yaml"
    wanted = yaml.safe_dump(authentication_config(hydra), sort_keys=True)
    if not path.exists() or path.read_text() != wanted:
        # Whole or not at all: an in-place write can be read half-written (the apiserver
        # then waits for the next change); a rename is watched too and reloads at once.
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        partial.write_text(wanted)
        os.replace(partial, path)
    return hydra.ensure_client(AUDIENCE, AUDIENCE_SECRET, [CALLBACK])


@pytest.fixture
def two_teams(live, settings, hydra, rp_client):
    use_sso(settings, hydra, rp_client)
    slug = uuid.uuid4().hex[:6]
    mine, theirs = (Team.objects.create(slug=f"sso-{name}-{slug}", display_name=name) for name in ("mine", "theirs"))
    GroupMapping.objects.create(group=f"researchers-{slug}", team=mine, role=Membership.Role.MEMBER)
    for team in (mine, theirs):
        sync_team(live, team)
    yield mine, theirs, slug
    for team in (mine, theirs):
        team.refresh_from_db()
        offboard(live, team)


def as_bearer(kube_config, token: str):
    configuration = client.Configuration()
    configuration.host, configuration.ssl_ca_cert = kube_config.host, kube_config.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


def test_a_members_id_token_lists_pods_in_their_team_only(cluster_trusts_the_idp, two_teams, hydra, live,
                                                          kube_config, reconciles):
    mine, theirs, slug = two_teams
    subject, group = f"ada-{slug}", f"researchers-{slug}"
    who = dict(email=f"ada-{slug}@example.org", username=f"ada-{slug}")
    # 1. Ada signs in to the platform; her IdP group makes her a member of her team, and
    #    the team's RoleBinding names her as the cluster will.
    assert sign_in(Client(), hydra, subject=subject, groups=[group], **who).status_code == 302
    assert Membership.objects.get(team=mine, user__username=who["username"]).via_group == group
    sync_team(live, mine)
    # 2. Her ID token for the cluster's audience, from the same IdP, as kubectl would use it.
    token = hydra.id_token(cluster_trusts_the_idp, CALLBACK, subject, claims([group], **who))
    api = as_bearer(kube_config, token)
    review = wait_until(lambda: client.AuthenticationV1Api(api).create_self_subject_review(
        client.V1SelfSubjectReview()), timeout=RELOAD_SECONDS, message="the apiserver to accept the IdP's tokens")
    assert review.status.user_info.username == f"oidc:{who['email']}"
    assert f"oidc:{group}" in review.status.user_info.groups
    # 3. Her team's pods: yes. Another team's: no.
    pods = client.CoreV1Api(api)
    assert pods.list_namespaced_pod(mine.namespace_name).items == []
    with pytest.raises(ApiException) as refused:
        pods.list_namespaced_pod(theirs.namespace_name)
    assert refused.value.status == 403
