"""Issue 29, finding 2 (revocation waited for a login), on the local cluster: the expiry of
what the IdP gave takes the person out of the teams' RoleBindings. The finding, its fix and
the fake cluster's side: tests/security/test_finding_02_revocation_without_login.py."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from tenants import tasks as team_tasks
from tenants.manifests import EDITOR_ROLE
from tenants.models import Membership
from tenants.models.identities import OidcIdentity
from tenants.tasks import expire_idp_access, sync_team

from ...builders import make_team, make_user
from ...security.test_finding_02_revocation_without_login import STALE, idp_member, sso_user


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_finding_02_live_an_expired_idp_member_leaves_the_teams_rolebinding_on_the_cluster(live, monkeypatch):
    """On the local cluster: the task, then the reconcile it causes (run here as the worker
    would), and the RoleBinding's subject is gone."""
    monkeypatch.setattr(team_tasks.reconcile_team, "delay", lambda pk: team_tasks.reconcile_team.apply(args=(pk,)))
    slug = f"it-{uuid.uuid4().hex[:6]}"
    team = make_team(slug)
    ada = sso_user(f"ada-{slug}", signed_in_hours_ago=1)
    owner = make_user(f"owner-{slug}")
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    idp_member(team, ada)
    sync_team(live, team)
    subject = f"oidc:ada-{slug}@example.org"
    try:
        binding = live.get("rbac.authorization.k8s.io/v1", "RoleBinding", EDITOR_ROLE, team.namespace_name)
        assert subject in [s["name"] for s in binding["subjects"]]
        OidcIdentity.objects.filter(user=ada).update(last_login_at=timezone.now() - timedelta(hours=STALE))
        assert expire_idp_access() == 1
        binding = live.get("rbac.authorization.k8s.io/v1", "RoleBinding", EDITOR_ROLE, team.namespace_name)
        assert [s["name"] for s in binding["subjects"]] == [f"owner-{slug}"]
    finally:
        team.start_offboarding(owner)
        team_tasks.offboard(live, team)
