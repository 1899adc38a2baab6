"""What the GPUs of jobs do, from the Prometheus that scrapes NVIDIA's dcgm-exporter
(`cluster.prometheus`; docs/telemetry.md).

dcgm-exporter labels each GPU's series with the pod that holds it (`namespace`, `pod`,
`container`), never with our labels, so a job's GPUs are found by its namespace and the
names its pods get (each workload kind's `pod_pattern`). Each question here is ONE query
for any number of jobs: a page asks once for its whole list, never once per job. Every
function raises `PrometheusUnavailable` (not configured, unreachable, slow, a bad answer)
for the caller to show its one-line reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cluster.prometheus import Prometheus, configured_prometheus
from workloads.kinds import for_job

# dcgm-exporter's metric names (its default counters, docs/telemetry.md).
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # gauge, percent of time a kernel ran
FB_USED = "DCGM_FI_DEV_FB_USED"  # framebuffer memory used, MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # framebuffer memory free, MiB
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1 of time the graphics engine was busy (MIG-aware)
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # watts

# GPU_UTIL is not measured on MIG instances: there a GPU's utilization is its engine's
# activity (GR_ENGINE_ACTIVE x 100), which dcgm-exporter reports per instance.
NOW_METRICS = (GPU_UTIL, FB_USED, GR_ENGINE_ACTIVE)
OVER_TIME_METRICS = (GPU_UTIL, FB_USED, GR_ENGINE_ACTIVE)


@dataclass(frozen=True)
class GpuKey:
    """One GPU (or MIG instance) as held by one pod."""

    namespace: str
    pod: str
    hostname: str
    uuid: str
    gpu: str  # the device index on its node
    instance: str = ""  # the MIG instance (GPU_I_ID), "" for a whole GPU

    @classmethod
    def of(cls, labels: dict[str, str]) -> GpuKey:
        return cls(labels.get("namespace", ""), labels.get("pod", ""), labels.get("Hostname", ""),
                   labels.get("UUID", ""), labels.get("gpu", ""), labels.get("GPU_I_ID", ""))

    @property
    def label(self) -> str:
        """How a legend names it: "train-7-0-x2b4k GPU 3 on node-a" (MIG: "GPU 3/1")."""
        device = f"{self.gpu}/{self.instance}" if self.instance else self.gpu
        return f"{self.pod} GPU {device} on {self.hostname}"


@dataclass(frozen=True)
class GpuNow:
    key: GpuKey
    util_percent: float | None = None  # GPU_UTIL, else (MIG) GR_ENGINE_ACTIVE x 100
    mem_used_mib: float | None = None
    engine_active: float | None = None  # 0..1; None where profiling metrics are off


@dataclass(frozen=True)
class JobGpuNow:
    """A job's GPUs now: how many report, their mean utilization (%), their memory used (MiB,
    summed); both None when none report."""

    gpus_reporting: int
    mean_util_percent: float | None
    mem_used_mib: float | None
    gpus: tuple[GpuNow, ...] = ()


NO_GPUS = JobGpuNow(0, None, None)


@dataclass(frozen=True)
class GpuSeries:
    """One GPU of a job over time: utilization (%) and memory used (MiB), (time, value) each."""

    key: GpuKey
    util_percent: list[tuple[datetime, float]] = field(default_factory=list)
    mem_used_mib: list[tuple[datetime, float]] = field(default_factory=list)


# --- finding a job's series --------------------------------------------------------------
class PodIndex:
    """Which of `jobs` a series belongs to, by its `namespace` and `pod` labels."""

    def __init__(self, jobs: Iterable):
        self._by_namespace: dict[str, list[tuple[re.Pattern, object]]] = {}
        for job in jobs:
            pattern = re.compile(for_job(job).pod_pattern(job))
            self._by_namespace.setdefault(job.team.namespace_name, []).append((pattern, job))

    def __bool__(self) -> bool:
        return bool(self._by_namespace)

    def job_of(self, labels: dict[str, str]):
        """The job whose pod the series' labels name, or None."""
        pod = labels.get("pod", "")
        for pattern, job in self._by_namespace.get(labels.get("namespace", ""), ()):
            if pattern.fullmatch(pod):
                return job
        return None

    def matchers(self) -> str:
        """PromQL label matchers for all the jobs' pods (a superset; `job_of` sorts them out)."""
        namespaces = "|".join(sorted(self._by_namespace))
        pods = "|".join(sorted({p.pattern for pairs in self._by_namespace.values() for p, _ in pairs}))
        return f'namespace=~"{_quoted(namespaces)}",pod=~"{_quoted(pods)}"'


