"""``GET /api/v1/me``: who the caller is, the token they call with, and their teams and roles,
narrowed to a token's team as every answer to it; never another team."""

import pytest

from tenants.models import Membership

from ..builders import make_team
from ..support.api import issue_token

pytestmark = pytest.mark.django_db


def teams(response) -> dict:
    assert response.status_code == 200, response.content
    return {team["slug"]: team["role"] for team in response.json()["teams"]}


def test_the_owner_member_and_viewer_see_their_role_in_the_team(client_as, team, owner, member, viewer):
    for person, role in ((owner, "owner"), (member, "member"), (viewer, "viewer")):
        assert teams(client_as(person).get("/api/v1/me")) == {"vision": role}


def test_an_outsider_sees_only_their_own_teams(client_as, team, outsider):
    response = client_as(outsider).get("/api/v1/me")
    assert "vision" not in teams(response) and response.json()["username"] == outsider.username


def test_a_token_says_what_it_is_and_sees_only_its_team(client_as, team, owner):
    make_team("nlp", members={owner: Membership.Role.MEMBER})
    assert teams(client_as(owner).get("/api/v1/me")) == {"vision": "owner", "nlp": "member"}
    response = client_as(token=issue_token(owner, team=team, scopes=["read"])).get("/api/v1/me")
    assert teams(response) == {"vision": "owner"}
    token = response.json()["token"]
    assert (token["team"], token["scopes"], token["name"]) == ("vision", ["read"], "test")
    assert token["prefix"].startswith("gpp_") and response.json()["quota_manager"] is False


def test_a_session_has_no_token_and_a_quota_manager_says_so(client_as, quota_manager):
    body = client_as(quota_manager).get("/api/v1/me").json()
    assert body["token"] is None and body["quota_manager"] is True


def test_an_anonymous_caller_is_a_401(client_as):
    assert client_as().get("/api/v1/me").status_code == 401


def test_the_schema_declares_it(client_as, member):
    schema = client_as(member).get("/api/schema/", {"format": "json"}).json()
    assert {"200", "401"} <= set(schema["paths"]["/api/v1/me"]["get"]["responses"])
