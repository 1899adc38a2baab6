"""The platform's Prometheus metrics that code records as it runs (prometheus-client).

Defined once here, below every app, so the watcher (jobs), the Celery signal handlers
(gpuplatform.metrics) and the leader election can all count into them. Metrics read from
the database at scrape time (jobs by state, waiting-time histograms) are a collector in
`gpuplatform.metrics`; the three exposition points are described there.

Label values are bounded sets: task names, watched kinds, error classes. Never a job id.
"""

from prometheus_client import Counter, Gauge, Histogram

# Seconds: from a few hundred milliseconds (an unchanged reconcile) to minutes (a large team).
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

RECONCILE_RUNS = Counter(
    "gpuplatform_reconcile_runs_total", "Reconcile task runs by outcome (ok, retry, error).", ["task", "outcome"]
)
RECONCILE_WRITES = Counter(
    "gpuplatform_reconcile_writes_total", "Objects created, changed or pruned on the cluster by reconcile tasks.",
    ["task"],
)
RECONCILE_ERRORS = Counter(
    "gpuplatform_reconcile_errors_total", "Reconcile task runs that raised, by error class.", ["task", "error"]
)
RECONCILE_DURATION = Histogram(
    "gpuplatform_reconcile_duration_seconds", "Wall time of one reconcile task run.", ["task"],
    buckets=DURATION_BUCKETS,
)
TASK_FAILURES = Counter(
    "gpuplatform_celery_task_failures_total", "Celery tasks that ended in failure (retries exhausted or not retried).",
    ["task"],
)
TASK_RETRIES = Counter("gpuplatform_celery_task_retries_total", "Celery task retries scheduled.", ["task"])

WATCHER_LAG = Histogram(
    "gpuplatform_watcher_lag_seconds",
    "From a watch event marking a job dirty to the watcher having compared it with the database.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
WATCH_RESTARTS = Counter(
    "gpuplatform_watcher_watch_restarts_total", "Watch streams re-opened after an interruption, by kind.", ["kind"]
)
WATCHER_TRANSITIONS = Counter(
    "gpuplatform_watcher_job_updates_total", "Job state changes the watcher wrote to the database."
)
LEADER = Gauge(
    "gpuplatform_leader", "1 while this process holds the named Lease, else 0.", ["lease"]
)
LEADER_TRANSITIONS = Counter(
    "gpuplatform_leader_acquisitions_total", "Times this process became the Lease's holder.", ["lease"]
)
