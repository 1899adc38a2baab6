"""Plain helpers of the MCP tests: a job waiting with Kueue's words, and one tool call as a
raw Streamable HTTP POST through Django's test client (the endpoint, its auth, the SDK's
transport, the tools and the API behind them; no socket)."""

import json

from django.test import Client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from jobs.lifecycle import State

from ..builders import make_job

KUEUE_SAYS = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
              "8 more needed")
PLATFORM_SAYS = "Waiting for quota: team vision has too few free h100 GPUs for this job (8 needed, 8 more must free up)."


def waiting_job(team, flavor, name="waits", **fields):
    """A job Kueue has not admitted, with its own words and the platform's."""
    job = make_job(team, flavor, name=name, gpus_per_worker=8, **fields)
    job.submit()
    job.observe(State.QUEUED, reason="WaitingForQuota", message=PLATFORM_SAYS)
    job.hear_kueue("WaitingForQuota", KUEUE_SAYS)
    return job


def post(message: dict | str, token: str | None = None, client: Client | None = None):
    """POST one JSON-RPC message (a string: sent as it is) to /mcp; the response."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": LATEST_HANDSHAKE_VERSION}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return (client or Client()).post("/mcp", message if isinstance(message, str) else json.dumps(message), content_type="application/json", headers=headers)


def call_tool(name: str, arguments: dict, token: str | None = None):
    """tools/call over HTTP: (HTTP status, the JSON-RPC answer or the refusal's body)."""
    response = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
                    token)
    return response.status_code, response.json()
