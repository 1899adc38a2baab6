"""The ASGI entry serves /mcp too: the same view, through Django's ASGI handler."""

import anyio
import httpx2
import pytest
from django.db import connections
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from gpuplatform.asgi import application

from ..support.api import issue_token

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_jobs", "arguments": {}}}


@pytest.mark.django_db(transaction=True)
def test_the_asgi_entry_answers_a_tool_call(member, team, job, monkeypatch):
    # The handler's threads close their connections when the request ends, so the test database can go.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    token = issue_token(member, team=team)

    async def ask():
        transport = httpx2.ASGITransport(app=application)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as http:
            return await http.post("/mcp", json=CALL, headers={
                "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION})

    response = anyio.run(ask)
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"]["jobs"][0]["name"] == "existing"
