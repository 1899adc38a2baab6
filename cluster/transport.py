"""The HTTP level under `Cluster`: naming requests by verb for the counter, and reading
one watch response as events.

Counting happens on the raw request (method and URL), beneath the dynamic client, so the
discovery requests the client makes on its own are counted like ours.
"""

from __future__ import annotations

import contextlib
import json
import socket
from urllib.parse import parse_qs, urlsplit

import urllib3.exceptions
from kubernetes.watch.watch import iter_resp_lines

from .errors import TransientError


def request_verb(method: str, url: str) -> str:
    """Name an HTTP request the way the API server's audit log would: GET of a collection
    is LIST, with ?watch=true it is WATCH; discovery (/api, /apis/group/version) is GET."""
    method = method.upper()
    if method != "GET":
        return method
    parts = urlsplit(url)
    if parse_qs(parts.query).get("watch", [""])[0].lower() in ("true", "1"):
        return "WATCH"
    segments = [s for s in parts.path.split("/") if s]
    if segments[:1] == ["api"]:
        rest = segments[2:]
    elif segments[:1] == ["apis"]:
        rest = segments[3:]
    else:
        return "GET"  # /version, /openapi
    if not rest:
        return "GET"
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    return "LIST" if len(rest) == 1 else "GET"


class WatchResponse:
    """The lines of one watch response as event dicts; transport failures become
    `TransientError`, which `WatchStream` takes as "open again from where we were"."""

    def __init__(self, response):
        self._response = response
        self._closed = False

    def __iter__(self):
        try:
            for line in iter_resp_lines(self._response):
                if line:
                    yield json.loads(line)
        except Exception as exc:
            if self._closed:
                return  # we closed it (stop, or a cut in a test); whatever the read says
            if isinstance(exc, (urllib3.exceptions.HTTPError, OSError, ValueError)):
                broke = f"watch connection broke: {type(exc).__name__}: {exc}"
                raise TransientError(broke) from exc
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Shut the socket first: close() alone would wait for a read blocked in another thread.
        sock = getattr(getattr(self._response, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()
            self._response.release_conn()
