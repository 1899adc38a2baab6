"""`Prometheus`: the door to the Prometheus that scrapes the GPUs (NVIDIA's dcgm-exporter in
production, deploy/local-cluster's exporter here), over its HTTP API (/api/v1/query and
/api/v1/query_range), with strict timeouts.

Callers never see a `requests` exception: every way of not getting an answer (not
configured, unreachable, slow, refused, an answer that is not the API's) is one
`PrometheusUnavailable`, whose `reason` is one line a page can show as it is. Queries go as
POST forms, so a selector naming many pods never meets a URL length limit.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import requests

DEFAULT_TIMEOUT_SECONDS = 2.0
_CHUNK = 64 * 1024


class PrometheusUnavailable(Exception):
    """No answer from Prometheus; `reason` says why in one line, fit for a page."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels (`__name__` included) and its value."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and its points, (unix seconds, value), in time order."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


Moment = datetime | float  # a datetime (aware) or unix seconds


def timeout_text(seconds: float) -> str:
    """A timeout as Prometheus reads one, in whole milliseconds ("1500ms"; at least 1): its
    API refuses a fraction with a unit ("1.5s") and a timeout that is not positive."""
    return f"{max(1, round(seconds * 1000))}ms"


class Prometheus:
    """One Prometheus (or an API-compatible store: Thanos, Mimir, VictoriaMetrics) at `url`.

    Authentication: a bearer `token`, or `username` + `password` (basic), or none; `ca_file`
    verifies an https server against that CA bundle instead of the system's. A query takes at
    most `timeout` seconds of waiting for the server, connecting and reading included; the
    same timeout is passed to Prometheus (in milliseconds, `timeout_text`) so it gives up
    evaluating too.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str = "",
        username: str = "",
        password: str = "",
        ca_file: str | Path | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL")
        self.url = url.rstrip("/")
        # What reasons name: scheme, host and port, never credentials or a path with a tenant id.
        self.where = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self.timeout = float(timeout)
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._auth = (username, password) if username else None
        self._verify: bool | str = str(ca_file) if ca_file else True
        self._local = threading.local()  # one Session (a connection pool) per thread

    def __repr__(self) -> str:
        return f"Prometheus({self.where!r})"

    # --- queries ---------------------------------------------------------------------
    def query(self, promql: str, at: Moment | None = None) -> list[Sample]:
        """The instant vector `promql` evaluates to at `at` (now when None)."""
        form = {"query": promql}
        if at is not None:
            form["time"] = _unix(at)
        data = self._post("/api/v1/query", form)
        if data.get("resultType") != "vector":
            raise PrometheusUnavailable(
                f"Prometheus at {self.where} answered a {data.get('resultType')!r}, not an instant vector.")
        try:
            # float() reads Prometheus's "NaN", "+Inf" and "-Inf" as they are.
            return [Sample(dict(item["metric"]), float(item["value"][1])) for item in data["result"]]
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise self._garbled() from err

    def query_range(self, promql: str, start: Moment, end: Moment, step: timedelta | float) -> list[Series]:
        """Every series `promql` gives from `start` to `end`, one point per `step`."""
        seconds = step.total_seconds() if isinstance(step, timedelta) else float(step)
        if seconds <= 0:
            raise ValueError("step must be positive")
        form = {"query": promql, "start": _unix(start), "end": _unix(end), "step": f"{seconds:g}"}
        data = self._post("/api/v1/query_range", form)
        if data.get("resultType") != "matrix":
            raise PrometheusUnavailable(
                f"Prometheus at {self.where} answered a {data.get('resultType')!r}, not a range of series.")
        try:
            return [Series(dict(item["metric"]), [(float(t), float(v)) for t, v in item["values"]])
                    for item in data["result"]]
        except (KeyError, TypeError, ValueError) as err:
            raise self._garbled() from err

    # --- the transport -----------------------------------------------------------------
    def _post(self, path: str, form: dict) -> dict:
        status, body = self._send(path, {**form, "timeout": timeout_text(self.timeout)})
        return self._data(status, body)

    def _send(self, path: str, form: dict) -> tuple[int, bytes]:
        """The HTTP status and body of one query, within the timeout; a plain error otherwise."""
        deadline = time.monotonic() + self.timeout
        try:
            with self._session().post(
                self.url + path, data=form, headers=self._headers, auth=self._auth, verify=self._verify,
                timeout=self.timeout, stream=True, allow_redirects=False,
            ) as response:
                body = self._read(response, deadline)
        except requests.exceptions.SSLError as err:
            raise PrometheusUnavailable(
                f"Prometheus at {self.where}: its TLS certificate is not trusted (PROMETHEUS_CA_FILE).") from err
        except requests.exceptions.Timeout as err:
            raise self._slow() from err
        except requests.exceptions.ConnectionError as err:
            raise PrometheusUnavailable(f"Prometheus at {self.where} cannot be reached.") from err
        except requests.exceptions.RequestException as err:
            raise PrometheusUnavailable(f"Prometheus at {self.where} failed: {type(err).__name__}.") from err
        return response.status_code, body

    def _data(self, status: int, body: bytes) -> dict:
        """The `data` of Prometheus's answer; a plain error for a refusal or a foreign answer."""
        if status in (401, 403):
            raise PrometheusUnavailable(
                f"Prometheus at {self.where} refused the platform's credentials (HTTP {status}).")
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
            if status != 200:
                raise PrometheusUnavailable(f"Prometheus at {self.where} answered HTTP {status}.")
            raise self._garbled()
        if answer["status"] == "error":
            # 400/422: the query itself (a bug of ours); 503: it timed out or was cancelled.
            if answer.get("errorType") in ("timeout", "canceled"):
                raise self._slow()
            raise PrometheusUnavailable(
                f"Prometheus at {self.where} refused the query (HTTP {status}): {answer.get('error', '')}"[:300])
        data = answer.get("data")
        if not isinstance(data, dict):
            raise self._garbled()
        return data

    def _read(self, response, deadline: float) -> bytes:
        # read1: whatever has arrived (urllib3's read(n) waits for all n bytes), so a server
        # that drips its answer meets the deadline, not only one that stops sending.
        chunks, raw = [], response.raw
        while chunk := raw.read1(_CHUNK, decode_content=True):
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise requests.exceptions.ReadTimeout()
        return b"".join(chunks)

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.trust_env = False  # no proxy or .netrc from the environment: only what is configured
        return session

    def _slow(self) -> PrometheusUnavailable:
        return PrometheusUnavailable(f"Prometheus at {self.where} did not answer within {self.timeout:g} s.")

    def _garbled(self) -> PrometheusUnavailable:
        return PrometheusUnavailable(f"Prometheus at {self.where} gave an answer that is not Prometheus's API.")


