"""SSO login against the real IdP (Ory Hydra): the code flow with PKCE, accounts made and
updated from claims, memberships following IdP groups at each login, RP-initiated logout."""

from urllib.parse import parse_qs, urlparse

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tenants.manifests import EDITOR_ROLE, VIEWER_ROLE
from tenants.models import Membership
from tenants.models.identities import OidcIdentity
from tenants.roles import QUOTA_MANAGER_GROUP, is_quota_manager
from tenants.tasks import reconcile_team

from ...builders import make_team, make_user
from ...support.sso import LOGIN_PAGE, claims, sign_in, signed_in_user, start

pytestmark = [pytest.mark.idp, pytest.mark.django_db]


def test_authorization_request_uses_pkce_state_and_nonce(sso):
    client = Client()
    query = parse_qs(urlparse(start(client)).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    [(state, pending)] = client.session["oidc_states"].items()
    assert query["state"] == [state] and query["nonce"] == [pending["nonce"]]
    assert query["scope"] == ["openid email profile"]


def test_first_sso_login_creates_the_account_from_the_claims(sso):
    client = Client()
    response = sign_in(client, sso, groups=[])
    assert response.status_code == 302 and response["Location"] == "/"
    user = signed_in_user(client)
    assert (user.username, user.email, user.first_name) == ("ada", "ada@example.org", "Ada Lovelace")
    assert not user.has_usable_password()
    identity = user.oidc_identity
    assert (identity.issuer, identity.subject, identity.cluster_username) == (sso.issuer, "ada-sub", "ada@example.org")
    assert client.get("/").status_code == 200


def test_next_login_updates_the_account_and_finds_it_by_subject_not_by_name(sso):
    sign_in(Client(), sso)
    client = Client()
    sign_in(client, sso, email="ada@lovelace.example", name="Augusta Ada King", username="countess")
    user = signed_in_user(client)
    assert (user.username, user.email, user.first_name) == ("ada", "ada@lovelace.example", "Augusta Ada King")
    assert OidcIdentity.objects.get().cluster_username == "ada@lovelace.example"


def test_a_local_account_with_the_same_email_is_linked_once(sso):
    local = make_user("alovelace")
    local.email = "ada@example.org"
    local.save()
    client = Client()
    sign_in(client, sso)
    assert signed_in_user(client) == local
    assert local.oidc_identity.subject == "ada-sub"


def test_a_taken_user_name_gives_the_new_account_a_free_one(sso):
    someone = make_user("ada")  # someone else, another address
    client = Client()
    response = sign_in(client, sso)
    assert response.status_code == 302
    user = signed_in_user(client)
    assert user != someone and user.username == "ada-2"


def test_memberships_follow_idp_groups_at_each_login(sso, mapped, reconciles, django_capture_on_commit_callbacks):
    vision, nlp = mapped
    hand_made = make_team("robotics")
    client = Client()

    with django_capture_on_commit_callbacks(execute=True):
        sign_in(client, sso, groups=["ml-vision-readers", "ml-nlp", "unrelated"])
    user = signed_in_user(client)
    Membership.objects.create(team=hand_made, user=user, role=Membership.Role.MEMBER)
    roles = {m.team.slug: (m.role, m.source, m.via_group) for m in user.memberships.select_related("team")}
    assert roles == {"vision": ("viewer", "idp", "ml-vision-readers"), "nlp": ("member", "idp", "ml-nlp"),
                     "robotics": ("member", "manual", "")}
    assert set(reconciles) >= {vision.pk, nlp.pk}
    assert not is_quota_manager(user)

    # At the IdP: joined ml-vision (owner beats viewer) and platform-admins, left ml-nlp.
    reconciles.clear()
    with django_capture_on_commit_callbacks(execute=True):
        sign_in(Client(), sso, groups=["ml-vision", "ml-vision-readers", "platform-admins"])
    user.refresh_from_db()
    roles = {m.team.slug: (m.role, m.source, m.via_group) for m in user.memberships.select_related("team")}
    assert roles == {"vision": ("owner", "idp", "ml-vision"), "robotics": ("member", "manual", "")}
    assert set(reconciles) == {vision.pk, nlp.pk}
    assert is_quota_manager(type(user).objects.get(pk=user.pk))

    # At the IdP: in no group any more. The hand-made membership stays.
    with django_capture_on_commit_callbacks(execute=True):
        sign_in(Client(), sso, groups=[])
    user = type(user).objects.get(pk=user.pk)
    assert [(m.team.slug, m.source) for m in user.memberships.select_related("team")] == [("robotics", "manual")]
    assert not is_quota_manager(user)


def test_every_group_change_is_in_the_audit_trail(sso, mapped, reconciles):
    vision, _ = mapped
    sign_in(Client(), sso, groups=["ml-vision-readers"])
    sign_in(Client(), sso, groups=["ml-vision"])
    sign_in(Client(), sso, groups=[])
    trail = [(h.history_type, h.role, h.history_change_reason, h.history_user.username)
             for h in Membership.history.filter(team=vision).order_by("history_id")]
    assert trail == [
        ("+", "viewer", "IdP group ml-vision-readers: added as viewer", "ada"),
        ("~", "owner", "IdP group ml-vision: viewer -> owner", "ada"),
        ("-", "owner", "IdP group ml-vision no longer held: removed", "ada"),
    ]


def test_quota_manager_role_given_by_hand_survives_an_sso_login(sso, mapped):
    client = Client()
    sign_in(client, sso, groups=[])
    user = signed_in_user(client)
    user.groups.add(Group.objects.get(name=QUOTA_MANAGER_GROUP))
    sign_in(Client(), sso, groups=[])
    assert is_quota_manager(type(user).objects.get(pk=user.pk))


def test_a_hand_made_membership_is_not_taken_over_by_a_group(sso, mapped):
    vision, _ = mapped
    client = Client()
    sign_in(client, sso, groups=[])
    user = signed_in_user(client)
    Membership.objects.create(team=vision, user=user, role=Membership.Role.VIEWER)
    sign_in(Client(), sso, groups=["ml-vision"])
    membership = Membership.objects.get(team=vision, user=user)
    assert (membership.role, membership.source) == ("viewer", "manual")


def test_role_bindings_name_sso_users_as_the_cluster_does(sso, mapped, fake, settings):
    vision, _ = mapped
    sign_in(Client(), sso, groups=["ml-vision"])
    sign_in(Client(), sso, subject="bob-sub", groups=["ml-vision-readers"], email="bob@example.org", username="bob")
    reconcile_team(vision.pk)
    bindings = {o["metadata"]["name"]: [s["name"] for s in o["subjects"]] for o in fake.stored(kind="RoleBinding")}
    assert bindings[EDITOR_ROLE] == ["oidc:ada@example.org"]
    assert bindings[VIEWER_ROLE] == ["oidc:bob@example.org"]


def test_logout_ends_the_session_at_the_idp_too(sso):
    client = Client()
    sign_in(client, sso)
    id_token = client.session["oidc_id_token"]
    response = client.post("/logout/")
    assert signed_in_user(client) is None
    target = urlparse(response["Location"])
    assert f"{target.scheme}://{target.netloc}" == sso.issuer and target.path == "/oauth2/sessions/logout"
    query = parse_qs(target.query)
    assert query["id_token_hint"] == [id_token] and query["post_logout_redirect_uri"] == [LOGIN_PAGE]
    # Hydra accepts it: it asks its logout app, then sends the browser back to our login page.
    assert sso.follow(response["Location"], "ada-sub", claims(), until=LOGIN_PAGE).startswith(LOGIN_PAGE)


def test_login_page_offers_sso_when_an_issuer_is_set(sso):
    page = Client().get("/login/").content.decode()
    assert "Sign in with SSO" in page and 'href="/oidc/authenticate/' in page
    assert 'name="password"' in page
