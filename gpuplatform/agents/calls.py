"""The MCP tools' one way to read: a GET of the REST API, in-process, as the caller.

The tools hold no tenancy rule of their own. Each answer is what ``GET /api/v1/...`` gives
the caller's token: the same authentication (revoked, expired, inactive), the same token
scopes and narrowing to a team token's team, the same ``visible_to`` querysets, filters,
serializers and throttle. An answer the API refuses is refused here with its words.
"""

import io
import json
from contextvars import ContextVar
from dataclasses import dataclass
from urllib.parse import urlencode

from django.core.handlers.wsgi import WSGIRequest
from django.urls import Resolver404, resolve

API = "/api/v1/"


@dataclass(frozen=True)
class Caller:
    """What of the MCP request the API calls carry: its credentials and where it came from."""

    authorization: str
    host: str
    scheme: str
    remote_addr: str

    @classmethod
    def of(cls, request) -> "Caller":
        return cls(authorization=request.META.get("HTTP_AUTHORIZATION", ""), host=request.get_host(),
                   scheme=request.scheme, remote_addr=request.META.get("REMOTE_ADDR", ""))


# Set by the endpoint for the request it serves; the tools run inside it.
CALLER: ContextVar[Caller] = ContextVar("gpuplatform_mcp_caller")


class Refused(Exception):
    """The API answered with an error: its status and its sentence."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def get(path: str, **params) -> dict | list:
    """``GET /api/v1/<path>?<params>`` as the current caller; None and empty values are left out."""
    request = WSGIRequest(_environ(CALLER.get(), API + path, _query(params)))
    try:
        match = resolve(request.path_info)
    except Resolver404 as err:
        raise Refused(404, "Not found.") from err
    response = match.func(request, *match.args, **match.kwargs)
    response.render()
    body = json.loads(response.content) if response.content else None
    if response.status_code >= 400:
        raise Refused(response.status_code, _sentence(body) or f"The API answered {response.status_code}.")
    return body


def _sentence(error) -> str:
    """The API's error shape (``{"code", "message", "fields"}``) as one line."""
    if not isinstance(error, dict):
        return ""
    fields = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in (error.get("fields") or {}).items())
    return " ".join(part for part in (error.get("message", ""), fields) if part)


def _query(params: dict) -> str:
    pairs = []
    for name, value in params.items():
        for one in value if isinstance(value, list | tuple) else [value]:
            if one is not None and one != "":
                pairs.append((name, one))
    return urlencode(pairs)


def _environ(caller: Caller, path: str, query: str) -> dict:
    host, _, port = caller.host.partition(":")
    return {
        "REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": path, "QUERY_STRING": query,
        "SERVER_NAME": host, "SERVER_PORT": port or ("443" if caller.scheme == "https" else "80"),
        "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": caller.host, "HTTP_ACCEPT": "application/json",
        "HTTP_AUTHORIZATION": caller.authorization, "REMOTE_ADDR": caller.remote_addr,
        "CONTENT_LENGTH": "0", "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": caller.scheme,
    }
