"""``make bench-api``: the REST API under load, against gunicorn and PostgreSQL.

1. create (or reuse) a database ``bench`` on the test PostgreSQL server, migrate it and
   fill it with 100,000 jobs;
2. start gunicorn on a free loopback port;
3. with 20 concurrent clients (keep-alive connections), time ``GET /api/v1/ping`` (the
   framework floor: Django + DRF, no credentials, no database), ``GET /api/v1/jobs`` and
   ``POST /api/v1/jobs``, each for a fixed number of requests;
4. print p50/p99 latency, requests per second and the ratio to the floor, and the number
   of SQL queries a job list costs at page sizes 10 and 200 (must be equal: no N+1).

A benchmark, not a test: it asserts nothing about time. The load generator runs on the
same machine as the server, so absolute numbers include its CPU.
"""

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOBS = int(os.environ.get("BENCH_JOBS", "100000"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "20"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "2000"))  # per scenario, shared by the clients
WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))


def main() -> int:
    env = _environment()
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    token = _seed()
    query_counts = _list_query_counts()
    port = _free_port()
    server = subprocess.Popen(
        [str(ROOT / ".venv/bin/gunicorn"), "gpuplatform.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(WORKERS), "--worker-class", "gthread", "--threads", str(THREADS), "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, **env},
    )
    try:
        _wait_until_up(port)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        results = {
            "GET /api/v1/ping (floor)": _load(port, lambda i: ("GET", "/api/v1/ping", None, {})),
            "GET /api/v1/jobs": _load(port, lambda i: ("GET", "/api/v1/jobs?page_size=50", None, headers)),
            "POST /api/v1/jobs": _load(port, lambda i: ("POST", "/api/v1/jobs", _job_body(), {
                **headers, "Idempotency-Key": str(uuid.uuid4())})),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)
        _drop_queued_reconciles(env["REDIS_URL"])
    _report(results, query_counts)
    return 0


def _environment() -> dict:
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:55432/gpuplatform")
    parts = urllib.parse.urlsplit(base)
    _ensure_database(parts, "bench")
    redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:56379/0").rsplit("/", 1)[0] + "/14"
    return {
        "DJANGO_SETTINGS_MODULE": "gpuplatform.settings",
        "DATABASE_URL": urllib.parse.urlunsplit(parts._replace(path="/bench")),
        "REDIS_URL": redis,
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-" + "x" * 40,
        "SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback, no TLS proxy in front
        "WEB_CONCURRENCY": str(WORKERS),
        "API_THROTTLE_RATE": "1000000/minute",
        "LOG_LEVEL": "WARNING",
    }


def _ensure_database(parts, name: str) -> None:
    import psycopg

    admin = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _seed() -> str:
    """Migrate; make one team, flavor and quota, and JOBS jobs (once); return a fresh token."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from jobs.models import Job
    from quotas.models import GpuFlavor, Quota
    from tenants.models import Membership, Team
    from tenants.tokens import ApiToken

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    team, _ = Team.objects.get_or_create(slug="bench", defaults={"display_name": "Bench"})
    Membership.objects.get_or_create(team=team, user=user, defaults={"role": Membership.Role.OWNER})
    flavor, _ = GpuFlavor.objects.get_or_create(
        name="h100", defaults=dict(resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8))
    Quota.objects.get_or_create(team=team, flavor=flavor, defaults=dict(nominal_gpus=64, cpu_cores=512, memory_gib=4096))
    missing = JOBS - Job.objects.filter(team=team).count()
    if missing > 0:
        print(f"seeding {missing} jobs ...", flush=True)
        batch = [
            Job(team=team, submitter=user, flavor=flavor, name=f"seed-{uuid.uuid4().hex[:12]}",
                image="ghcr.io/example/train:1", command=["python"], args=["train.py"],
                state=Job.State.SUCCEEDED, reason="Finished")
            for _ in range(missing)
        ]
        Job.objects.bulk_create(batch, batch_size=5000)
    return ApiToken.objects.issue(user=user, team=team, name="bench")[1]


def _list_query_counts() -> dict[int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from tenants.tokens import ApiToken

    token = ApiToken.objects.issue(user=ApiToken.objects.filter(name="bench").first().user, name="bench-q")[1]
    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.get("/api/v1/jobs")  # warm up: the token's first use writes last_used_at
    counts = {}
    for size in (10, 200):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/api/v1/jobs", {"page_size": size}).status_code == 200
        counts[size] = len(ctx.captured_queries)
    return counts


def _job_body() -> str:
    return json.dumps({"team": "bench", "name": f"b-{uuid.uuid4().hex[:16]}", "flavor": "h100",
                       "image": "ghcr.io/example/train:1", "command": ["python"], "args": ["train.py"]})


def _load(port: int, make_request) -> dict:
    latencies: list[float] = []
    failures = []
    lock = threading.Lock()
    counter = iter(range(REQUESTS))

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            method, path, body, headers = make_request(i)
            start = time.perf_counter()
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            mine.append(time.perf_counter() - start)
            if response.status >= 300:
                failures.append(response.status)
        conn.close()
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "rps": len(latencies) / elapsed,
        "errors": len(failures),
    }


def _report(results: dict, query_counts: dict) -> None:
    floor = results["GET /api/v1/ping (floor)"]
    print(f"\n{JOBS} jobs in the database, {CLIENTS} concurrent clients, {REQUESTS} requests per endpoint, "
          f"gunicorn {WORKERS} workers x {THREADS} threads\n")
    print(f"{'endpoint':<28} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'p50/floor':>10} {'rps/floor':>10} {'errors':>7}")
    for name, r in results.items():
        print(f"{name:<28} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['rps']:8.0f} "
              f"{r['p50_ms'] / floor['p50_ms']:10.1f} {r['rps'] / floor['rps']:10.2f} {r['errors']:7d}")
    print(f"\nSQL queries for one job list page: page_size=10 -> {query_counts[10]}, "
          f"page_size=200 -> {query_counts[200]}" + ("  (constant: no N+1)" if query_counts[10] == query_counts[200] else "  (GROWS: N+1!)"))


def _drop_queued_reconciles(url: str) -> None:
    """No worker consumes the bench's broker database: drop what the POSTs enqueued."""
    import redis

    redis.Redis.from_url(url).delete("celery")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/v1/ping")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not start")


if __name__ == "__main__":
    sys.exit(main())
