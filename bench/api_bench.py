"""``make bench-api``: the REST API under load, against gunicorn and PostgreSQL.

1. prepare two databases on the test PostgreSQL server (once; later runs reuse them):
   ``bench`` with 100,000 jobs in the bench team, and ``bench_1m`` with the same team
   plus 900,000 jobs of 999 other teams (BENCH_JOBS, BENCH_JOBS_LARGE; 0 skips the large
   one). Each preparation also counts the SQL queries of one request per endpoint;
2. start gunicorn on each in turn, on a free loopback port;
3. with 20 concurrent clients (keep-alive connections) and a team token, time
   ``GET /api/v1/ping`` (the framework floor: Django + DRF, no credentials, no database),
   then list, retrieve, events, submit and cancel, each for a fixed number of requests;
   on the large database the floor and the list again;
4. print p50/p95/p99 latency, requests per second and the ratios to the floor, write
   bench/results/api.md, and end with one ``RESULT api ...`` line.

A benchmark, not a test: it asserts nothing about time. The load generator runs on the
same machine as the server, so absolute numbers include its CPU; ratios to the floor are
measured in the same run.
"""

import datetime
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import load, machine  # noqa: E402
from bench.postgres import ensure_database  # noqa: E402
from deploy.stack import profiles  # noqa: E402

JOBS = int(os.environ.get("BENCH_JOBS", "100000"))
JOBS_LARGE = int(os.environ.get("BENCH_JOBS_LARGE", "1000000"))
OTHER_TEAMS = 999
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "20"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "2000"))  # per scenario, shared by the clients
WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RESULTS = ROOT / "bench" / "results" / "api.md"
BODY = {"flavor": "h100", "image": "ghcr.io/example/train:1", "command": ["python"], "args": ["train.py"]}


def main() -> int:
    if sys.argv[1:2] == ["--prepare"]:
        return _prepare(int(sys.argv[2]))
    started = datetime.datetime.now(datetime.UTC)
    small = _prepared("bench", JOBS)
    runs = {"small": _run(small, _scenarios(small))}
    if JOBS_LARGE > JOBS:
        large = _prepared("bench_1m", JOBS_LARGE)
        runs["large"] = _run(large, lambda port, headers: {"list": _load(port, _list_request(headers))})
    _report(started, small, runs)
    return 0


# --- the databases (a child process per database: Django binds one at setup) -------------
def _environment(database: str) -> dict:
    url = ensure_database(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:55432/gpuplatform"), database)
    redis = profiles.get("bench-api").redis_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:56379/0"))
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpuplatform.settings",
        "DATABASE_URL": url,
        "REDIS_URL": redis,
        "CELERY_BROKER_URL": redis,
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-" + "x" * 40,
        "SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback, no TLS proxy in front
        "WEB_CONCURRENCY": str(WORKERS),
        "API_THROTTLE_RATE": "1000000/minute",
        "LOG_LEVEL": "WARNING",
    }


