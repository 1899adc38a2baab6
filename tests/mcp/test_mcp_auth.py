"""Who may reach /mcp: an API token with the read scope, checked as the REST API checks it;
anyone else gets the API's refusal before any MCP message is read."""

import pytest

from tenants.tokens import ApiToken

from ..support.api import issue_token
from ..support.mcp import call_tool, post

pytestmark = pytest.mark.django_db


def test_a_tokens_holder_gets_answers(member, team, job):
    status, body = call_tool("list_jobs", {}, issue_token(member, team=team))
    assert status == 200 and body["result"]["isError"] is False and '"existing"' in body["result"]["content"][0]["text"]


@pytest.mark.parametrize("credentials, words", [
    ("none", "Send an API token"),
    ("unknown", "Unknown API token"),
    ("revoked", "revoked"),
    ("expired", "expired"),
    ("inactive", "inactive"),
])
def test_a_request_without_a_valid_token_is_refused_with_the_apis_words(member, team, credentials, words):
    token = {
        "none": lambda: None,
        "unknown": lambda: "gpp_" + "0" * 40,
        "revoked": lambda: issue_token(member, team=team, revoked=True),
        "expired": lambda: issue_token(member, team=team, expired=True),
        "inactive": lambda: issue_token(member, team=team),
    }[credentials]()
    if credentials == "inactive":
        type(member).objects.filter(pk=member.pk).update(is_active=False)
    status, body = call_tool("list_jobs", {}, token)
    assert status == 401 and words in body["message"]


def test_the_refusal_names_the_bearer_scheme(db):
    response = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401 and response["WWW-Authenticate"] == 'Bearer realm="mcp"'


def test_a_signed_in_browser_session_is_no_credential_here(client_for, member, team):
    response = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, client=client_for(member))
    assert response.status_code == 401


def test_a_token_without_the_read_scope_is_refused(member, team):
    status, body = call_tool("list_jobs", {}, issue_token(member, team=team, scopes=["submit"]))
    assert status == 403 and "'read' scope" in body["message"]


def test_a_revoked_token_is_refused_at_once(member, team):
    secret = issue_token(member, team=team)
    assert call_tool("whoami", {}, secret)[0] == 200
    ApiToken.objects.get(user=member).revoke()
    assert call_tool("whoami", {}, secret)[0] == 401


@pytest.mark.parametrize("name", ["cancel", "submit_job", "exempt_idle"])
def test_there_is_no_tool_that_changes_anything(member, team, job, name):
    status, body = call_tool(name, {"job_id": job.pk}, issue_token(member, team=team))
    assert status == 200 and body["result"]["isError"] is True
    job.refresh_from_db()
    assert job.state == "submitted"


def test_a_job_of_another_team_is_not_found_not_forbidden(outsider, job):
    status, body = call_tool("get_job", {"job_id": job.pk}, issue_token(outsider))
    text = body["result"]["content"][0]["text"]
    assert body["result"]["isError"] is True and "(HTTP 404)" in text and job.name not in text


@pytest.mark.parametrize("method", ["get", "delete", "put"])
def test_only_post_is_served_so_no_stream_holds_a_worker(client_as, member, team, method):
    response = getattr(client_as(token=issue_token(member, team=team)), method)("/mcp")
    assert response.status_code == 405 and response["Allow"] == "POST"


def test_a_malformed_message_gets_the_transports_error(member, team):
    response = post("{not json", issue_token(member, team=team))
    assert response.status_code == 400 and response.json()["error"]["code"] == -32700


def test_an_answer_that_takes_too_long_is_a_504_not_a_killed_worker(member, team, monkeypatch):
    monkeypatch.setattr("gpuplatform.agents.endpoint.ANSWER_SECONDS", 0)
    status, body = call_tool("list_jobs", {}, issue_token(member, team=team))
    assert status == 504 and body["code"] == "timeout"
