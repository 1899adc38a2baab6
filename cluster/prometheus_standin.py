"""A small real HTTP server standing in for Prometheus, the one the unit tests and the bench
share: the tests' fixtures ``standin`` and ``prometheus_api`` (tests/fixtures/prometheus.py),
and ``make bench-pages``, which counts the queries each page sends it. Beside the in-memory
`FakeCluster`, it is this package's stand-in for the other server it talks to. The live tests
use the real Prometheus of deploy/local-cluster.

It serves /api/v1/query and /api/v1/query_range for GPU series given as labels and a value
(a number, or a function of unix time that may answer None: no sample then, as when the
exporter did not report), scraped every ``scrape`` seconds (1), and evaluates the few shapes of
PromQL the platform sends, no more: a bare selector ``{__name__=~"A|B",label=~"re",...}``
(the latest sample, at most ``scrape`` seconds old), ``avg_over_time(M{...}[W])`` and
``max_over_time(M{...}[W])`` (the mean or highest of the samples in ``(t - W, t]``, as
Prometheus reads a range; a series with none there is left out), ``X * N``, ``X or Y`` (Y's
series whose labels X has not), ``(X)`` and ``count by (namespace) (X < N)``: so the idle
rule's ``max_over_time(ACTIVE{...}[W]) * 100 or max_over_time(UTIL{...}[W])`` too. Anything
else answers 400 bad_data, as Prometheus answers a query it cannot parse; a ``timeout`` it
refuses ("1.5s", "0ms") too (``timeout_refused``). ``requests`` records what came in (path
and form), ``queries`` how many, ``promql`` what they asked, and ``auth_seen`` their Authorization header; ``delay``,
``trickle`` and ``answer`` make it slow, drip-feed its body or say something else.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_OVER = re.compile(r"(?P<fn>avg|max)_over_time\((?P<metric>[A-Za-z_:][A-Za-z0-9_:]*)?(?P<selector>\{.*\})"
                   r"\[(?P<window>\d+)(?P<unit>[sm])\]\)", re.S)
_COUNT = re.compile(r"count by \(namespace\) \((?P<inner>.*) < (?P<threshold>[0-9.]+)\)", re.S)
_OR = re.compile(r"(?P<left>.*?) or (?P<right>.*)", re.S)
_TIMES = re.compile(r"(?P<inner>.*) \* (?P<factor>[0-9.]+)", re.S)
_UNITS = {"s": 1, "m": 60}
# Prometheus's API reads a duration parameter (web/api/v1's parseDuration) as a number of
# seconds ("1.5") or as whole numbers with units, largest first and each once
# (model.ParseDuration: "1500ms", "1m30s"); so "1.5s" and "30s1m" are refused.
_SECONDS = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_UNITS_IN_ORDER = (("y", 365 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))
_WITH_UNITS = re.compile("".join(rf"(?:(\d+){unit})?" for unit, _ in _UNITS_IN_ORDER))


def _matchers(text: str) -> list[tuple[str, str, str]]:
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not a selector: {text[:80]}")
    body, found, at = text[1:-1], [], 0
    while at < len(body):
        match = _MATCHER.match(body, at)
        if not match:
            raise ValueError(f"cannot parse matchers at {body[at:at + 40]!r}")
        name, op, value = match.groups()
        found.append((name, op, re.sub(r"\\(.)", r"\1", value)))
        at = match.end()
    return found


def _matches(labels: dict, matchers) -> bool:
    for name, op, value in matchers:
        have = labels.get(name, "")
        if not {"=": have == value, "!=": have != value, "=~": re.fullmatch(value, have) is not None,
                "!~": re.fullmatch(value, have) is None}[op]:
            return False
    return True


@dataclass
class GpuSeries:
    labels: dict
    value: object = 0.0  # a number, or a function of unix time (None: no sample then)

    def at(self, t: float) -> float | None:
        if not callable(self.value):
            return float(self.value)
        value = self.value(t)
        return None if value is None else float(value)


@dataclass
class StandIn:
    url: str = ""
    series: list[GpuSeries] = field(default_factory=list)
    requests: list[tuple[str, dict]] = field(default_factory=list)
    auth_seen: list[str | None] = field(default_factory=list)
    delay: float = 0.0  # seconds before answering
    trickle: float = 0.0  # seconds between the bytes of the body
    answer: tuple[int, bytes] | None = None  # (status, body) instead of evaluating
    scrape: float = 1.0  # seconds between the samples of a series
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def queries(self) -> int:
        return len(self.requests)

    @property
    def promql(self) -> list[str]:
        return [form.get("query", "") for _, form in self.requests]

    def add(self, value, **labels) -> GpuSeries:
        one = GpuSeries(labels, value)
        self.series.append(one)
        return one

    def gpu(self, namespace: str, pod: str, gpu: int, *, util=70.0, mem_mib=1024.0, host="gpu-node-0",
            active=None, mig: str | None = None) -> GpuSeries:
        """One GPU of ``pod`` as dcgm-exporter reports it: utilization and memory used, and
        with ``active`` (0..1, or a function of time) its profiling metric, the graphics
        engine's activity; with ``mig`` (its GPU_I_ID) one MIG slice of it. Returns the
        utilization series (set its ``value`` to change what the GPU does)."""
        labels = {"namespace": namespace, "pod": pod, "container": "main", "gpu": str(gpu), "Hostname": host,
                  "UUID": f"GPU-{host}-{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "device": f"nvidia{gpu}"}
        if mig is not None:
            labels["GPU_I_ID"] = mig
        utilization = self.add(util, __name__="DCGM_FI_DEV_GPU_UTIL", **labels)
        self.add(mem_mib, __name__="DCGM_FI_DEV_FB_USED", **labels)
        if active is not None:
            self.add(active, __name__="DCGM_FI_PROF_GR_ENGINE_ACTIVE", **labels)
        return utilization

    # --- evaluation ------------------------------------------------------------------
    def _select(self, metric: str | None, selector: str) -> list[GpuSeries]:
        matchers = _matchers(selector)
        if metric:
            matchers.append(("__name__", "=", metric))
        return [s for s in self.series if _matches(s.labels, matchers)]

    def _scrapes(self, t: float, window: float) -> list[float]:
        """When a series was sampled in ``(t - window, t]``: every ``scrape`` seconds."""
        first = math.floor((t - window) / self.scrape) * self.scrape + self.scrape
        return [first + k * self.scrape for k in range(int((t - first) // self.scrape) + 1)]

    def _over(self, match, t: float) -> list[tuple[dict, float]]:
        window = int(match["window"]) * _UNITS[match["unit"]]
        reduce = max if match["fn"] == "max" else (lambda values: sum(values) / len(values))
        out = []
        for one in self._select(match["metric"], match["selector"]):
            # A steady GPU's mean and highest are its value; else those of its samples.
            samples = [one.at(at) for at in self._scrapes(t, window)] if callable(one.value) else [one.at(t)]
            samples = [value for value in samples if value is not None]
            if samples:
                out.append(({k: v for k, v in one.labels.items() if k != "__name__"}, reduce(samples)))
        return out

    def instant(self, promql: str, t: float) -> list[tuple[dict, float]]:
        promql = promql.strip()
        if count := _COUNT.fullmatch(promql):
            counts: dict = {}
            for labels, value in self.instant(count["inner"], t):
                if value < float(count["threshold"]):
                    counts[labels.get("namespace", "")] = counts.get(labels.get("namespace", ""), 0) + 1
            return [({"namespace": ns}, float(n)) for ns, n in counts.items()]
        if _wrapped(promql):
            return self.instant(promql[1:-1], t)
        if either := _OR.fullmatch(promql):
            left = self.instant(either["left"], t)
            have = {json.dumps(labels, sort_keys=True) for labels, _ in left}
            return left + [(labels, v) for labels, v in self.instant(either["right"], t)
                           if json.dumps(labels, sort_keys=True) not in have]
        if times := _TIMES.fullmatch(promql):
            return [(labels, v * float(times["factor"])) for labels, v in self.instant(times["inner"], t)]
        if over := _OVER.fullmatch(promql):
            return self._over(over, t)
        return [(s.labels, value) for s in self._select(None, promql) if (value := s.at(t)) is not None]

    def evaluate(self, path: str, form: dict) -> tuple[int, dict]:
        if refused := timeout_refused(form):
            return 400, {"status": "error", "errorType": "bad_data", "error": refused}
        try:
            if path == "/api/v1/query":
                at = float(form.get("time", time.time()))
                result = [{"metric": labels, "value": [at, _text(v)]} for labels, v in self.instant(form["query"], at)]
                return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
            if path == "/api/v1/query_range":
                start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
                times = [start + k * step for k in range(int((end - start) // step) + 1)]
                by_series: dict = {}
                for t in times:
                    for labels, v in self.instant(form["query"], t):
                        by_series.setdefault(json.dumps(labels, sort_keys=True), (labels, []))[1].append([t, _text(v)])
                result = [{"metric": labels, "values": values} for labels, values in by_series.values()]
                return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}
        except (KeyError, ValueError) as err:
            return 400, {"status": "error", "errorType": "bad_data", "error": str(err)}
        return 404, {"status": "error", "errorType": "not_found", "error": path}


def duration_seconds(text: str) -> float | None:
    """Seconds of a duration as Prometheus's API reads one; None when it cannot."""
    if _SECONDS.fullmatch(text):
        return float(text)
    found = _WITH_UNITS.fullmatch(text)
    if not text or found is None:
        return None
    return sum(int(n) * seconds for n, (_, seconds) in zip(found.groups(), _UNITS_IN_ORDER, strict=True) if n)


