"""When a job's GPUs are idle: the one definition (read-only; docs/idle.md publishes it).

A job is idle when every GPU of every one of its pods is idle. Time is cut into fixed
windows of ``IDLE_GPU_WINDOW_SECONDS`` (aligned on the clock, as Run:ai counts its idle GPU
time in 30-second intervals). For each GPU and window the highest activity seen in it is
read from Prometheus: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (the share of time the graphics
engine was busy, 0..1, one series per MIG slice), or ``DCGM_FI_DEV_GPU_UTIL`` (%) for a GPU
without profiling metrics. A window is

- idle when every GPU the job holds reported in it and all stayed below the threshold;
- busy when any GPU reached the threshold (one busy rank of a gang keeps the gang busy; a
  bursty job's burst keeps its window busy, so gaps shorter than a window never count);
- unknown when a GPU the job holds did not report at all (metrics missing or stale).

The job's idle time is the length of the run of idle windows that ends with the latest
complete window: a busy or unknown window ends the run, so the count starts again from
zero. A job whose latest window is unknown cannot be judged: reclaim pauses for it, and a
Prometheus that cannot be asked pauses it for every job. Memory held does not make a GPU
busy: a job that squats on GPU memory at 0 % activity is idle.

The threshold is the policy's (``threshold_percent``: a flavor's or team's, else
``IDLE_GPU_THRESHOLD_PERCENT``, else 5 % where no policy sets one), and what the pages count
as a GPU idle now is this same rule on the latest window (``idle_gpus_promql``): the quota
console's "idle GPUs now" and the reclaim never disagree on what idle is.
"""

from __future__ import annotations

import enum
import math
import re
from collections import defaultdict
from dataclasses import dataclass

from cluster.prometheus import PrometheusUnavailable
from quotas.models.idle import IdleRules, default_rules
from workloads import kinds

ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # 0..1
UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"  # percent
# Labels that tell one GPU (or MIG slice) of a pod from another.
GPU_LABELS = ("Hostname", "gpu", "UUID", "GPU_I_ID")


# The threshold where no policy sets one (reclaim off): what the pages still count idle.
DEFAULT_THRESHOLD_PERCENT = 5.0
# Why a job is not judged yet: it has not run one whole window (no metric is missing).
TOO_YOUNG = "Running for less than one window."


class Window(enum.Enum):
    IDLE = "idle"
    BUSY = "busy"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Reading:
    """What the windows say of one job at one moment."""

    idle_seconds: int  # the run of idle windows ending with the latest one
    run_start: float | None  # when that run began (unix seconds); None when it is empty
    last_busy: float | None  # when the latest busy window ended; None if none was seen
    paused: str = ""  # why the job cannot be judged now ("" when it can)

    @property
    def known(self) -> bool:
        return not self.paused


def window_states(samples: dict[str, dict[float, float]], *, gpus: int, ends: list[float],
                  threshold_percent: float) -> list[Window]:
    """Each window's state, given, per GPU, the highest activity (percent) of each window by
    its end time. ``gpus``: how many GPUs the job holds (a GPU without any series is missing)."""
    states = []
    for end in ends:
        values = [per_window[end] for per_window in samples.values() if end in per_window]
        if gpus <= 0 or len(values) < gpus or any(math.isnan(v) for v in values):
            states.append(Window.UNKNOWN)
        elif all(v < threshold_percent for v in values):
            states.append(Window.IDLE)
        else:
            states.append(Window.BUSY)
    return states


def reading(states: list[Window], ends: list[float], window_seconds: int, *, stale: str = "") -> Reading:
    """The idle run ending with the latest window, and when the latest busy window ended."""
    last_busy = next((end for end, state in zip(reversed(ends), reversed(states), strict=True)
                      if state is Window.BUSY), None)
    if not states or states[-1] is Window.UNKNOWN:
        return Reading(0, None, last_busy, paused=stale or "No GPU metrics for this job's GPUs in the latest window.")
    run = 0
    for state in reversed(states):
        if state is not Window.IDLE:
            break
        run += 1
    start = ends[-run] - window_seconds if run else None
    return Reading(run * window_seconds, start, last_busy)


def window_ends(now: float, window_seconds: int, since: float) -> list[float]:
    """The ends of the complete windows after ``since`` (a window that began before it does
    not count), up to ``now``, oldest first."""
    last = math.floor(now / window_seconds) * window_seconds
    first = math.ceil(since / window_seconds) * window_seconds + window_seconds
    return [float(end) for end in range(int(first), int(last) + 1, window_seconds)]


