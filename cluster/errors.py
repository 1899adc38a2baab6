"""The two kinds of failure the rest of the platform acts on, and the mapping onto them.

Callers never see a `kubernetes` or `urllib3` exception: a Celery task only has to know
whether trying again later can help (`TransientError`: retry with backoff) or not
(`PermanentError`: record the API server's message on the row and stop).
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass

import urllib3.exceptions


@dataclass(frozen=True)
class Cause:
    """One field-level reason the API server gave for rejecting an object."""

    field: str
    message: str
    reason: str = ""


class ClusterError(Exception):
    """Base of everything `cluster/` raises about the cluster itself."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = ""):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class TransientError(ClusterError):
    """The request may succeed later: no connection, a timeout, 5xx, 429, a conflict."""

    def __init__(self, message: str, *, status=None, reason="", retry_after: float | None = None):
        super().__init__(message, status=status, reason=reason)
        self.retry_after = retry_after


class PermanentError(ClusterError):
    """Repeating the same request cannot help: invalid, forbidden, unknown kind, bad request."""

    def __init__(self, message: str, *, status=None, reason="", causes: tuple[Cause, ...] = ()):
        super().__init__(message, status=status, reason=reason)
        self.causes = tuple(causes)


class NotFound(PermanentError):
    """The named object does not exist (its kind does)."""


class UnknownKind(PermanentError):
    """The API server does not serve this apiVersion/kind, usually a CRD that is not installed."""


# Connection-level failures: the request may never have reached the API server.
_TRANSPORT_ERRORS = (
    urllib3.exceptions.HTTPError,  # MaxRetryError, NewConnectionError, timeouts, ProtocolError
    ConnectionError,  # refused, reset, aborted
    TimeoutError,
    socket.timeout,
    ssl.SSLError,
)


_SSA_SCHEMA_ERROR = "failed to create typed patch object"
# A webhook that refuses a write while a controller finishes deleting what came before it
# (Kueue: a notebook's StatefulSet scaled up again while "workload from previous scale-down is
# still being deleted"): the same write succeeds once the deletion is done.
_STILL_BEING_DELETED = "is still being deleted"


def classify(exc: BaseException) -> ClusterError | None:
    """Map an exception from the Kubernetes client onto our error classes.

    Returns the exception itself when it already is a `ClusterError`, and `None` when it
    is not something the cluster said or did (a bug of ours must not look like a retry).
    """
    if isinstance(exc, ClusterError):
        return exc
    status = getattr(exc, "status", None)
    if _is_api_exception(exc) and isinstance(status, int):
        return _from_status(status, getattr(exc, "reason", "") or "", _body(exc), _headers(exc))
    if isinstance(exc, _TRANSPORT_ERRORS):
        return TransientError(f"cannot reach the Kubernetes API server: {_describe(exc)}")
    if type(exc).__name__ == "ResourceNotFoundError":  # kubernetes.dynamic discovery miss
        return UnknownKind(str(exc), status=404, reason="NotFound")
    return None


def from_status_object(status: dict) -> ClusterError:
    """An error for a `Status` object delivered inside a watch stream (type ERROR)."""
    return _from_status(int(status.get("code") or 500), status.get("reason", ""), status, {})


def _from_status(code: int, reason: str, body: dict, headers) -> ClusterError:
    message = body.get("message") or reason or f"HTTP {code}"
    reason = body.get("reason") or reason
    details = body.get("details") or {}
    retry_after = _retry_after(headers, details)
    if code == 0:
        # The client produced no HTTP status: TLS failures and the like while connecting.
        return TransientError(f"cannot reach the Kubernetes API server: {message}", status=0)
    if code == 404 and details.get("name"):
        return NotFound(message, status=code, reason=reason)
    if code == 500 and message.startswith(_SSA_SCHEMA_ERROR):
        # An applied field the schema does not declare. The API server reports it as 500
        # (kubernetes/kubernetes#122480, #139253), but sending it again cannot help.
        return PermanentError(message, status=code, reason=reason or "BadRequest")
    if code in (408, 409, 410, 429) or code >= 500 or _STILL_BEING_DELETED in message:
        # 409: a resourceVersion conflict or a racing create; re-reading and applying again
        # converges because apply is idempotent. 410: the data we held is too old; re-read.
        return TransientError(message, status=code, reason=reason, retry_after=retry_after)
    causes = tuple(
        Cause(field=c.get("field", ""), message=c.get("message", ""), reason=c.get("reason", ""))
        for c in details.get("causes") or ()
    )
    return PermanentError(message, status=code, reason=reason, causes=causes)


def _is_api_exception(exc: BaseException) -> bool:
    # Imported here so that `import cluster` stays cheap for apps that only need names.
    from kubernetes.client.exceptions import ApiException

    return isinstance(exc, ApiException)


def _body(exc) -> dict:
    raw = getattr(exc, "body", None)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        # Not a Status object ("404 page not found" for an unknown path, a proxy's HTML).
        return {"message": raw.strip()[:500]}
    return parsed if isinstance(parsed, dict) else {}


def _headers(exc):
    return getattr(exc, "headers", None) or {}


def _retry_after(headers, details: dict) -> float | None:
    value = None
    try:
        value = headers.get("Retry-After")
    except AttributeError:
        pass
    if value is None:
        value = details.get("retryAfterSeconds")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP-date; the API server itself only sends seconds


def _describe(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)  # MaxRetryError hides the real cause here
    return f"{type(exc).__name__}: {reason or exc}"
