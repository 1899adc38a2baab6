"""An in-memory Prometheus for the idle rule's unit tests: GPUs reporting as dcgm-exporter
does (one series per GPU or MIG slice, with its pod's namespace and name), scraped every
``scrape`` seconds, and a `query_range` that evaluates the one query `jobs.idle` sends
(``max_over_time(ACTIVITY{...}[W]) * 100 or max_over_time(UTILIZATION{...}[W])``) as
Prometheus would: per step, the highest sample in the window ``(t - W, t]``, the profiling
metric where a GPU has it, its utilization where it does not. The live tests use the real
Prometheus of deploy/local-cluster.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cluster.prometheus import PrometheusUnavailable, Series


@dataclass
class FakeGpu:
    namespace: str
    pod: str
    gpu: int = 0
    hostname: str = "gpu-node-0"
    mig: str | None = None  # GPU_I_ID of a MIG slice
    # percent at unix time t; None: no sample (the exporter did not report)
    activity: Callable[[float], float | None] = lambda t: 0.0

    def labels(self) -> dict:
        labels = {"namespace": self.namespace, "pod": self.pod, "container": "main", "gpu": str(self.gpu),
                  "UUID": f"GPU-{self.hostname}-{self.gpu}", "Hostname": self.hostname, "modelName": "H100"}
        if self.mig is not None:
            labels["GPU_I_ID"] = self.mig
        return labels


@dataclass
class FakeDcgm:
    gpus: list[FakeGpu] = field(default_factory=list)
    scrape: float = 1.0
    down: str = ""  # a reason: every query raises PrometheusUnavailable
    queries: list[str] = field(default_factory=list)

    def add(self, *gpus: FakeGpu) -> None:
        self.gpus.extend(gpus)

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        self.queries.append(promql)
        if self.down:
            raise PrometheusUnavailable(self.down)
        window = float(re.search(r"\[(\d+)s\]", promql).group(1))
        namespaces = re.search(r'namespace=~"([^"]*)"', promql).group(1)
        pattern = re.compile(namespaces)
        out = []
        steps = [start + k * step for k in range(int(round((end - start) / step)) + 1)]
        for gpu in self.gpus:
            if not pattern.fullmatch(gpu.namespace):
                continue
            points = []
            for t in steps:
                first = math.floor((t - window) / self.scrape) * self.scrape + self.scrape
                samples = [gpu.activity(s) for s in _frange(first, t, self.scrape)]
                samples = [v for v in samples if v is not None]
                if samples:
                    points.append((t, max(samples)))
            if points:
                out.append(Series(gpu.labels(), points))
        return out


def _frange(first: float, last: float, step: float):
    at = first
    while at <= last + 1e-9:
        yield at
        at += step


def steady(percent: float) -> Callable[[float], float]:
    return lambda t: percent


def profile(*steps: tuple[float, float], since: float = 0.0) -> Callable[[float], float]:
    """GPU_SIM_UTIL's profile: (seconds from ``since``, percent), the last step from there on."""
    def at(t: float) -> float:
        value = steps[0][1]
        for offset, percent in steps:
            if t - since >= offset:
                value = percent
        return value
    return at