def _prepared(database: str, jobs: int) -> dict:
    env = _environment(database)
    print(f"preparing database {database} ({jobs:,} jobs) ...", flush=True)
    out = subprocess.run([sys.executable, __file__, "--prepare", str(jobs)], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    return {**json.loads(out.strip().splitlines()[-1]), "env": env, "database": database, "jobs": jobs}


def _prepare(jobs: int) -> int:
    """In the child: migrate, seed, count each endpoint's queries; print what the load needs."""
    import django

    django.setup()
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
    # The jobs earlier runs submitted (no worker ran them): each run starts from the same queue.
    Job.objects.filter(team=team, name__startswith="b-").delete()
    ApiToken.objects.filter(user=user).delete()
    template = Job.objects.filter(team=team, name="seed-template").first() or Job.objects.create(
        team=team, submitter=user, flavor=flavor, name="seed-template", image="ghcr.io/example/train:1",
        command=["python"], args=["train.py"], state=Job.State.SUCCEEDED, reason="Finished")
    _seed(template, [team], min(jobs, JOBS))
    if jobs > JOBS:
        others = [Team.objects.get_or_create(slug=f"bench-other-{i:03d}", defaults={"display_name": f"Other {i}"})[0]
                  for i in range(OTHER_TEAMS)]
        _seed(template, others, jobs - JOBS)
    token = ApiToken.objects.issue(user=user, team=team, name="bench")[1]
    print(json.dumps({"token": token, "queries": _queries(token, team), "profile": _profile(token, team)}),
          flush=True)
    return 0


def _seed(template, teams: list, wanted: int) -> None:
    """Copies of ``template`` in SQL, spread over ``teams``, until they hold ``wanted`` jobs."""
    from django.db import connection

    from jobs.models import Job

    missing = wanted - Job.objects.filter(team__in=teams).count()
    if missing <= 0:
        return
    columns = [f.column for f in Job._meta.concrete_fields if not f.primary_key]
    team_ids = "ARRAY[" + ",".join(str(t.pk) for t in teams) + "]::bigint[]"
    values = [{"team_id": f"({team_ids})[1 + mod(g, {len(teams)})]", "name": "'seed-' || md5(g::text || clock_timestamp()::text)"}
              .get(c, f'"{c}"') for c in columns]
    batch = 100_000
    for done in range(0, missing, batch):
        with connection.cursor() as cursor:
            cursor.execute(
                f'INSERT INTO jobs_job ({", ".join(chr(34) + c + chr(34) for c in columns)}) '
                f'SELECT {", ".join(values)} FROM jobs_job, generate_series(1, %s) AS g WHERE jobs_job.id = %s',
                [min(batch, missing - done), template.pk])
        print(f"  seeded {min(done + batch, missing):,} of {missing:,} jobs", file=sys.stderr, flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")


def _queries(token: str, team) -> dict:
    """SQL queries of one request per endpoint (after a first one, as on a warm worker)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.get("/api/v1/jobs")  # the token's first use writes last_used_at
    job = client.post("/api/v1/jobs", {**BODY, "team": team.slug, "name": "b-queries"}, format="json").json()["id"]
    requests = {
        "ping": lambda: client.get("/api/v1/ping"),
        "list (10 a page)": lambda: client.get("/api/v1/jobs", {"page_size": 10}),
        "list (200 a page)": lambda: client.get("/api/v1/jobs", {"page_size": 200}),
        "retrieve": lambda: client.get(f"/api/v1/jobs/{job}"),
        "events": lambda: client.get(f"/api/v1/jobs/{job}/events"),
        "submit": lambda: client.post("/api/v1/jobs", {**BODY, "team": team.slug, "name": f"b-{uuid.uuid4().hex[:16]}"},
                                      format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())),
        "cancel": lambda: client.post(f"/api/v1/jobs/{job}/cancel"),
    }
    counts = {}
    for name, request in requests.items():
        with CaptureQueriesContext(connection) as ctx:
            status = request().status_code
        assert status < 300, (name, status)
        counts[name] = len(ctx.captured_queries)
    return counts


# Where a request's time goes: (stage, file, function) whose cumulative time is counted;
# a stage that runs inside another (NESTED) is taken out of it. What is left is Django's
# and DRF's own dispatch and middleware.
STAGES = [
    ("authentication (token: recent or looked up)", "tenants/auth.py", "authenticate"),
    ("throttle (one cache round trip)", "rest_framework/views.py", "check_throttles"),
    ("permissions (token scope)", "rest_framework/views.py", "check_permissions"),
    ("request validation (serializer)", "rest_framework/serializers.py", "is_valid"),
    ("submit transaction (key, job, move, event)", "jobs/actions.py", "submit_once"),
    ("broker publish (after commit)", "core/reconcile.py", "send"),
    ("feasibility answer (usage, quota, queue)", "jobs/outlook/feasibility.py", "assess"),
    ("page query (visibility filter, cursor order)", "rest_framework/pagination.py", "paginate_queryset"),
    ("serializing", "rest_framework/serializers.py", "data"),
    ("JSON rendering", "rest_framework/renderers.py", "render"),
]
NESTED = {"feasibility answer (usage, quota, queue)": "serializing",  # the 201's `feasibility` field
          "broker publish (after commit)": "submit transaction (key, job, move, event)"}


def _profile(token: str, team, rounds: int = 50) -> dict:
    """Per endpoint, milliseconds per request in each stage (in-process, under cProfile)."""
    import cProfile
    import pstats

    from django.test import Client

    client = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")
    requests = {
        "list": lambda: client.get("/api/v1/jobs", {"page_size": 50}),
        "submit": lambda: client.post("/api/v1/jobs", json.dumps(
            {**BODY, "team": team.slug, "name": f"b-{uuid.uuid4().hex[:16]}"}),
            content_type="application/json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())),
    }
    result = {}
    for name, request in requests.items():
        request()
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for _ in range(rounds):
            request()
        profiler.disable()
        total = (time.perf_counter() - started) / rounds * 1000
        stats = pstats.Stats(profiler).stats
        stages = {}
        for stage, path, function in STAGES:
            # The outermost of same-named wrappers (Serializer.data calls BaseSerializer.data).
            seconds = max((row[3] for (file, _, func), row in stats.items() if file.endswith(path) and func == function),
                          default=0)
            if seconds:
                stages[stage] = seconds / rounds * 1000
        for inner, outer in NESTED.items():
            if inner in stages and outer in stages:
                stages[outer] -= stages[inner]
        stages["Django and DRF dispatch, middleware"] = total - sum(stages.values())
        result[name] = {"total_ms": total, "stages": stages}
    return result


# --- load ---------------------------------------------------------------------------------
def _run(prepared: dict, scenarios) -> dict:
    port = _free_port()
    server = subprocess.Popen(
        [str(ROOT / ".venv/bin/gunicorn"), "gpuplatform.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(WORKERS), "--worker-class", "gthread", "--threads", str(THREADS), "--log-level", "warning"],
        cwd=ROOT, env=prepared["env"],
    )
    try:
        _wait_until_up(port)
        headers = {"Authorization": f"Bearer {prepared['token']}", "Content-Type": "application/json"}
        results = {"ping (floor)": _load(port, lambda i: ("GET", "/api/v1/ping", None, {}))}
        results.update(scenarios(port, headers))
    finally:
        server.terminate()
        server.wait(timeout=30)
        _drop_queued_reconciles(prepared["env"]["REDIS_URL"])
    for name, result in results.items():
        print(f"  {prepared['database']}: {name:<14} p95 {result['p95_ms']:7.1f} ms  {result['rps']:6.0f} req/s", flush=True)
    return results


def _list_request(headers):
    return lambda i: ("GET", "/api/v1/jobs?page_size=50", None, headers)


def _scenarios(prepared: dict):
    team = "bench"

    def run(port, headers):
        created: list[int] = []
        results = {"list": _load(port, _list_request(headers))}
        results["submit"] = _load(port, lambda i: ("POST", "/api/v1/jobs", json.dumps(
            {**BODY, "team": team, "name": f"b-{uuid.uuid4().hex[:16]}"}),
            {**headers, "Idempotency-Key": str(uuid.uuid4())}), created=created)
        job = created[0]
        results["retrieve"] = _load(port, lambda i: ("GET", f"/api/v1/jobs/{job}", None, headers))
        results["events"] = _load(port, lambda i: ("GET", f"/api/v1/jobs/{job}/events", None, headers))
        results["cancel"] = _load(port, lambda i: ("POST", f"/api/v1/jobs/{created[i]}/cancel", None, headers),
                                  requests=len(created))
        return results

    return run


def _load(port: int, make_request, requests: int = REQUESTS, created: list | None = None) -> dict:
    latencies: list[float] = []
    failures = []
    lock = threading.Lock()
    counter = iter(range(requests))

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
            payload = response.read()
            mine.append(time.perf_counter() - start)
            if response.status >= 300:
                failures.append(response.status)
            elif created is not None:
                with lock:
                    created.append(json.loads(payload)["id"])
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

    def at(share: float) -> float:
        return latencies[max(int(len(latencies) * share) - 1, 0)] * 1000

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "rps": len(latencies) / elapsed,
            "errors": len(failures)}


# --- report ---------------------------------------------------------------------------------
def _report(started, small: dict, runs: dict) -> None:
    lines = [f"# API benchmark ({started:%Y-%m-%d %H:%M} UTC)", "",
             f"{CLIENTS} concurrent clients (keep-alive), {REQUESTS} requests per endpoint (cancel: one per job "
             f"submitted), a team token; gunicorn {WORKERS} workers x {THREADS} threads; PostgreSQL "
             "on the same machine. Ratios are to the floor (`GET /api/v1/ping`: Django + DRF, no credentials, "
             "no database) measured in the same run.", ""]
    for key, run in runs.items():
        database = small["database"] if key == "small" else "bench_1m"
        jobs = small["jobs"] if key == "small" else JOBS_LARGE
        floor = run["ping (floor)"]
        lines += [f"## {jobs:,} jobs in the database ({database})", "",
                  "| endpoint | queries | p50 ms | p95 ms | p99 ms | req/s | req/s / floor | errors |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, r in run.items():
            queries = small["queries"].get({"ping (floor)": "ping", "list": "list (10 a page)"}.get(name, name), "")
            lines.append(f"| {name} | {queries} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | "
                         f"{r['rps']:.0f} | {r['rps'] / floor['rps']:.2f} | {r['errors']} |")
        lines.append("")
    lines += ["## Where the time goes", "", "One request at a time, in-process under cProfile (which slows "
              "everything by about the same factor), milliseconds per request:", ""]
    for endpoint, profile in small["profile"].items():
        lines += [f"**{endpoint}** ({profile['total_ms']:.1f} ms under the profiler):", "",
                  "| stage | ms | share |", "|---|---|---|"]
        lines += [f"| {stage} | {ms:.1f} | {ms / profile['total_ms']:.0%} |" for stage, ms in profile["stages"].items()]
        lines.append("")
    queries = small["queries"]
    lines += ["SQL queries per request: " + ", ".join(f"{name} {count}" for name, count in queries.items())
              + (" (a list page costs the same at 10 and 200 rows: no N+1)."
                 if queries["list (10 a page)"] == queries["list (200 a page)"] else " (LIST GROWS WITH THE PAGE: N+1)."),
              "", f"Machine: {machine()}; {load()} at the end of the run.", ""]
    small_run = runs["small"]
    result = (f"RESULT api list_p95_ms={small_run['list']['p95_ms']:.1f}"
              + (f" list_1m_p95_ms={runs['large']['list']['p95_ms']:.1f}" if "large" in runs else "")
              + f" submit_p99_ms={small_run['submit']['p99_ms']:.1f}"
              f" submit_rps_ratio={small_run['submit']['rps'] / small_run['ping (floor)']['rps']:.2f}")
    text = "\n".join(lines)
    RESULTS.write_text(text + "\n```\n" + result + "\n```\n")
    print("\n" + text + f"\nwritten to {RESULTS.relative_to(ROOT)}\n\n{result}")


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
