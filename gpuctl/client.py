"""A small HTTP client for the GPU Platform API (standard library only, so ``gpuctl``
runs anywhere Python does)."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request

from . import __version__

RETRY_STATUSES = {502, 503, 504}
RETRIES = 3


class ApiError(Exception):
    """An error answer of the API, in its one shape: code, message, field errors."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields or {}


class Unreachable(Exception):
    """The server could not be reached (or kept answering 5xx)."""


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
    def __init__(self, url: str, token: str, *, timeout: float = 30, backoff: float = 1.0):
        self.base = url.rstrip("/")
        if not self.base.endswith("/api/v1"):
            self.base += "/api/v1"
        self.token, self.timeout, self.backoff = token, timeout, backoff

    def request(self, method: str, path: str, *, body=None, params=None, headers=None,
                retry: bool | None = None) -> tuple[int, dict | list | None]:
        """Send a request; returns ``(status, parsed body)`` or raises ``ApiError`` /
        ``Unreachable``. GETs (and POSTs carrying an Idempotency-Key) are retried on
        connection errors and 502/503/504, with backoff."""
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
        attempts = RETRIES if retry else 1
        last = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                with _opener.open(
                    urllib.request.Request(url, data=data, headers=sent, method=method), timeout=self.timeout
                ) as response:
                    return response.status, _parse(response.read())
            except urllib.error.HTTPError as err:
                payload = _parse(err.read())
                if err.code in RETRY_STATUSES and attempt + 1 < attempts:
                    last = err
                    continue
                raise _api_error(err.code, payload) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                last = err
        reason = getattr(last, "reason", last)
        raise Unreachable(f"Cannot reach {self.base}: {reason}")

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
