"""The MCP server's tools: the questions an agent asks for a person (which jobs, why one
waits, when it starts, what the team may use and uses, which GPUs sit idle), read-only.

Every tool reads through `calls.get`, the REST API as the caller, and says which endpoint it
reads: an agent's answer is a person's answer, for the same token. No tool changes anything
(each is annotated read-only); submitting and cancelling stay with the API and gpuctl.
"""

from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from jobs.lifecycle import HOLDING_QUOTA, WAITING_FOR_QUOTA, State

from . import calls

INSTRUCTIONS = (
    "GPU Platform, read-only: the jobs, quotas and GPU use your API token may see (a team token: its team "
    "only). Ask why_waiting for a job that has not started: it gives the platform's reason, Kueue's own words, "
    "the job's place in its queue and its start estimate. Nothing here submits, cancels or changes anything."
)
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
MAX_LIST = 200  # the API's largest page
MAX_GPU_USE = 10  # the running jobs gpu_use looks at: one Prometheus query each (1.5 s at most)

server = MCPServer(name="gpuplatform", title="GPU Platform", instructions=INSTRUCTIONS)

JobId = Annotated[int, Field(ge=1, description="The job's id (as list_jobs gives it).")]
TeamSlug = Annotated[str, Field(pattern=r"^[-a-zA-Z0-9_]{1,63}$", description="A team's slug (as list_teams gives it).")]
StateName = Literal[tuple(State.values)]
# A JSON object: the client gets it as structured content too, and the text of it.
Answer = dict[str, Any]


async def _get(path: str, **params) -> dict | list:
    """The API's answer to the caller; its refusal as the tool's error, in its words."""
    try:
        # In the request's own thread (the endpoint's async_to_sync): its database connection.
        return await sync_to_async(calls.get)(path, **params)
    except calls.Refused as err:
        raise ToolError(f"{err} (HTTP {err.status})") from err


@server.tool(annotations=READ_ONLY)
async def whoami() -> Answer:
    """Who this token is: the person, the token (its team and scopes) and their teams and roles (GET /api/v1/me)."""
    return await _get("me")


@server.tool(annotations=READ_ONLY)
async def list_jobs(
    team: TeamSlug | None = None,
    state: list[StateName] | None = None,
    kind: str | None = None,
    flavor: str | None = None,
    submitter: str | None = None,
    name_contains: str | None = None,
    limit: Annotated[int, Field(ge=1, le=MAX_LIST)] = 50,
) -> Answer:
    """The jobs you may see, newest first, as GET /api/v1/jobs lists them: each with its state, the platform's
    reason and message, and Kueue's own reason and message (kueue_reason, kueue_message) while it waits."""
    page = await _get("jobs", team=team, state=state or [], kind=kind, flavor=flavor, submitter=submitter,
                      q=name_contains, page_size=limit)
    return {"jobs": page["results"], "more": page["next"] is not None}


@server.tool(annotations=READ_ONLY)
async def get_job(job_id: JobId) -> Answer:
    """One job as GET /api/v1/jobs/{id} gives it: its spec, state and reasons, Kueue's words, its place in the
    queue, its start estimate, its GPUs' utilization now, its idle-GPU state and its preemptions."""
    return await _get(f"jobs/{job_id}")


@server.tool(annotations=READ_ONLY)
async def why_waiting(job_id: JobId) -> Answer:
    """Why a job has not started, and when it may: the platform's reason and advice, Kueue's own reason and
    message verbatim, its place in its queue (Kueue's position, the platform's count) and its start estimate."""
    job = await _get(f"jobs/{job_id}")
    waiting = job["state"] in WAITING_FOR_QUOTA
    return {
        "id": job["id"], "name": job["name"], "team": job["team"], "state": job["state"], "waiting": waiting,
        "explanation": _explain(job, waiting),
        "reason": job["reason"], "message": job["message"],
        "kueue_reason": job["kueue_reason"], "kueue_message": job["kueue_message"],
        "queue": job["queue"], "eta": job["eta"],
    }


def _explain(job: dict, waiting: bool) -> str:
    """The answer in a few sentences, from the API's own words."""
    if not waiting:
        return f"Job {job['id']} is not waiting: it is {job['state']}." + (f" {job['message']}" if job["message"] else "")
    words = [job["message"] or f"Job {job['id']} waits ({job['reason'] or job['state']})."]
    if job["kueue_reason"] or job["kueue_message"]:
        words.append(f"Kueue says: {job['kueue_reason'] or 'Pending'}: {job['kueue_message']}".rstrip(": "))
    if job["queue"]:
        words.append(f"Jobs of the team ahead of it on its flavor: {job['queue']['jobs_ahead']}.")
    if job["eta"]:
        words.append(job["eta"]["message"])
    return " ".join(word for word in words if word)


@server.tool(annotations=READ_ONLY)
async def job_eta(job_id: JobId) -> Answer:
    """When a waiting job is likely to start (docs/eta.md): p10/p50/p90 seconds from now, or why that is
    unknown, and its place in its queue; eta is null for a job that does not wait."""
    job = await _get(f"jobs/{job_id}")
    return {"id": job["id"], "state": job["state"], "eta": job["eta"], "queue": job["queue"]}


@server.tool(annotations=READ_ONLY)
async def job_events(job_id: JobId) -> Answer:
    """Every state change of a job, oldest first, with its reason and message (GET /api/v1/jobs/{id}/events)."""
    return {"events": await _get(f"jobs/{job_id}/events")}


@server.tool(annotations=READ_ONLY)
async def list_teams() -> Answer:
    """The teams you may see (a team token: its team), as GET /api/v1/teams lists them."""
    return {"teams": (await _get("teams", page_size=MAX_LIST))["results"]}


@server.tool(annotations=READ_ONLY)
async def team_quotas(team: TeamSlug) -> Answer:
    """A team's quotas per GPU flavor with the GPUs its jobs run and wait for, your role, the per-person caps
    that hold you there with your use of each, and Kueue's fair share (GET /api/v1/teams/{slug})."""
    return await _get(f"teams/{team}")


@server.tool(annotations=READ_ONLY)
async def member_caps(team: TeamSlug) -> Answer:
    """The per-person GPU and job caps of a team (docs/caps.md), each with what its person holds and has
    waiting (GET /api/v1/member-caps?team=)."""
    return {"caps": (await _get("member-caps", team=team, page_size=MAX_LIST))["results"]}


@server.tool(annotations=READ_ONLY)
async def gpu_use(team: TeamSlug | None = None) -> Answer:
    """What the GPUs of your running jobs do now (utilization from Prometheus) and which sit idle, with the
    idle-GPU policy's warning and reclaim time (docs/idle.md); at most the newest 10 jobs holding GPUs."""
    page = await _get("jobs", team=team, state=list(HOLDING_QUOTA), page_size=MAX_GPU_USE)
    jobs = []
    for row in page["results"]:
        job = await _get(f"jobs/{row['id']}")
        jobs.append({name: job[name] for name in ("id", "name", "team", "submitter", "state", "total_gpus",
                                                  "gpu_utilization", "idle")})
    idle = [job["id"] for job in jobs if job["idle"]["idle_seconds"] > 0 or job["idle"]["warned_at"]]
    return {"jobs": jobs, "idle_job_ids": idle, "more": page["next"] is not None}
