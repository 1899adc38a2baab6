"""``/mcp``: the MCP server over Streamable HTTP, served by the web process itself.

The platform runs as WSGI (gunicorn's sync workers, persistent database connections), so
the endpoint is a Django view rather than a second, ASGI server: it checks the API token as
the REST API does, then hands the request to the SDK's own Streamable HTTP transport,
stateless and answering in JSON (one POST, one answer: nothing is kept between requests,
so any worker of any replica serves any request), and returns what it sent. Only POST: a
GET would open a server-sent event stream, which would hold a sync worker for nothing (the
server never sends on its own), so it is 405 as the transport's specification allows; and
no answer takes longer than ``ANSWER_SECONDS``, within gunicorn's worker timeout. The tools run
in this request's thread (``async_to_sync`` here, ``sync_to_async`` in the tools), on its
database connection.
"""

import anyio
from asgiref.sync import async_to_sync
from django.http import HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework import exceptions

from core.api_errors import error_body
from tenants.auth import KEYWORD, TokenAuthentication
from tenants.tokens import Scope

from .calls import CALLER, Caller
from .tools import server

CHALLENGE = f'{KEYWORD} realm="mcp"'
ANSWER_SECONDS = 25  # gunicorn kills a worker silent for 30 s


@csrf_exempt
def mcp(request):
    """One MCP message (or batch) from a client with an API token; its answer."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    context = CALLER.set(Caller.of(request))
    try:
        status, headers, body = async_to_sync(_serve)(_scope(request), request.body)
    except TimeoutError:
        return _refuse(504, "timeout", f"No answer within {ANSWER_SECONDS} s; ask for less (a team, a limit).")
    finally:
        CALLER.reset(context)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() not in ("content-length", "date", "server"):
            response[name] = value
    return response


def _refusal(request) -> HttpResponse | None:
    """401 without a valid token (the REST API's checks and words), 403 without its read scope.
    Only tokens: a browser session's cookie is no credential here."""
    try:
        found = TokenAuthentication().authenticate(request)
    except exceptions.AuthenticationFailed as err:
        return _refuse(401, "authentication_failed", str(err.detail))
    if found is None:
        return _refuse(401, "not_authenticated", "Send an API token: 'Authorization: Bearer gpp_…'.")
    _user, token = found
    if not token.has_scope(Scope.READ):
        return _refuse(403, "permission_denied", "This token lacks the 'read' scope.")
    return None


def _refuse(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse(error_body(code, message), status=status)
    if status == 401:
        response["WWW-Authenticate"] = CHALLENGE
    return response


def _scope(request) -> dict:
    """The ASGI scope the SDK's transport reads: method, headers, path."""
    host, _, port = request.get_host().partition(":")
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(), "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1"))
                    for name, value in request.headers.items()],
        "server": (host, int(port or (443 if request.is_secure() else 80))),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _serve(scope: dict, body: bytes) -> tuple[int, list, bytes]:
    """Run the SDK's stateless transport on one request; what it sent back."""
    status, headers, chunks = 500, [], []
    answered = anyio.Event()
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client stays until the answer is complete
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message["headers"]]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    manager = StreamableHTTPSessionManager(app=server._lowlevel_server, stateless=True, json_response=True)
    with anyio.fail_after(ANSWER_SECONDS):
        async with manager.run():
            await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)
