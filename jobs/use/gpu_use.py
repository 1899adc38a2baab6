"""Used and idle GPU-hours: the one rule, and the sampler that records them (``GpuUse``).

The definitions (docs/console.md, "Used and idle GPU-hours"):

- **allocated** GPU time is what ``GpuInterval`` says a job held: GPUs x seconds;
- a **sample** covers the stretch of an interval since the last one (at most ``window()``
  seconds back: a longer gap, with the sampler stopped or Prometheus away, stays
  unmeasured). It reads, in one Prometheus query for every job, each GPU's mean
  ``DCGM_FI_DEV_GPU_UTIL`` (percent of time the GPU was busy, as dcgm-exporter reports it)
  over the last ``window()`` seconds, for the GPUs dcgm-exporter gives to the job's pods;
- **measured** GPU time = the stretch x the interval's GPUs, when at least one of the job's
  GPUs reported; otherwise the stretch is unmeasured (neither used nor idle);
- **used** GPU time = measured GPU time x the mean utilization of the job's reporting GPUs
  (allocated GPU time x measured utilization over it);
- **idle** GPU time = measured GPU time x the share of the job's reporting GPUs whose mean
  stayed below ``idle_threshold()`` percent over the window.

So used <= measured <= allocated, and idle <= measured. Kept per interval and calendar day,
the report sums them beside the allocated GPU-hours (``console.accounting``). A sample moves
the interval's ``measured_until`` by compare-and-swap first: two samplers never count the
same seconds twice.

``idle_gpus_now`` counts, per team, the GPUs of its pods that are idle now (one query):
what the team page and the quota managers' console show. Idle is the reclaim's one
definition (`jobs.use.idle`): the same threshold (``idle_threshold``, `idle.threshold_percent`)
and, for "now", the same rule on the latest window of ``IDLE_GPU_WINDOW_SECONDS``.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cluster.prometheus import Prometheus, PrometheusUnavailable, configured_prometheus
from tenants.models import Team

from ..models import GpuInterval, GpuUse
from . import idle
from .telemetry import GPU_UTIL, PodIndex

log = logging.getLogger(__name__)

UTILIZATION = GPU_UTIL  # percent, 0-100, per GPU
# A page waits at most this long for Prometheus (or PROMETHEUS_TIMEOUT_SECONDS if shorter),
# so with Prometheus slow or away a page still answers within 2 s, saying so. The door
# passes it on to Prometheus in milliseconds ("1500ms"), which it reads, fraction and all.
PAGE_SECONDS = 1.5
UNAVAILABLE = "GPU metrics unavailable: {reason}"


def for_pages() -> Prometheus:
    """The configured Prometheus, waiting at most ``PAGE_SECONDS`` a query; raises
    ``PrometheusUnavailable`` when none is configured."""
    return _with_timeout(configured_prometheus(), PAGE_SECONDS)


@functools.lru_cache(maxsize=4)
def _with_timeout(prometheus: Prometheus, seconds: float) -> Prometheus:
    if prometheus.timeout <= seconds:
        return prometheus
    shorter = copy.copy(prometheus)  # the same server and credentials (and connection pools)
    shorter.timeout = seconds
    return shorter


def unavailable(err: PrometheusUnavailable) -> str:
    """The one line a page shows when it has no GPU metrics."""
    return UNAVAILABLE.format(reason=err.reason)


# Percent below which a GPU counts idle: the reclaim's (the settings' policy, else 5 %), for
# the pages, the API and the sampler's idle GPU-hours.
idle_threshold = idle.threshold_percent


def window() -> int:
    """Seconds a sample looks back: two sampling periods, so a late sample loses nothing."""
    return 2 * settings.GPU_USE_SAMPLE_SECONDS


@dataclass(frozen=True)
class Use:
    """GPU-seconds of one stretch: measured, used and idle (the module's definitions)."""

    measured: float
    used: float
    idle: float


def use_of(gpus: int, seconds: float, percents: list[float], threshold: float) -> Use:
    """The rule: ``gpus`` held for ``seconds`` while the job's reporting GPUs averaged
    ``percents`` (none: unmeasured, all zero)."""
    if not percents or seconds <= 0 or gpus <= 0:
        return Use(0.0, 0.0, 0.0)
    measured = gpus * seconds
    mean = sum(min(100.0, max(0.0, p)) for p in percents) / len(percents)
    idle_share = sum(1 for p in percents if p < threshold) / len(percents)
    return Use(measured, measured * mean / 100.0, measured * idle_share)


def split_by_day(start: datetime, end: datetime, tz=None) -> list[tuple]:
    """(local day, seconds) of [start, end) on each calendar day in ``tz`` (default: the
    platform's, the accounting's days)."""
    tz = tz or timezone.get_default_timezone()
    pieces, cursor = [], start
    while cursor < end:
        local = timezone.localtime(cursor, tz)
        midnight = timezone.make_aware(datetime.combine(local.date() + timedelta(days=1), time.min), tz)
        stop = min(end, midnight)
        pieces.append((local.date(), (stop - cursor).total_seconds()))
        cursor = stop
    return pieces


def _selector(namespaces) -> str:
    names = "|".join(sorted(re.escape(n) for n in set(namespaces)))
    return f'namespace=~"{names}",pod!=""'


def job_percents(prometheus, jobs, lookback: str) -> dict:
    """job id -> the mean utilization over ``lookback`` of each GPU of its pods: one query."""
    index = PodIndex(jobs)
    if not index:
        return {}
    percents: dict = {}
    for sample in prometheus.query(f"avg_over_time({UTILIZATION}{{{index.matchers()}}}[{lookback}])"):
        job = index.job_of(sample.labels)
        if job is not None and sample.value == sample.value:  # not NaN
            percents.setdefault(job.pk, []).append(sample.value)
    return percents


def sample(now: datetime | None = None) -> dict:
    """Record the GPU use of every interval open now or ended since its last sample: one
    Prometheus query, then a compare-and-swap and a ``GpuUse`` row per interval and day.
    Raises ``PrometheusUnavailable`` (nothing recorded: the gap stays unmeasured)."""
    now = now or timezone.now()
    back = timedelta(seconds=window())
    intervals = list(
        GpuInterval.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=now - back), started_at__lt=now)
        .filter(Q(measured_until__isnull=True) | Q(measured_until__lt=now))
        .select_related("job", "job__team", "job__flavor"))
    intervals = [i for i in intervals if i.ended_at is None or (i.measured_until or i.started_at) < i.ended_at]
    if not intervals:
        return {"intervals": 0}
    jobs = {interval.job_id: interval.job for interval in intervals}
    percents = job_percents(configured_prometheus(), jobs.values(), f"{window()}s")
    threshold = idle_threshold()
    recorded = 0
    for interval in intervals:
        seen = interval.measured_until
        start = max(seen or interval.started_at, interval.started_at, now - back)
        end = min(interval.ended_at or now, now)
        with transaction.atomic():
            moved = GpuInterval.objects.filter(pk=interval.pk, measured_until=seen) if seen else \
                GpuInterval.objects.filter(pk=interval.pk, measured_until__isnull=True)
            if not moved.update(measured_until=end):
                continue  # another sampler counted it
            for day, seconds in split_by_day(start, end):
                use = use_of(interval.gpus, seconds, percents.get(interval.job_id, []), threshold)
                if use.measured:
                    GpuUse.objects.add(interval, day, measured=use.measured, used=use.used, idle=use.idle)
            recorded += 1
    return {"intervals": recorded, "jobs_reporting": len(percents)}