def _unix(moment: Moment) -> str:
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise ValueError("a naive datetime is ambiguous; give an aware one")
        moment = moment.timestamp()
    return f"{float(moment):.3f}"


NOT_CONFIGURED = "GPU metrics are not configured (PROMETHEUS_URL is not set)."


def prometheus_from_settings() -> Prometheus | None:
    """The process-wide `Prometheus` configured by settings (PROMETHEUS_URL, PROMETHEUS_TOKEN
    or PROMETHEUS_USERNAME + PROMETHEUS_PASSWORD, PROMETHEUS_CA_FILE,
    PROMETHEUS_TIMEOUT_SECONDS), or None when PROMETHEUS_URL is unset. Tests that change the
    settings call `prometheus_from_settings.cache_clear()`."""
    with _creating:
        return _from_settings()


def configured_prometheus() -> Prometheus:
    """The configured `Prometheus`; raises `PrometheusUnavailable` when there is none."""
    prometheus = prometheus_from_settings()
    if prometheus is None:
        raise PrometheusUnavailable(NOT_CONFIGURED)
    return prometheus


_creating = threading.Lock()


@functools.cache
def _from_settings() -> Prometheus | None:
    from django.conf import settings

    if not settings.PROMETHEUS_URL:
        return None
    return Prometheus(
        settings.PROMETHEUS_URL,
        token=settings.PROMETHEUS_TOKEN,
        username=settings.PROMETHEUS_USERNAME,
        password=settings.PROMETHEUS_PASSWORD,
        ca_file=settings.PROMETHEUS_CA_FILE,
        timeout=settings.PROMETHEUS_TIMEOUT_SECONDS,
    )


prometheus_from_settings.cache_clear = _from_settings.cache_clear
