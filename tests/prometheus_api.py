"""A small real HTTP server on 127.0.0.1 that answers Prometheus's query API
(/api/v1/query, /api/v1/query_range) from series a test gives it, for unit tests of
`cluster.prometheus` and of what asks it (`jobs.telemetry`). The live tests use the real
Prometheus of deploy/local-cluster.

It evaluates what the platform sends, a bare selector `{label=~"re",label="v",...}`
(matched whole, as Prometheus matches), and answers anything else 400 bad_data, as it
does a ``timeout`` Prometheus refuses ("1.5s"). Each series is labels plus a value, or a
function of time for range queries. `requests` records what came in (path and form);
`delay`, `trickle` and `answer` make it slow, drip-feed or say something else.

    from tests.prometheus_api import prometheus_api  # the fixture
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from bench.prometheus_standin import timeout_refused

_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_selector(text: str) -> list[tuple[str, str, str]]:
    """The matchers of a bare selector `{...}`; ValueError for anything else."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not a bare selector: {text[:80]}")
    body, matchers, at = text[1:-1], [], 0
    while at < len(body):
        found = _MATCHER.match(body, at)
        if not found:
            raise ValueError(f"cannot parse matchers at {body[at:at + 40]!r}")
        name, op, value = found.groups()
        matchers.append((name, op, re.sub(r"\\(.)", r"\1", value)))
        at = found.end()
    return matchers


def _matches(labels: dict, matchers) -> bool:
    for name, op, value in matchers:
        have = labels.get(name, "")
        ok = {"=": have == value, "!=": have != value,
              "=~": re.fullmatch(value, have) is not None, "!~": re.fullmatch(value, have) is None}[op]
        if not ok:
            return False
    return True


@dataclass
class StubSeries:
    labels: dict
    value: float | object = 0.0  # a number, or a function of unix time


@dataclass
class PrometheusApi:
    url: str = ""
    series: list[StubSeries] = field(default_factory=list)
    requests: list[tuple[str, dict]] = field(default_factory=list)
    delay: float = 0.0  # seconds before answering
    trickle: float = 0.0  # seconds between the bytes of the body
    answer: tuple[int, bytes] | None = None  # (status, body) instead of evaluating
    auth_seen: list[str | None] = field(default_factory=list)

    def add(self, value, **labels) -> StubSeries:
        one = StubSeries(labels, value)
        self.series.append(one)
        return one

    def evaluate(self, path: str, form: dict) -> tuple[int, dict]:
        if refused := timeout_refused(form):  # what Prometheus refuses: "1.5s", "0ms"
            return 400, {"status": "error", "errorType": "bad_data", "error": refused}
        try:
            matchers = parse_selector(form["query"])
        except (KeyError, ValueError) as err:
            return 400, {"status": "error", "errorType": "bad_data", "error": str(err)}
        chosen = [s for s in self.series if _matches(s.labels, matchers)]
        if path == "/api/v1/query":
            at = float(form.get("time", time.time()))
            result = [{"metric": s.labels, "value": [at, _text(_at(s.value, at))]} for s in chosen]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        times = []
        while start + len(times) * step <= end:
            times.append(start + len(times) * step)
        result = [{"metric": s.labels, "values": [[t, _text(_at(s.value, t))] for t in times]} for s in chosen]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _at(value, t):
    return value(t) if callable(value) else value


def _text(value: float) -> str:
    return "NaN" if value != value else f"{value:g}"


def serve(api: PrometheusApi):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length", 0))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            api.requests.append((self.path, form))
            api.auth_seen.append(self.headers.get("Authorization"))
            if api.delay:
                time.sleep(api.delay)
            status, body = api.answer or (None, None)
            if status is None:
                status, answer = api.evaluate(self.path, form)
                body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if api.trickle:
                    for i in range(len(body)):
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        time.sleep(api.trickle)
                else:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up, as it should

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture
def prometheus_api():
    api = PrometheusApi()
    server = serve(api)
    yield api
    server.shutdown()
    server.server_close()
