"""API tokens: stored hashed, shown once, last use recorded, expiring, revocable, and the
create_token command."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from tenants.tokens import ApiToken

from ..support.api import issue_token

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_only_as_a_hash_with_a_short_lookup_prefix(member):
    token, secret = ApiToken.objects.issue(user=member, name="ci")
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tenants_apitoken")
        stored = " ".join(str(value) for value in cursor.fetchone())
    assert secret not in stored
    assert secret.startswith(token.prefix) and len(token.prefix) == 12
    assert ApiToken.objects.find(secret) == token
    assert ApiToken.objects.find(token.prefix + "x" * 40) is None


def test_the_secret_is_shown_at_creation_and_never_again(client_as, member, team):
    client = client_as(member)
    created = client.post("/api/v1/tokens", {"name": "ci", "team": "vision", "scopes": ["read", "submit"],
                                             "expires_in_days": 7}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["token"].startswith("gpp_") and body["team"] == "vision" and body["scopes"] == ["read", "submit"]
    assert timedelta(days=6) < ApiToken.objects.get().expires_at - timezone.now() <= timedelta(days=7)
    listed = client.get("/api/v1/tokens").json()["results"]
    assert [t["id"] for t in listed] == [body["id"]] and "token" not in listed[0]
    assert "token" not in client.get(f"/api/v1/tokens/{body['id']}").json()
    # And the secret works.
    assert client_as(token=body["token"]).get("/api/v1/teams").status_code == 200


def test_a_token_cannot_be_made_for_a_team_one_cannot_see(client_as, outsider, team):
    response = client_as(outsider).post("/api/v1/tokens", {"name": "x", "team": "vision"}, format="json")
    assert response.status_code == 400 and "team" in response.json()["fields"]
    assert not ApiToken.objects.exists()


def test_unknown_scopes_are_refused_with_a_field_error(client_as, member):
    response = client_as(member).post("/api/v1/tokens", {"name": "x", "scopes": ["admin"]}, format="json")
    assert response.status_code == 400 and "scopes" in response.json()["fields"]


def test_using_a_token_records_its_last_use(client_as, member, team):
    secret = issue_token(member)
    assert ApiToken.objects.get().last_used_at is None
    client_as(token=secret).get("/api/v1/jobs")
    used = ApiToken.objects.get().last_used_at
    assert used is not None and timezone.now() - used < timedelta(seconds=10)


def test_a_revoked_token_is_refused_and_says_so(client_as, member, team):
    secret = issue_token(member)
    token = ApiToken.objects.get()
    assert client_as(member).delete(f"/api/v1/tokens/{token.pk}").status_code == 204
    response = client_as(token=secret).get("/api/v1/jobs")
    assert response.status_code == 401
    assert response.json() == {"code": "authentication_failed", "message": "This API token was revoked.", "fields": {}}
    assert ApiToken.objects.get().revoked_at is not None  # kept for the record


def test_an_expired_token_is_refused_and_says_when_it_expired(client_as, member, team):
    response = client_as(token=issue_token(member, expired=True)).get("/api/v1/jobs")
    assert response.status_code == 401 and "expired" in response.json()["message"]


def test_a_malformed_authorization_header_is_a_401(client_as, member):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer two parts")
    assert client.get("/api/v1/jobs").status_code == 401


def test_nobody_can_revoke_someone_elses_token(client_as, member, owner, team):
    issue_token(member)
    token = ApiToken.objects.get()
    assert client_as(owner).delete(f"/api/v1/tokens/{token.pk}").status_code == 404
    assert not ApiToken.objects.get().is_revoked


def test_create_token_prints_a_working_token(capsys, client_as, member, team):
    call_command("create_token", "max", "--team", "vision", "--scopes", "read", "--expires", "3")
    out, err = capsys.readouterr()
    secret = out.strip()
    token = ApiToken.objects.get()
    assert token.team == team and token.scopes == ["read"] and token.user == member
    assert timedelta(days=2) < token.expires_at - timezone.now() <= timedelta(days=3)
    assert "shown only now" in err
    assert client_as(token=secret).get("/api/v1/jobs").status_code == 200
    assert client_as(token=secret).post("/api/v1/jobs", {}, format="json").status_code == 403


@pytest.mark.parametrize("args, message", [
    (["nobody"], "No user"),
    (["oscar", "--team", "vision"], "cannot act for team vision"),
    (["max", "--team", "missing"], "No team"),
    (["max", "--expires", "0"], "--expires"),
])
def test_create_token_explains_what_is_wrong(args, message, outsider, member, team):
    with pytest.raises(CommandError, match=message):
        call_command("create_token", *args)
    assert not ApiToken.objects.exists()


# --- the API tokens page: only scopes the person can use -------------------------------------
TOKENS_PAGE = "/account/tokens/"


def test_the_tokens_page_offers_a_viewer_only_the_read_scope(client_for, viewer, team):
    html = client_for(viewer).get(TOKENS_PAGE).content.decode()
    assert 'value="read"' in html
    assert 'value="submit"' not in html and 'value="cancel"' not in html


def test_the_tokens_page_offers_a_member_every_scope(client_for, member, team):
    html = client_for(member).get(TOKENS_PAGE).content.decode()
    assert all(f'value="{scope}"' in html for scope in ("read", "submit", "cancel"))


def test_a_viewer_cannot_post_a_submit_scope_from_the_page(client_for, viewer, team):
    response = client_for(viewer).post(TOKENS_PAGE, {"name": "ci", "team": "vision", "scopes": ["read", "submit"],
                                                     "expires_in_days": 30})
    assert response.status_code == 400 and not ApiToken.objects.exists()
    assert "is not one of the available choices" in response.content.decode()


def test_a_submit_scope_for_a_team_where_one_only_views_is_a_scopes_error(client_for, viewer, team):
    from tenants.models import Membership

    from ..builders import make_team

    make_team("nlp", members={viewer: Membership.Role.MEMBER})  # submit is offered (for nlp)...
    response = client_for(viewer).post(TOKENS_PAGE, {"name": "ci", "team": "vision", "scopes": ["submit"],
                                                     "expires_in_days": 30})
    html = response.content.decode()
    assert response.status_code == 400 and "you cannot submit or cancel jobs in vision" in html  # ...not for vision
    assert 'value="ci"' in html and not ApiToken.objects.exists()


def test_the_server_side_command_refuses_scopes_one_cannot_use(viewer, team):
    with pytest.raises(CommandError):
        call_command("create_token", viewer.username, "--team", "vision", "--scopes", "submit")
