"""The SSO pages and rules that need no IdP: local login switched off (and the superuser's
break-glass path), personal API tokens, IdP group mappings, memberships from the IdP not
editable by hand, "who can do what, and why", and how RoleBindings name people."""

import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.checks import sso_settings
from tenants.manifests import EDITOR_ROLE, VIEWER_ROLE, render_rbac
from tenants.models import Membership
from tenants.models.identities import GroupMapping, OidcIdentity
from tenants.tokens import ApiToken

from ..builders import make_team, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def idp_member(team):
    """Ada, a member of the team through the IdP group ml-vision, who signed in with SSO."""
    ada = make_user("ada")
    OidcIdentity.objects.create(user=ada, issuer="https://idp.example", subject="ada-sub",
                                cluster_username="ada@example.org")
    Membership.objects.create(team=team, user=ada, role=Membership.Role.MEMBER,
                              source=Membership.Source.IDP, via_group="ml-vision")
    return ada


# --- local login, and its break-glass path ---------------------------------------------------

def test_without_an_issuer_the_login_page_has_no_sso_link():
    page = Client().get("/login/").content.decode()
    assert "Sign in with SSO" not in page and 'name="password"' in page
    assert Client().get("/oidc/authenticate/").status_code == 404


def test_with_local_login_off_only_superusers_log_in_with_a_password(settings, owner):
    settings.LOCAL_LOGIN_ENABLED = False
    settings.SSO_ENABLED = True
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw-for-tests-1")
    page = Client().get("/login/").content.decode()
    assert 'name="password"' not in page and "break-glass" in page
    assert 'name="password"' in Client().get("/login/?local=1").content.decode()

    client = Client()
    client.post("/login/", {"username": "olivia", "password": "pw-for-tests-1"})
    assert "_auth_user_id" not in client.session
    client.post("/login/", {"username": "root", "password": "pw-for-tests-1"})
    assert client.session["_auth_user_id"] == str(admin.pk)
    admin_client = Client()
    admin_client.post("/admin/login/", {"username": "root", "password": "pw-for-tests-1"})
    assert admin_client.session["_auth_user_id"] == str(admin.pk)


# --- personal API tokens -------------------------------------------------------------------------

def test_token_is_created_for_one_team_and_its_secret_shown_once(client_for, member, team):
    client = client_for(member)
    response = client.post(reverse("accounts:tokens"), {"name": "ci", "team": team.slug, "scopes": ["read", "submit"],
                                                        "expires_in_days": 30})
    assert response.status_code == 201
    token = ApiToken.objects.get(user=member)
    secret = response.context["secret"]
    assert secret.startswith(token.prefix) and secret in response.content.decode()
    assert (token.team, token.scopes) == (team, ["read", "submit"])
    assert "no-store" in response["Cache-Control"] or "no-cache" in response["Cache-Control"]
    # The token works, for its team.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get(f"/api/v1/teams/{team.slug}").status_code == 200
    # Listed afterwards without the secret.
    page = client.get(reverse("accounts:tokens")).content.decode()
    assert token.prefix in page and secret not in page


def test_token_form_refuses_another_teams_slug_and_keeps_what_was_typed(client_for, member, outsider):
    response = client_for(member).post(reverse("accounts:tokens"), {"name": "my ci", "team": "other-team",
                                                                    "scopes": ["read"], "expires_in_days": 30})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()
    assert 'value="my ci"' in response.content.decode()


def test_token_is_revoked_by_its_owner_only(client_for, member, owner, team):
    token, _ = ApiToken.objects.issue(user=member, name="ci", team=team)
    assert client_for(owner).post(reverse("accounts:token-revoke", args=[token.pk])).status_code == 404
    assert client_for(member).post(reverse("accounts:token-revoke", args=[token.pk])).status_code == 302
    token.refresh_from_db()
    assert token.is_revoked


# --- group mappings -----------------------------------------------------------------------------

