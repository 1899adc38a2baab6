"""A small HTTP client for the GPU Platform API (standard library only, so ``gpuctl``
runs anywhere Python does)."""

import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request

from . import __version__

RETRY_STATUSES = {502, 503, 504}
RETRIES = 3
MAX_BACKOFF = 30.0  # seconds: the longest pause between two tries, however long the outage
# A 503 in the API's own error shape with one of these codes is the platform's answer (no
# cluster for logs), not an outage: asking again changes nothing.
ANSWERS_NOT_OUTAGES = {"logs_unavailable"}


class ApiError(Exception):
    """An error answer of the API, in its one shape: code, message, field errors."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields or {}


class Unreachable(Exception):
    """The server could not be reached (or kept answering 5xx)."""


class _Transient(Exception):
    """A failure worth another try: the server unreachable, or a 502/503/504."""

    def __init__(self, error: Exception, why: str):
        super().__init__(why)
        self.error, self.why = error, why

    def final(self) -> Exception:
        return self.error


class _TokenStaysHome(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but send the bearer token only to the server it was meant for:
    urllib copies every header to wherever a redirect points, so a redirect to another
    host (or from https to http) would hand it the token."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not _same_origin(req.full_url, new.full_url):
            new.remove_header("Authorization")
        return new


def _same_origin(old_url: str, new_url: str) -> bool:
    old, new = urllib.parse.urlsplit(old_url), urllib.parse.urlsplit(new_url)
    if old.hostname != new.hostname:
        return False
    if (old.scheme, new.scheme) == ("http", "https"):
        return True  # an upgrade to TLS on the same host keeps the token safer, not less
    return old.scheme == new.scheme and _port(old) == _port(new)


def _port(url: urllib.parse.SplitResult) -> int | None:
    return url.port or {"http": 80, "https": 443}.get(url.scheme)


_opener = urllib.request.build_opener(_TokenStaysHome)


class Client:
    """``outage_window``: for how many seconds a request safe to repeat keeps being retried
    while the server is unreachable or answers 502/503/504, counted from the first failure of
    each outage (0: a few quick tries). ``on_outage(message)`` hears once per outage that it
    began, and once that it ended."""

    def __init__(self, url: str, token: str, *, timeout: float = 30, backoff: float = 1.0,
                 outage_window: float = 0, on_outage=None):
        self.base = url.rstrip("/")
        if not self.base.endswith("/api/v1"):
            self.base += "/api/v1"
        self.token, self.timeout, self.backoff = token, timeout, backoff
        self.outage_window, self.on_outage = outage_window, on_outage or (lambda message: None)
        self._outage_since = None

    def request(self, method: str, path: str, *, body=None, params=None, headers=None,
                retry: bool | None = None) -> tuple[int, dict | list | None]:
        """Send a request; returns ``(status, parsed body)`` or raises ``ApiError`` /
        ``Unreachable``. GETs (and POSTs carrying an Idempotency-Key) are retried on
        connection errors and 502/503/504, with bounded exponential backoff and jitter."""
        url = f"{self.base}/{path.lstrip('/')}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        sent = {"Accept": "application/json", "User-Agent": f"gpuctl/{__version__}", **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        if retry is None:
            retry = method == "GET" or "Idempotency-Key" in sent
        attempt = 0
        while True:
            try:
                answer = self._send(urllib.request.Request(url, data=data, headers=sent, method=method))
            except _Transient as err:
                if not (retry and self._may_retry(attempt)):
                    raise err.final() from None
                self._pause(attempt, err)
                attempt += 1
                continue
            self._recovered()
            return answer

    def _send(self, request) -> tuple[int, dict | list | None]:
        try:
            with _opener.open(request, timeout=self.timeout) as response:
                return response.status, _parse(response.read())
        except urllib.error.HTTPError as err:
            payload = _parse(err.read())
            error = _api_error(err.code, payload)
            if err.code in RETRY_STATUSES and error.code not in ANSWERS_NOT_OUTAGES:
                raise _Transient(error, f"HTTP {err.code}") from None
            self._recovered()
            raise error from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            reason = getattr(err, "reason", err)
            raise _Transient(Unreachable(f"Cannot reach {self.base}: {reason}"), str(reason)) from None

    def _may_retry(self, attempt: int) -> bool:
        """A few quick tries always; more while the outage is younger than the window."""
        if attempt + 1 < RETRIES:
            return True
        return self._outage_since is not None and time.monotonic() - self._outage_since < self.outage_window

    def _pause(self, attempt: int, err: "_Transient") -> None:
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
            if self.outage_window:
                self.on_outage(f"platform unreachable ({err.why}), retrying for up to {self.outage_window:g}s")
        # Exponential, capped, with jitter (half fixed, half random) so that many waiting
        # pipelines do not all knock again at the same instant when the platform is back.
        step = min(MAX_BACKOFF, self.backoff * 2 ** min(attempt, 16))
        delay = step / 2 + random.uniform(0, step / 2)
        if self.outage_window:
            delay = min(delay, max(self._outage_since + self.outage_window - now, 0))
        time.sleep(delay)

    def _recovered(self) -> None:
        if self._outage_since is not None:
            lasted = time.monotonic() - self._outage_since
            self._outage_since = None
            if self.outage_window:
                self.on_outage(f"platform reachable again after {lasted:.0f}s")

    def get(self, path, **params):
        return self.request("GET", path, params=params or None)[1]

    def pages(self, path, **params):
        """Every item of a cursor-paginated list, following ``next`` links."""
        page = self.get(path, **params)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            cursor = urllib.parse.parse_qs(urllib.parse.urlparse(page["next"]).query).get("cursor")
            page = self.get(path, **{**params, "cursor": cursor[0] if cursor else ""})


def _parse(raw: bytes):
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"code": "error", "message": raw.decode(errors="replace")[:500], "fields": {}}


def _api_error(status: int, payload) -> ApiError:
    if isinstance(payload, dict) and "code" in payload:
        return ApiError(status, payload.get("code", "error"), payload.get("message", ""), payload.get("fields"))
    return ApiError(status, "error", f"HTTP {status}")
