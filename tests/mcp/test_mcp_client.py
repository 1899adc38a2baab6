"""The MCP server as an agent meets it: the SDK's own client (Streamable HTTP) against the
live server, with a team member's token and with another team's."""

import json

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..builders import make_job, make_quota
from ..support.api import issue_token
from ..support.mcp import KUEUE_SAYS, PLATFORM_SAYS, waiting_job


def ask(url: str, token: str, *calls: tuple[str, dict]) -> tuple[list, list]:
    """Connect as the token's holder; (the tools listed, each call's (is_error, answer))."""

    async def session():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                tools = (await client.list_tools()).tools
                answers = []
                for name, arguments in calls:
                    result = await client.call_tool(name, arguments)
                    text = result.content[0].text
                    answers.append((result.is_error, text if result.is_error else json.loads(text)))
                return tools, answers

    return anyio.run(session)


@pytest.fixture
def their_jobs(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    waits = waiting_job(team, flavor, name="waits")
    runs = make_job(team, flavor, name="runs")
    runs.submit()
    return waits, runs


def test_a_member_lists_the_teams_jobs_and_learns_why_one_waits(live_server, member, team, their_jobs):
    waits, runs = their_jobs
    tools, [(listed_error, listed), (why_error, why)] = ask(
        live_server.url, issue_token(member, team=team), ("list_jobs", {}), ("why_waiting", {"job_id": waits.pk}))
    assert {"list_jobs", "why_waiting", "job_eta", "team_quotas", "gpu_use"} <= {tool.name for tool in tools}
    assert not listed_error and {job["name"] for job in listed["jobs"]} == {"waits", "runs"}
    assert not why_error and why["waiting"] is True
    assert (why["kueue_reason"], why["kueue_message"], why["message"]) == ("WaitingForQuota", KUEUE_SAYS, PLATFORM_SAYS)
    assert why["explanation"].startswith(PLATFORM_SAYS) and KUEUE_SAYS in why["explanation"]
    assert why["queue"]["jobs_ahead"] == 0 and why["eta"]["known"] is True


def test_another_teams_token_sees_none_of_them(live_server, outsider, team, their_jobs):
    waits, _ = their_jobs
    other_team = outsider.memberships.get().team
    _, [(_, listed), (why_error, why), (quota_error, quotas)] = ask(
        live_server.url, issue_token(outsider, team=other_team),
        ("list_jobs", {}), ("why_waiting", {"job_id": waits.pk}), ("team_quotas", {"team": team.slug}))
    assert listed == {"jobs": [], "more": False}
    assert why_error and "(HTTP 404)" in why and "waits" not in why
    assert quota_error and "(HTTP 404)" in quotas


def test_every_tool_is_declared_read_only(live_server, member, team):
    tools, _ = ask(live_server.url, issue_token(member, team=team))
    assert tools and all(tool.annotations.read_only_hint and not tool.annotations.destructive_hint for tool in tools)