def test_quota_managers_map_groups_and_others_cannot(client_for, quota_manager, owner, team):
    url = reverse("accounts:group-mappings")
    assert client_for(owner).get(url).status_code == 403
    client = client_for(quota_manager)
    assert client.post(url, {"group": "ml-vision", "role": "owner", "team": team.pk}).status_code == 302
    assert client.post(url, {"group": "admins", "role": "quota_manager"}).status_code == 302
    response = client.post(url, {"group": "x", "role": "member"})
    assert response.status_code == 400 and "Pick the team" in response.content.decode()
    mapping = GroupMapping.objects.get(group="ml-vision")
    assert mapping.history.get().history_user == quota_manager


def test_group_mappings_api(client_for, quota_manager, member, team):
    client = client_for(quota_manager)
    created = client.post("/api/v1/group-mappings", {"group": "ml-vision", "role": "viewer", "team": team.slug},
                          content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["team"] == team.slug
    duplicate = client.post("/api/v1/group-mappings", {"group": "ml-vision", "role": "owner", "team": team.slug},
                            content_type="application/json")
    assert duplicate.status_code == 400
    assert client_for(member).get("/api/v1/group-mappings").status_code == 403
    assert client.delete(f"/api/v1/group-mappings/{created.json()['id']}").status_code == 204


# --- memberships from the IdP are not edited by hand ---------------------------------------------

def test_owner_cannot_remove_a_member_who_comes_from_an_idp_group(client_for, owner, team, idp_member):
    membership = Membership.objects.get(user=idp_member)
    page = client_for(owner).get(reverse("console:team", args=[team.slug])).content.decode()
    assert "IdP group ml-vision" in page
    assert reverse("console:member-remove", args=[team.slug, membership.pk]) not in page
    client_for(owner).post(reverse("console:member-remove", args=[team.slug, membership.pk]))
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_admin_shows_idp_memberships_read_only(client_for, quota_manager, idp_member):
    membership = Membership.objects.get(user=idp_member)
    client = client_for(quota_manager)
    url = reverse("admin:tenants_membership_change", args=[membership.pk])
    assert client.post(url, {"team": membership.team_id, "user": idp_member.pk, "role": "owner"}).status_code == 403
    assert client.post(reverse("admin:tenants_membership_delete", args=[membership.pk]), {"post": "yes"}).status_code == 403
    membership.refresh_from_db()
    assert membership.role == "member"


# --- who can do what, and why --------------------------------------------------------------------

def test_access_page_and_api_say_who_can_do_what_and_why(client_for, owner, viewer, quota_manager, outsider,
                                                         team, idp_member):
    GroupMapping.objects.create(group="ml-vision", team=team, role="member")
    page = client_for(viewer).get(reverse("accounts:access", args=[team.slug])).content.decode()
    assert "IdP group ml-vision" in page and "hand-made membership" in page and "oidc:ada@example.org" in page
    body = client_for(owner).get(f"/api/v1/teams/{team.slug}/access").json()
    people = {p["username"]: p for p in body["people"]}
    assert people["ada"]["why"] == "IdP group ml-vision" and "submit jobs" in people["ada"]["can"]
    assert people["olivia"]["why"] == "hand-made membership" and "add and remove members" in people["olivia"]["can"]
    assert "submit jobs" not in people["vera"]["can"]
    assert [q["username"] for q in body["quota_managers"]] == ["quinn"]
    assert body["groups"] == [{"group": "ml-vision", "role": "member", "can": people["ada"]["can"]}]
    assert client_for(outsider).get(reverse("accounts:access", args=[team.slug])).status_code == 404
    assert client_for(outsider).get(f"/api/v1/teams/{team.slug}/access").status_code == 404
    assert client_for(quota_manager).get(f"/api/v1/teams/{team.slug}/access").status_code == 200


def test_access_api_with_a_token_of_another_team_sees_nothing(member, team):
    other = make_team("other", members={member: Membership.Role.MEMBER})
    _, secret = ApiToken.objects.issue(user=member, name="ci", team=other)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get(f"/api/v1/teams/{team.slug}/access").status_code == 404
    assert api.get(f"/api/v1/teams/{other.slug}/access").status_code == 200


# --- the same identity on the cluster ------------------------------------------------------------

def subjects(objects, role):
    [binding] = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == role]
    return [(s["kind"], s["name"]) for s in binding["subjects"]]


