"""Prometheus exposition: what is read from the database at scrape time, and the Celery
signal handlers that count task runs into `core.metrics`.

Three places serve metrics, none of them public:
- the web processes at ``/metrics`` with a bearer token (``gpuplatform.health``): jobs by
  state, team and flavor and the submit -> admission / start histograms, computed from the
  rows at each scrape, so every web replica answers the same and a restart resets nothing;
- the Celery worker on METRICS_PORT (started by ``worker_init``): reconcile runs, writes,
  errors and durations, task failures and retries. With PROMETHEUS_MULTIPROC_DIR set (the
  chart sets it) the prefork children's counters are summed by prometheus-client's
  multiprocess mode;
- the status watcher on METRICS_PORT (``manage.py watch_cluster``): lag, watch restarts,
  job updates, leadership.
"""

from __future__ import annotations

import logging
import os
import time

from celery.signals import task_failure, task_postrun, task_prerun, task_retry, worker_init, worker_process_shutdown
from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from core.metrics import (
    RECONCILE_DURATION,
    RECONCILE_ERRORS,
    RECONCILE_RUNS,
    RECONCILE_WRITES,
    TASK_FAILURES,
    TASK_RETRIES,
)
from jobs.models import Job

log = logging.getLogger(__name__)

# Seconds from submission to admission or start: from instant to a day in the queue.
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


class JobCollector:
    """Jobs by state, team and flavor, and the waiting-time histograms, from the rows.

    Three aggregate queries per scrape whatever the number of jobs. The histograms count
    every job that was ever admitted (or started), so they only grow, as a Prometheus
    histogram must, and `rate()` over them gives recent waits.
    """

    def collect(self):
        jobs = GaugeMetricFamily("gpuplatform_jobs", "Jobs by lifecycle state, team and GPU flavor.",
                                 labels=["state", "team", "flavor"])
        rows = Job.objects.values("state", "team__slug", "flavor__name").annotate(n=Count("pk")).order_by()
        for row in rows:
            jobs.add_metric([row["state"], row["team__slug"], row["flavor__name"]], row["n"])
        yield jobs
        yield self._waits("gpuplatform_job_admission_wait_seconds",
                          "Time from submission to admission by the scheduler.", "admitted_at")
        yield self._waits("gpuplatform_job_start_wait_seconds",
                          "Time from submission to the job running.", "started_at")

    @staticmethod
    def _waits(name: str, documentation: str, until: str) -> HistogramMetricFamily:
        from datetime import timedelta

        wait = ExpressionWrapper(F(until) - F("submitted_at"), output_field=DurationField())
        buckets = {f"le_{i}": Count("pk", filter=Q(wait__lte=timedelta(seconds=le))) for i, le in enumerate(WAIT_BUCKETS)}
        rows = (Job.objects.filter(submitted_at__isnull=False, **{f"{until}__isnull": False})
                .annotate(wait=wait).values("flavor__name")
                .annotate(total=Count("pk"), seconds=Sum("wait"), **buckets).order_by())
        family = HistogramMetricFamily(name, documentation, labels=["flavor"])
        for row in rows:
            cumulative = [(str(float(le)), row[f"le_{i}"]) for i, le in enumerate(WAIT_BUCKETS)]
            total_seconds = row["seconds"].total_seconds() if row["seconds"] is not None else 0.0
            family.add_metric([row["flavor__name"]], cumulative + [("+Inf", row["total"])], total_seconds)
        return family


_job_registry = CollectorRegistry(auto_describe=False)
_job_registry.register(JobCollector())


def web_exposition() -> tuple[bytes, str]:
    """The body of the web's ``/metrics``: the database's view plus this process's own."""
    return generate_latest(_job_registry) + generate_latest(REGISTRY), CONTENT_TYPE_LATEST


# --- Celery --------------------------------------------------------------------------------
_started: dict[str, float] = {}


def _is_reconcile(task_name: str) -> bool:
    return ".reconcile_" in task_name or task_name.endswith(".sweep")


@task_prerun.connect
def _task_started(task_id=None, task=None, **_):
    _started[task_id] = time.monotonic()


@task_postrun.connect
def _task_finished(task_id=None, task=None, retval=None, state=None, **_):
    started = _started.pop(task_id, None)
    if task is None or not _is_reconcile(task.name):
        return
    outcome = {"SUCCESS": "ok", "RETRY": "retry"}.get(state, "error")
    RECONCILE_RUNS.labels(task.name, outcome).inc()
    if started is not None:
        RECONCILE_DURATION.labels(task.name).observe(time.monotonic() - started)
    if state == "SUCCESS" and isinstance(retval, int) and not isinstance(retval, bool):
        RECONCILE_WRITES.labels(task.name).inc(retval)


@task_retry.connect
def _task_retried(sender=None, reason=None, **_):
    name = getattr(sender, "name", "unknown")
    TASK_RETRIES.labels(name).inc()
    if _is_reconcile(name):
        RECONCILE_ERRORS.labels(name, reason.__class__.__name__ if isinstance(reason, BaseException) else "Retry").inc()


@task_failure.connect
def _task_failed(sender=None, exception=None, **_):
    name = getattr(sender, "name", "unknown")
    TASK_FAILURES.labels(name).inc()
    if _is_reconcile(name):
        RECONCILE_ERRORS.labels(name, exception.__class__.__name__).inc()


@worker_init.connect
def _serve_worker_metrics(**_):
    port = settings.METRICS_PORT
    if not port:
        return
    from prometheus_client import start_http_server

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    start_http_server(port, registry=registry)
    log.info("worker metrics on port %s", port)


@worker_process_shutdown.connect
def _forget_worker_process(pid=None, **_):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())