def sample_quietly(now: datetime | None = None) -> dict:
    """``sample``, for the beat: Prometheus away is logged, not raised (the next one goes on)."""
    try:
        return sample(now)
    except PrometheusUnavailable as err:
        log.warning("GPU use not sampled: %s", err.reason)
        return {"skipped": err.reason}


def idle_gpus_now(teams=None, *, prometheus: Prometheus | None = None) -> dict:
    """Team slug -> GPUs of its pods idle now (`jobs.use.idle`'s rule on the latest window:
    below the threshold all window long), teams with none left out; one query. ``teams``:
    those to ask about (None: every team). Raises ``PrometheusUnavailable``."""
    prometheus = prometheus or configured_prometheus()
    prefix = settings.TEAM_NAMESPACE_PREFIX
    if teams is None:
        selector = f'namespace=~"{re.escape(prefix)}.+",pod!=""'
    else:
        namespaces = [team.namespace_name for team in teams]
        if not namespaces:
            return {}
        selector = _selector(namespaces)
    samples = prometheus.query(idle.idle_gpus_promql(selector, settings.IDLE_GPU_WINDOW_SECONDS, idle_threshold()))
    counts = {s.labels.get("namespace", "")[len(prefix):]: int(s.value) for s in samples
              if s.labels.get("namespace", "").startswith(prefix) and s.value == s.value}
    counts = {slug: n for slug, n in counts.items() if n > 0}
    if teams is not None:
        known = {team.slug for team in teams}
    else:  # a namespace of the prefix may be no team's: only teams are named
        known = set(Team.objects.filter(slug__in=list(counts)).values_list("slug", flat=True)) if counts else set()
    return {slug: n for slug, n in counts.items() if slug in known}