def test_role_bindings_name_sso_users_by_prefix_and_claim_and_others_by_user_name(team, idp_member, settings):
    settings.CLUSTER_OIDC_USERNAME_PREFIX = "sso#"
    objects = render_rbac(team, list(team.memberships.select_related("user", "user__oidc_identity")))
    assert subjects(objects, EDITOR_ROLE) == [("User", "max"), ("User", "olivia"), ("User", "sso#ada@example.org")]
    assert subjects(objects, VIEWER_ROLE) == [("User", "vera")]


def test_mapped_groups_are_bound_only_when_asked(team, settings):
    groups = [GroupMapping.objects.create(group="ml-vision", team=team, role="owner"),
              GroupMapping.objects.create(group="ml-vision-readers", team=team, role="viewer")]
    memberships = list(team.memberships.select_related("user"))
    assert ("Group", "oidc:ml-vision") not in subjects(render_rbac(team, memberships, groups), EDITOR_ROLE)
    settings.CLUSTER_OIDC_BIND_GROUPS = True
    objects = render_rbac(team, memberships, groups)
    assert ("Group", "oidc:ml-vision") in subjects(objects, EDITOR_ROLE)
    assert subjects(objects, VIEWER_ROLE) == [("User", "vera"), ("Group", "oidc:ml-vision-readers")]


def test_access_api_costs_the_same_queries_for_two_or_twelve_people(client_for, owner, team, idp_member):
    client = client_for(owner)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/api/v1/teams/{team.slug}/access").status_code == 200
        return len(captured)

    few = queries()
    for i in range(10):
        person = make_user(f"p{i}")
        OidcIdentity.objects.create(user=person, issuer="https://idp.example", subject=f"s{i}", cluster_username=f"p{i}@x")
        Membership.objects.create(team=team, user=person, role="member", source="idp", via_group="g")
    assert queries() == few


def test_checks_warn_of_a_plain_http_issuer_and_of_groups_bound_without_sso(settings):
    assert sso_settings(None) == []
    settings.SSO_ENABLED, settings.OIDC_ISSUER, settings.DEBUG = True, "http://idp.example", False
    assert [w.id for w in sso_settings(None)] == ["accounts.W001"]
    settings.SSO_ENABLED, settings.OIDC_ISSUER, settings.CLUSTER_OIDC_BIND_GROUPS = False, "", True
    assert [w.id for w in sso_settings(None)] == ["accounts.W002"]


def _settings_with(**env) -> subprocess.CompletedProcess:
    """Settings are read once per process: load them in a fresh one with these variables."""
    environ = {name: value for name, value in os.environ.items() if not name.startswith(("OIDC_", "LOCAL_LOGIN"))}
    environ.update(DEBUG="true", DJANGO_SETTINGS_MODULE="gpuplatform.settings", **env)
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.SSO_ENABLED, s.LOCAL_LOGIN_ENABLED, s.AUTHENTICATION_BACKENDS[-1], s.SECURE_CSP['form-action'])")
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=False)


def test_settings_turn_sso_on_with_an_issuer_and_refuse_half_configurations():
    off = _settings_with()
    assert off.returncode == 0, off.stderr
    assert off.stdout.split()[:3] == ["False", "True", "accounts.backends.LocalBackend"]
    on = _settings_with(OIDC_ISSUER="https://idp.example/", OIDC_CLIENT_ID="p", OIDC_CLIENT_SECRET="s",
                        LOCAL_LOGIN_ENABLED="false")
    assert on.returncode == 0, on.stderr
    assert on.stdout.split()[:3] == ["True", "False", "accounts.oidc.OidcBackend"]
    assert "https://idp.example" in on.stdout  # the IdP may end a form's redirect (logout)
    half = _settings_with(OIDC_ISSUER="https://idp.example")
    assert half.returncode != 0 and "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are needed" in half.stderr
    locked_out = _settings_with(LOCAL_LOGIN_ENABLED="false")
    assert locked_out.returncode != 0 and "needs OIDC_ISSUER" in locked_out.stderr
