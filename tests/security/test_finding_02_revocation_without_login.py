"""Issue 29, finding 2: revocation waited for a login. Someone removed from a group at the
IdP kept their session, API tokens and cluster RoleBinding until they signed in again.
Now what the IdP gave (memberships, the quota-manager role) lasts OIDC_MEMBERSHIP_TTL_HOURS
after the last sign-in; the beat task ``tenants.tasks.expire_idp_access`` (every minute)
ends it, revokes the tokens narrowed to those teams, and the teams' RoleBindings follow
after commit: on the fake cluster here, on the local cluster in
tests/live/security/test_finding_02_revocation_without_login.py."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from gpuplatform.celery import app
from tenants import tasks as team_tasks
from tenants.manifests import EDITOR_ROLE
from tenants.models import ApiToken, Membership
from tenants.models.identities import OidcIdentity
from tenants.roles import QUOTA_MANAGER_GROUP, ensure_quota_manager_group, is_quota_manager
from tenants.tasks import expire_idp_access

from ..builders import make_team, make_user


def sso_user(name: str, *, signed_in_hours_ago: float):
    user = make_user(name)
    OidcIdentity.objects.create(user=user, issuer="https://idp.example", subject=f"{name}-sub",
                                cluster_username=f"{name}@example.org",
                                last_login_at=timezone.now() - timedelta(hours=signed_in_hours_ago))
    return user


def idp_member(team, user, role=Membership.Role.MEMBER):
    return Membership.objects.create(team=team, user=user, role=role, source=Membership.Source.IDP,
                                     via_group=f"ml-{team.slug}")


def editors(cluster, team) -> list[str]:
    [binding] = [o for o in cluster.stored(kind="RoleBinding")
                 if o["metadata"]["name"] == EDITOR_ROLE and o["metadata"]["namespace"] == team.namespace_name]
    return [subject["name"] for subject in binding["subjects"]]


@pytest.fixture
def reconciles_now(monkeypatch):
    """A reconcile asked for after commit runs at once, in this process."""
    monkeypatch.setattr(team_tasks.reconcile_team, "delay", lambda pk: team_tasks.reconcile_team.apply(args=(pk,)))


STALE = settings.OIDC_MEMBERSHIP_TTL_HOURS + 1


@pytest.mark.django_db
def test_finding_02_an_idp_membership_not_renewed_in_time_ends_and_leaves_the_rolebinding(
        fake, reconciles_now, django_capture_on_commit_callbacks):
    team = make_team("vision")
    gone, fresh = sso_user("ada", signed_in_hours_ago=STALE), sso_user("bob", signed_in_hours_ago=1)
    hand_made = make_user("carl")
    with django_capture_on_commit_callbacks(execute=True):
        idp_member(team, gone)
        idp_member(team, fresh)
        Membership.objects.create(team=team, user=hand_made, role=Membership.Role.OWNER)
    assert editors(fake, team) == ["carl", "oidc:ada@example.org", "oidc:bob@example.org"]
    with django_capture_on_commit_callbacks(execute=True):
        assert expire_idp_access() == 1
    assert sorted(team.memberships.values_list("user__username", flat=True)) == ["bob", "carl"]
    assert editors(fake, team) == ["carl", "oidc:bob@example.org"]
    last = Membership.history.filter(user=gone).order_by("-history_id").first()
    assert last.history_type == "-" and "not renewed by an SSO sign-in within" in last.history_change_reason


@pytest.mark.django_db
def test_finding_02_a_session_loses_the_team_at_once_and_a_team_token_is_revoked(client, fake, reconciles_now):
    team = make_team("vision")
    ada = sso_user("ada", signed_in_hours_ago=STALE)
    idp_member(team, ada)
    narrowed, _ = ApiToken.objects.issue(user=ada, name="ci", team=team)
    _, secret = ApiToken.objects.issue(user=ada, name="all teams")
    client.force_login(ada)
    assert client.get(reverse("console:team", args=[team.slug])).status_code == 200
    api = f"/api/v1/teams/{team.slug}"
    assert client.get(api, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    expire_idp_access()
    assert client.get(reverse("console:team", args=[team.slug])).status_code == 404  # read per request
    assert client.get(api, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 404
    narrowed.refresh_from_db()
    assert narrowed.is_revoked


@pytest.mark.django_db
def test_finding_02_the_idps_quota_manager_role_ends_too_but_not_one_given_by_hand():
    managers = ensure_quota_manager_group()
    by_idp, by_hand = sso_user("ada", signed_in_hours_ago=STALE), sso_user("bob", signed_in_hours_ago=STALE)
    for user in (by_idp, by_hand):
        user.groups.add(managers)
    OidcIdentity.objects.filter(user=by_idp).update(quota_manager_via_idp=True)
    expire_idp_access()
    assert not is_quota_manager(type(by_idp).objects.get(pk=by_idp.pk))
    assert is_quota_manager(type(by_hand).objects.get(pk=by_hand.pk))
    assert Group.objects.get(name=QUOTA_MANAGER_GROUP).user_set.get() == by_hand


@pytest.mark.django_db
def test_finding_02_a_sign_in_within_the_window_keeps_everything():
    team = make_team("vision")
    ada = sso_user("ada", signed_in_hours_ago=settings.OIDC_MEMBERSHIP_TTL_HOURS - 1)
    idp_member(team, ada)
    assert expire_idp_access() == 0
    assert team.memberships.filter(user=ada).exists()


def test_finding_02_the_expiry_runs_every_minute_from_beat():
    [entry] = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "tenants.tasks.expire_idp_access"]
    assert entry["schedule"] <= 60 and entry["task"] in app.tasks


