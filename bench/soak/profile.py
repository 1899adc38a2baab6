"""What one soak run looks like: its length, its scale and where its state lives.

Read from the environment (``SOAK_*``), with no Django import, because the driver must
compute the database URL and the cluster it uses before Django starts. Everything a soak
owns is its own: a PostgreSQL database (``gpuplatform_soak``), a Redis database number,
a local cluster (own state directory and ports: the ``soak`` row of deploy/stack/profiles.py)
and a log folder, so it never collides with the test suite, the demo or the benchmarks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from deploy.stack import profiles

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SH = ROOT / "deploy" / "local-cluster" / "cluster.sh"
CACHE = profiles.cache_dir()
# The soak's Redis database and its own cluster (state directory, port offset).
STACK = profiles.get("soak")


def _number(name: str, default: float, minimum: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SystemExit(f"{name}={raw} is below the minimum of {minimum}")
    return value


def _with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


@dataclass(frozen=True)
class Profile:
    minutes: float
    jobs_per_kind: int
    sweep_seconds: int
    lag_budget_seconds: float
    seed: int
    api_port: int
    database_url: str
    redis_url: str
    cluster_dir: Path
    logs: Path
    keep: bool
    stop_cluster: bool
    env: dict = field(default_factory=dict)
    cluster_port_offset: int = STACK.port_offset  # make bench-e2e runs a cluster of its own too

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def full(self) -> bool:
        """The default length runs a mid-run quiet window too; short runs only the last."""
        return self.minutes >= 5

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def database_name(self) -> str:
        return urlsplit(self.database_url).path.lstrip("/")

    def at(self, fraction: float) -> float:
        """Seconds into the run of a point given as a fraction of its length."""
        return self.seconds * fraction


def load(environ=os.environ) -> Profile:
    minutes = _number("SOAK_MINUTES", 10, 1)
    # At least 50 jobs of every kind at the default length; fewer in a short run.
    default_jobs = 50 if minutes >= 5 else max(8, int(minutes * 8))
    base_db = environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:55432/gpuplatform"
    if not base_db.startswith("postgres"):
        raise SystemExit("the soak needs PostgreSQL (several processes write at once): set DATABASE_URL "
                         "or let scripts/services.sh start the test servers")
    base_redis = environ.get("REDIS_URL") or "redis://127.0.0.1:56379/0"
    logs = Path(environ.get("SOAK_LOG_DIR", ROOT / "var" / "soak"))
    return Profile(
        minutes=minutes,
        jobs_per_kind=int(_number("SOAK_JOBS_PER_KIND", default_jobs, 4)),
        # A sweep every few seconds compresses a day of five-minute sweeps into minutes.
        sweep_seconds=int(_number("SOAK_SWEEP_SECONDS", 5, 2)),
        lag_budget_seconds=_number("SOAK_LAG_BUDGET_SECONDS", 10, 1),
        seed=int(_number("SOAK_SEED", 11, 0)),
        api_port=int(_number("SOAK_API_PORT", 18765, 1024)),
        database_url=_with_path(base_db, "/" + environ.get("SOAK_DATABASE", "gpuplatform_soak")),
        redis_url=STACK.redis_url(base_redis),
        cluster_dir=Path(environ.get("SOAK_CLUSTER_DIR") or STACK.cluster_dir),
        logs=logs,
        keep=environ.get("SOAK_KEEP", "") == "1",
        stop_cluster=environ.get("GPUPLATFORM_CLUSTER_STOP", "") == "1",
    )


def cluster_env(profile: Profile) -> dict:
    """Environment for cluster.sh so it drives the soak's own cluster."""
    return {
        "GPUPLATFORM_CLUSTER_DIR": str(profile.cluster_dir),
        "GPUPLATFORM_CLUSTER_PORT_OFFSET": str(profile.cluster_port_offset),
    }


# The soak's idle-GPU policy: idle 20 s, reclaimed 20 s after the warning, 10 s windows,
# a sweep every 5 s.
IDLE_POLICY = {"THRESHOLD_PERCENT": 5, "AFTER_SECONDS": 20, "GRACE_SECONDS": 20, "WINDOW_SECONDS": 10,
               "SWEEP_SECONDS": 5}


def platform_env(profile: Profile, cluster: dict) -> dict:
    """Environment of every platform process the soak starts (and of the driver itself);
    `cluster` is what `cluster.sh up --json` said (processes.cluster_up)."""
    return {
        "DJANGO_SETTINGS_MODULE": "gpuplatform.settings",
        # This checkout's code, whatever the virtualenv's editable install points at.
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": profile.database_url,
        "REDIS_URL": profile.redis_url,
        "CELERY_BROKER_URL": profile.redis_url,
        "CELERY_RESULT_BACKEND": profile.redis_url,
        "KUBECONFIG": cluster["kubeconfig"],
        "SWEEP_INTERVAL_SECONDS": str(profile.sweep_seconds),
        # GPU telemetry from the soak cluster's Prometheus, and idle-GPU reclaim in seconds
        # (plan.py's idle scenes; checks.idle_rows).
        "PROMETHEUS_URL": cluster["prometheus_url"],
        **{f"IDLE_GPU_{name}": str(value) for name, value in IDLE_POLICY.items()},
        # Production-like: DEBUG off (so a secret key is needed), several writers.
        "DEBUG": "false",
        "SECRET_KEY": "soak-only-not-secret",
        "SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback, no TLS proxy in front
        "WEB_CONCURRENCY": "2",
        "CELERY_WORKER_CONCURRENCY": "8",  # threads (CELERY_WORKER_POOL's default): reconciles in flight
        "LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