def threshold_percent(rules: IdleRules | None = None) -> float:
    """Percent below which a GPU is idle in a window: the policy's (``rules``; by default the
    settings', ``IDLE_GPU_THRESHOLD_PERCENT``), else ``DEFAULT_THRESHOLD_PERCENT``."""
    rules = rules or default_rules()
    return float(rules.threshold_percent) if rules.threshold_percent is not None else DEFAULT_THRESHOLD_PERCENT


def activity_promql(where: str, window_seconds: int) -> str:
    """Per GPU (series ``{where}``), the highest activity (percent) in the window ending at
    each evaluation: profiling metrics where a GPU has them, its utilization where it does not."""
    span = f"{window_seconds}s"
    return (f"max_over_time({ACTIVITY}{{{where}}}[{span}]) * 100"
            f" or max_over_time({UTILIZATION}{{{where}}}[{span}])")


def promql(namespaces: list[str], window_seconds: int) -> str:
    """The sweep's range query: `activity_promql` for the pods of ``namespaces``."""
    # Namespaces are DNS-1123 labels ([a-z0-9-]): nothing in them a regular expression or a
    # PromQL string would read as special.
    return activity_promql(f'namespace=~"{"|".join(sorted(set(namespaces)))}",pod!=""', window_seconds)


def idle_gpus_promql(where: str, window_seconds: int, threshold: float) -> str:
    """Per namespace, how many GPUs (series ``{where}``) were idle in the latest window: the
    windows' rule (`window_states`: below the threshold all window long), now."""
    return f"count by (namespace) (({activity_promql(where, window_seconds)}) < {threshold:g})"


def gpu_key(labels: dict[str, str]) -> str:
    return "/".join(labels.get(name, "") for name in GPU_LABELS)


def measure(prometheus, jobs, *, now: float, window_seconds: int, lookback_seconds: dict[int, int],
            thresholds: dict[int, int]) -> dict[int, Reading]:
    """A `Reading` for each running job, from one range query for all of them.

    ``lookback_seconds[job.pk]``: how far back its windows matter (its idle time plus its
    grace, at least); ``thresholds[job.pk]``: its policy's threshold (percent). Prometheus
    not configured or not answering pauses every job, with the reason it gives."""
    jobs = list(jobs)
    if not jobs:
        return {}
    if prometheus is None:
        return {job.pk: Reading(0, None, None, paused="GPU metrics are not configured (PROMETHEUS_URL).")
                for job in jobs}
    since = {job.pk: max(job.started_at.timestamp(), now - lookback_seconds[job.pk]) for job in jobs}
    ends_of = {job.pk: window_ends(now, window_seconds, since[job.pk]) for job in jobs}
    start = min((ends[0] for ends in ends_of.values() if ends), default=None)
    if start is None:  # no job has run a whole window yet
        return {job.pk: Reading(0, None, None, paused=TOO_YOUNG) for job in jobs}
    end = max(ends[-1] for ends in ends_of.values() if ends)
    try:
        series = prometheus.query_range(promql([job.team.namespace_name for job in jobs], window_seconds),
                                        start, end, window_seconds)
    except PrometheusUnavailable as err:
        return {job.pk: Reading(0, None, None, paused=err.reason) for job in jobs}
    samples = _samples_by_job(series, jobs)
    return {job.pk: _reading_of(job, samples.get(job.pk, {}), ends_of[job.pk], window_seconds, thresholds[job.pk])
            for job in jobs}


def _samples_by_job(series, jobs) -> dict[int, dict[str, dict[float, float]]]:
    """Per job, per GPU (``pod/gpu key``), the highest value at each window's end, from the
    series of its namespace whose pod its kind's pod pattern matches."""
    patterns = {job.pk: (job.team.namespace_name, re.compile(kinds.for_job(job).pod_pattern(job))) for job in jobs}
    samples: dict[int, dict[str, dict[float, float]]] = defaultdict(dict)
    for one in series:
        namespace, pod = one.labels.get("namespace", ""), one.labels.get("pod", "")
        for job_id, (job_namespace, pattern) in patterns.items():
            if namespace == job_namespace and pattern.fullmatch(pod):
                per_window = samples[job_id].setdefault(f"{pod}/{gpu_key(one.labels)}", {})
                for at, value in one.points:
                    per_window[float(round(at))] = max(value, per_window.get(float(round(at)), -1.0))
                break
    return samples


def _reading_of(job, samples: dict[str, dict[float, float]], ends: list[float], window_seconds: int,
                threshold_percent: int) -> Reading:
    if not ends:
        return Reading(0, None, None, paused=TOO_YOUNG)
    states = window_states(samples, gpus=job.gpus_in_use, ends=ends, threshold_percent=threshold_percent)
    return reading(states, ends, window_seconds)