def timeout_refused(form: dict) -> str:
    """Why Prometheus would refuse the query's ``timeout`` (its words), or "" when it would not."""
    text = form.get("timeout", "")
    if not text:
        return ""
    seconds = duration_seconds(text)
    if seconds is None:
        return f'invalid parameter "timeout": cannot parse "{text}" to a valid duration'
    if seconds <= 0:
        return f'invalid parameter "timeout": timeout must be positive, got {text}'
    return ""


def _text(value: float) -> str:
    return "NaN" if value != value else f"{value:g}"  # as Prometheus writes it


def _wrapped(text: str) -> bool:
    """Whether ``text`` is one parenthesised expression, ``(...)`` (not ``(a) or (b)``)."""
    if not text.startswith("("):
        return False
    depth = 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return at == len(text) - 1
    return False


def serve(standin: StandIn | None = None) -> tuple[StandIn, ThreadingHTTPServer]:
    """Start ``standin`` on a free port of 127.0.0.1 (``standin.url``); stop it with
    ``server.shutdown(); server.server_close()``."""
    standin = standin or StandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length", 0))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            path = self.path.split("?")[0]
            with standin._lock:
                standin.requests.append((path, form))
                standin.auth_seen.append(self.headers.get("Authorization"))
            if standin.delay:
                time.sleep(standin.delay)
            status, body = standin.answer or (None, b"")
            if status is None:
                status, answer = standin.evaluate(path, form)
                body = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not standin.trickle:
                    self.wfile.write(body)
                for at in range(len(body) if standin.trickle else 0):
                    self.wfile.write(body[at:at + 1])
                    self.wfile.flush()
                    time.sleep(standin.trickle)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up, as it should

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    standin.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return standin, server