def selector(jobs: Iterable, metrics: Iterable[str]) -> str:
    """A PromQL selector of `metrics` on the GPUs of `jobs`: e.g. for KEDA, or
    `avg(<selector(jobs, [GPU_UTIL])>)`."""
    names = "|".join(metrics)
    return f'{{__name__=~"{names}",{PodIndex(jobs).matchers()}}}'


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# --- the questions ---------------------------------------------------------------------
def utilization_now(jobs: Iterable, *, prometheus: Prometheus | None = None) -> dict[int, JobGpuNow]:
    """{job.pk: JobGpuNow} for every job given (`NO_GPUS` for those with no GPU reporting),
    from one instant query. Jobs need `team` and `flavor` loaded (select_related)."""
    jobs = list(jobs)
    index = PodIndex(jobs)
    if not index:
        return {}
    samples = (prometheus or configured_prometheus()).query(
        f'{{__name__=~"{"|".join(NOW_METRICS)}",{index.matchers()}}}')
    readings: dict[int, dict[GpuKey, dict[str, float]]] = {}
    for sample in samples:
        job = index.job_of(sample.labels)
        if job is None or math.isnan(sample.value):
            continue
        gpu = readings.setdefault(job.pk, {}).setdefault(GpuKey.of(sample.labels), {})
        gpu[sample.labels.get("__name__", "")] = sample.value
    return {job.pk: _now(readings.get(job.pk, {})) for job in jobs}


def _now(gpus: dict[GpuKey, dict[str, float]]) -> JobGpuNow:
    if not gpus:
        return NO_GPUS
    now = tuple(GpuNow(key, _util(values.get(GPU_UTIL), values.get(GR_ENGINE_ACTIVE)), values.get(FB_USED),
                       values.get(GR_ENGINE_ACTIVE))
                for key, values in sorted(gpus.items(), key=lambda item: _order(item[0])))
    utils = [gpu.util_percent for gpu in now if gpu.util_percent is not None]
    mems = [gpu.mem_used_mib for gpu in now if gpu.mem_used_mib is not None]
    return JobGpuNow(
        gpus_reporting=len(now),
        mean_util_percent=sum(utils) / len(utils) if utils else None,
        mem_used_mib=sum(mems) if mems else None,
        gpus=now,
    )


def _util(util: float | None, engine_active: float | None) -> float | None:
    if util is not None:
        return util
    return None if engine_active is None else engine_active * 100


def utilization_over_time(job, start: datetime, end: datetime, step: timedelta | float, *,
                          prometheus: Prometheus | None = None) -> list[GpuSeries]:
    """Each GPU the job's pods held between `start` and `end`: utilization and memory, one
    point per `step` (one range query for both metrics). Ordered by pod, node and device."""
    index = PodIndex([job])
    series = (prometheus or configured_prometheus()).query_range(
        f'{{__name__=~"{"|".join(OVER_TIME_METRICS)}",{index.matchers()}}}', start, end, step)
    gpus: dict[GpuKey, GpuSeries] = {}
    engines: dict[GpuKey, list[tuple[datetime, float]]] = {}
    for one in series:
        if index.job_of(one.labels) is None:
            continue
        key = GpuKey.of(one.labels)
        gpu = gpus.setdefault(key, GpuSeries(key))
        points = [(datetime.fromtimestamp(t, UTC), v) for t, v in one.points if not math.isnan(v)]
        metric = one.labels.get("__name__")
        if metric == GPU_UTIL:
            gpu.util_percent.extend(points)
        elif metric == FB_USED:
            gpu.mem_used_mib.extend(points)
        elif metric == GR_ENGINE_ACTIVE:
            engines[key] = [(t, v * 100) for t, v in points]
    for key, points in engines.items():
        if not gpus[key].util_percent:  # a MIG instance
            gpus[key].util_percent.extend(points)
    return [gpus[key] for key in sorted(gpus, key=_order)]


def _order(key: GpuKey):
    return (key.pod, key.hostname, _number(key.gpu), _number(key.instance), key.uuid)


def _number(text: str):
    return (0, int(text), "") if text.isdigit() else (1, 0, text)
