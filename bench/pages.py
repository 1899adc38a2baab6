"""``make bench-pages``: the web pages at 1,000 teams and 100,000 jobs.

1. create (or reuse) a database ``bench_pages`` on the test PostgreSQL server, migrate it and
   fill it once, in one transaction, with INSERT ... SELECT: 1,000 teams of three people
   (owner, member, viewer), quotas on two or three flavors (half of them in cohorts), and
   100,000 jobs over the last 60 days with their lifecycle events; later runs reuse it;
2. in this process, with Django's test client, request each page ~100 times as the person
   who uses it (a member for the dashboard, team page and job list; a quota manager for the
   console, the usage page and the pages listing every team), counting SQL queries;
3. print queries, p50 and p95 per page, with the login page (full middleware and a
   template, no data) as the floor, and write bench/results/pages.md.

GPU metrics come from a small real HTTP server standing in for Prometheus
(cluster/prometheus_standin.py, PROMETHEUS_URL), its GPUs those of the running jobs the pages
show; each page's Prometheus queries are counted (the "prom" column: at most one a page).

A benchmark, not a test: it asserts nothing about time. BENCH_PAGE_REQUESTS (100) and
BENCH_PAGE_SECONDS (60, the most one page may take) bound a run; BENCH_PAGES_DATABASE
names another database than bench_pages.
"""

import os
import statistics
import sys
import time
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEAMS = 1000
JOBS = 100_000
FLAVORS = ("h100", "a100", "t4")
COHORTS = 20
REQUESTS = int(os.environ.get("BENCH_PAGE_REQUESTS", "100"))
SECONDS = float(os.environ.get("BENCH_PAGE_SECONDS", "60"))
RESULTS = ROOT / "bench/results/pages.md"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from cluster.prometheus_standin import serve

    standin, server = serve()
    os.environ.update(_environment(), PROMETHEUS_URL=standin.url)
    import django

    django.setup()
    _seed()
    pages = _pages()
    _gpus(standin, pages)
    results = {name: _measure(user, path, standin) for name, (user, path) in pages.items()}
    server.shutdown()
    _report(results)
    return 0


def _gpus(standin, pages) -> None:
    """The stand-in's GPUs: those of the running jobs on the first page of the quota
    manager's job list (pods named as the Job controller names them), every third GPU idle."""
    from jobs.models import Job
    from workloads.pods import object_name

    running = Job.objects.filter(state=Job.State.RUNNING).select_related("team").order_by("-created_at", "-id")
    for job in running[:50]:
        for gpu in range(job.workers * job.gpus_per_worker):
            standin.gpu(job.team.namespace_name, f"{object_name(job)}-0-bench", gpu, util=0 if gpu % 3 == 2 else 75)


def _environment() -> dict:
    from bench.postgres import ensure_database
    from deploy.stack import profiles

    database = ensure_database(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:55432/gpuplatform"),
                               os.environ.get("BENCH_PAGES_DATABASE", "bench_pages"))
    redis = profiles.get("bench-pages").redis_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:56379/0"))
    return {
        "DJANGO_SETTINGS_MODULE": "gpuplatform.settings",
        "DATABASE_URL": database,
        "REDIS_URL": redis,
        "CELERY_BROKER_URL": redis,
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-" + "x" * 40,
        "SECURE_SSL_REDIRECT": "false",  # plain HTTP in process, no TLS proxy in front
        "LOG_LEVEL": "WARNING",
    }


# --- seeding -------------------------------------------------------------------------------------
def _step(message: str, started: float) -> None:
    print(f"  [{time.monotonic() - started:6.1f} s] {message}", flush=True)


def _clone(model, template_pk: int, source_sql: str, overrides: dict) -> int:
    """INSERT one row per row of ``source_sql`` (aliased ``s``), copying every column of the
    template row but those in ``overrides`` (column -> SQL expression over ``s``); so the
    bench needs no list of the tables' columns and survives new ones."""
    from django.db import connection

    table = model._meta.db_table
    columns = [f.column for f in model._meta.concrete_fields if f.column != "id"]
    exprs = [overrides.get(c, f't."{c}"') for c in columns]
    sql = (f'INSERT INTO "{table}" ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in columns)}) '
           f'SELECT {", ".join(exprs)} FROM ({source_sql}) s CROSS JOIN "{table}" t WHERE t.id = {int(template_pk)}')
    with connection.cursor() as cursor:
        cursor.execute(sql)  # no parameters: the SQL's % are modulo
        return cursor.rowcount


def _seeded() -> bool:
    from jobs.models import Job
    from tenants.models import Team

    return Team.objects.filter(slug__startswith="bt").count() == TEAMS and Job.objects.count() >= JOBS


def _seed() -> None:
    """Migrate, then fill the database once (one transaction: an interrupted seed leaves nothing)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.db.models import F

    from jobs.models import Job, JobEvent
    from quotas.models import Cohort, GpuFlavor, Quota
    from tenants.models import Membership, Team
    from tenants.roles import ensure_quota_manager_group

    call_command("migrate", verbosity=0)
    if _seeded():
        print(f"reusing bench_pages: {TEAMS} teams, {Job.objects.count()} jobs, {JobEvent.objects.count()} events")
        return
    started = time.monotonic()
    print(f"seeding bench_pages: {TEAMS} teams, {JOBS} jobs (once) ...", flush=True)
    User = get_user_model()
    with transaction.atomic():
        manager = User.objects.create_user("bench-qm", is_staff=True)
        manager.groups.add(ensure_quota_manager_group())
        template_user = User.objects.create_user("bench-u0000")
        n = _clone(User, template_user.pk, f"SELECT g FROM generate_series(1, {3 * TEAMS - 1}) g",
                   {"username": "'bench-u' || lpad(s.g::text, 4, '0')"})
        _step(f"{n + 2} users", started)
        template_team = Team.objects.create(slug="bt0000", display_name="Bench team 0", status=Team.Status.READY)
        n = _clone(Team, template_team.pk, f"SELECT g FROM generate_series(1, {TEAMS - 1}) g",
                   {"slug": "'bt' || lpad(s.g::text, 4, '0')", "display_name": "'Bench team ' || s.g"})
        _step(f"{n + 1} teams", started)
        template_member = Membership.objects.create(team=template_team, user=template_user, role=Membership.Role.OWNER)
        people = (
            "SELECT t.id AS team_id, u.id AS user_id, u.j % 3 AS r FROM "
            "(SELECT id, substr(slug, 3)::int AS i FROM tenants_team WHERE slug LIKE 'bt%') t JOIN "
            f"(SELECT id, substr(username, 8)::int AS j FROM {User._meta.db_table} WHERE username LIKE 'bench-u%') u "
            "ON u.j / 3 = t.i WHERE u.j > 0"
        )
        n = _clone(Membership, template_member.pk, people, {
            "team_id": "s.team_id", "user_id": "s.user_id",
            "role": "CASE s.r WHEN 0 THEN 'owner' WHEN 1 THEN 'member' ELSE 'viewer' END"})
        _step(f"{n + 1} memberships", started)
        flavors = {name: GpuFlavor.objects.create(
            name=name, resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
            node_labels={"gpuplatform.io/pool": name}) for name in FLAVORS}
        cohorts = [Cohort.objects.create(name=f"cohort-{c:02d}") for c in range(COHORTS)]
        template_quota = Quota.objects.create(team=template_team, flavor=flavors["h100"], nominal_gpus=8,
                                              cpu_cores=96, memory_gib=1024, cohort=cohorts[0])
        # Every team has h100 and a100, every third t4 too; even teams share a cohort.
        quota_rows = (
            "SELECT t.id AS team_id, f.id AS flavor_id, t.i, "
            f"CASE WHEN t.i % 2 = 0 THEN (SELECT id FROM quotas_cohort ORDER BY name OFFSET (t.i / 2) % {COHORTS} LIMIT 1) END AS cohort_id "
            "FROM (SELECT id, substr(slug, 3)::int AS i FROM tenants_team WHERE slug LIKE 'bt%') t "
            "CROSS JOIN quotas_gpuflavor f WHERE (f.name <> 't4' OR t.i % 3 = 0) AND NOT (t.i = 0 AND f.name = 'h100')"
        )
        n = _clone(Quota, template_quota.pk, quota_rows, {
            "team_id": "s.team_id", "flavor_id": "s.flavor_id", "cohort_id": "s.cohort_id",
            "nominal_gpus": "4 + (s.i % 4) * 4"})
        _step(f"{n + 1} quotas on {len(FLAVORS)} flavors, {COHORTS} cohorts", started)
        template_job = Job.objects.create(team=template_team, flavor=flavors["h100"], submitter=template_user,
                                          name="job-template", image="ghcr.io/example/train:1",
                                          command=["python"], args=["train.py"], state=Job.State.SUCCEEDED)
        Job.objects.filter(pk=template_job.pk).update(  # its events come from these, as the clones'
            submitted_at=F("created_at"), admitted_at=F("created_at") + timedelta(minutes=5),
            started_at=F("created_at") + timedelta(minutes=6), finished_at=F("created_at") + timedelta(hours=1))
        # Job g: team g % 1000, submitted by that team's owner or member, created over the
        # last 60 days (newest first in g); 88% final, the rest running, admitted or waiting.
        spread = int(timedelta(days=60).total_seconds() / JOBS)
        jobs = (
            "SELECT g, t.id AS team_id, u.id AS user_id, "
            f"(SELECT id FROM quotas_gpuflavor WHERE name = CASE WHEN g % 3 = 2 THEN 'a100' ELSE 'h100' END) AS flavor_id, "
            f"now() - (g * {spread}) * interval '1 second' AS created, "
            "CASE WHEN g % 100 < 80 THEN 'succeeded' WHEN g % 100 < 85 THEN 'failed' WHEN g % 100 < 88 THEN 'cancelled' "
            "WHEN g % 100 < 92 THEN 'running' WHEN g % 100 < 94 THEN 'admitted' WHEN g % 100 < 97 THEN 'queued' "
            "ELSE 'submitted' END AS state "
            f"FROM generate_series(1, {JOBS - 1}) g "
            f"JOIN tenants_team t ON t.slug = 'bt' || lpad((g % {TEAMS})::text, 4, '0') "
            f"JOIN {User._meta.db_table} u ON u.username = 'bench-u' || lpad((3 * (g % {TEAMS}) + g % 2)::text, 4, '0')"
        )
        admitted = "s.state NOT IN ('queued', 'submitted')"
        n = _clone(Job, template_job.pk, jobs, {
            "team_id": "s.team_id", "submitter_id": "s.user_id", "flavor_id": "s.flavor_id",
            "name": "'job-' || s.g", "state": "s.state",
            "workers": "1 + s.g % 2", "gpus_per_worker": "1 + s.g % 4",
            "created_at": "s.created", "updated_at": "s.created",
            "submitted_at": "s.created + interval '1 second'",
            "admitted_at": f"CASE WHEN {admitted} THEN s.created + interval '5 minutes' END",
            "started_at": f"CASE WHEN {admitted} AND s.state <> 'admitted' THEN s.created + interval '6 minutes' END",
            "finished_at": "CASE WHEN s.state IN ('succeeded', 'failed', 'cancelled') "
                           "THEN s.created + interval '6 minutes' + (1 + s.g % 7) * interval '1 hour' END",
        })
        _step(f"{n + 1} jobs", started)
        events = JobEvent._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"""
                INSERT INTO "{events}" (job_id, created_at, recorded_at, from_state, to_state, reason, message)
                SELECT id, at, at, from_state, to_state, reason, '' FROM (
                  SELECT id, submitted_at AS at, 'draft' AS from_state, 'submitted' AS to_state, 'Submitted' AS reason FROM jobs_job
                  UNION ALL SELECT id, submitted_at + interval '1 minute', 'submitted', 'queued', 'Queued' FROM jobs_job
                    WHERE state <> 'submitted'
                  UNION ALL SELECT id, admitted_at, 'queued', 'admitted', 'Admitted' FROM jobs_job WHERE admitted_at IS NOT NULL
                  UNION ALL SELECT id, started_at, 'admitted', 'running', 'Running' FROM jobs_job WHERE started_at IS NOT NULL
                  UNION ALL SELECT id, finished_at, 'running', state, 'Finished' FROM jobs_job WHERE finished_at IS NOT NULL
                ) e""")
            _step(f"{cursor.rowcount} job events", started)
            # What Job.transition writes as jobs hold GPUs (the usage page reads these).
            cursor.execute("""
                INSERT INTO jobs_gpuinterval (job_id, team_id, flavor_id, submitter_id, gpus, started_at, ended_at)
                SELECT id, team_id, flavor_id, submitter_id, workers * gpus_per_worker, admitted_at, finished_at
                FROM jobs_job WHERE admitted_at IS NOT NULL""")
            _step(f"{cursor.rowcount} GPU intervals", started)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    _step("seeded and analyzed", started)


# --- measuring -----------------------------------------------------------------------------------
def _pages() -> dict:
    """Page -> (person, path). The first five are the issue's; the quota manager's views of
    the pages that list every team follow."""
    from django.contrib.auth import get_user_model

    from jobs.models import Job

    User = get_user_model()
    member = User.objects.get(username="bench-u0001")  # member of bt0000
    manager = User.objects.get(username="bench-qm")
    newest = Job.objects.order_by("-created_at").values_list("created_at", flat=True).first()
    # The last full month of data (the seed's 60 days end at its own "now").
    month = (newest - timedelta(days=20)).strftime("%Y-%m")
    # The newest running job (bt0000's jobs never run in the seed: its member's list has none).
    running = Job.objects.filter(state=Job.State.RUNNING).order_by("-created_at", "-id").first().pk
    return {
        "floor: login page": (None, "/login/"),
        "dashboard": (member, "/"),
        "team": (member, "/teams/bt0000/"),
        "console": (manager, "/quotas/console/"),
        "usage": (manager, f"/quotas/usage/?month={month}"),
        "jobs": (member, "/jobs/"),
        "dashboard (quota manager)": (manager, "/"),
        "team (quota manager)": (manager, "/teams/bt0500/"),
        "jobs (quota manager)": (manager, "/jobs/"),
        "quota list (quota manager)": (manager, "/quotas/"),
        "usage, one team (member)": (member, f"/quotas/usage/?month={month}&team=bt0000"),
        # The newest page has no running job: this one has 25, each with a utilization.
        "running jobs (quota manager)": (manager, "/jobs/?state=running"),
        "job GPU panel (quota manager)": (manager, f"/jobs/{running}/gpus/"),
    }


def _measure(user, path: str, standin) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(SERVER_NAME="localhost")
    if user is not None:
        client.force_login(user)
    for _ in range(2):  # warm up: templates, the session, the permission cache
        assert client.get(path).status_code == 200, path
    asked = standin.queries
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    queries = len(ctx.captured_queries)  # now: the next request's request_started empties the log
    prometheus = standin.queries - asked
    assert response.status_code == 200, path
    size = len(response.content)
    latencies = []
    deadline = time.monotonic() + SECONDS
    while len(latencies) < REQUESTS and (len(latencies) < 10 or time.monotonic() < deadline):
        start = time.perf_counter()
        response = client.get(path)
        latencies.append(time.perf_counter() - start)
        assert response.status_code == 200, path
    latencies.sort()
    result = {"path": path, "queries": queries, "prometheus": prometheus, "n": len(latencies), "kib": size / 1024,
              "p50": statistics.median(latencies) * 1000,
              "p95": latencies[max(0, int(len(latencies) * 0.95 + 0.5) - 1)] * 1000}
    print(f"  {path:<40} {result['queries']:3d} queries  {prometheus} prom  p50 {result['p50']:8.1f} ms  p95 {result['p95']:8.1f} ms",
          flush=True)
    return result


def _report(results: dict) -> None:
    from bench.machine import load, machine

    floor = results["floor: login page"]
    lines = [
        "| page | path | queries | prom | requests | HTML KiB | p50 ms | p95 ms | p95 / floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | `{r['path']}` | {r['queries']} | {r['prometheus']} | {r['n']} | {r['kib']:.0f} | {r['p50']:.1f} | "
                     f"{r['p95']:.1f} | {r['p95'] / floor['p95']:.1f}x |")
    key = {"dashboard": "dashboard", "team": "team", "console": "console", "usage": "usage", "jobs": "jobs"}
    result = "RESULT pages " + " ".join(f"{k}_p95_ms={results[name]['p95']:.1f}" for name, k in key.items()) + \
        f" max_queries={max(r['queries'] for r in results.values())}" \
        f" max_prometheus_queries={max(r['prometheus'] for r in results.values())}"
    table = "\n".join(lines)
    print(f"\n{TEAMS} teams, {JOBS} jobs; in-process test client, up to {REQUESTS} requests a page\n")
    print(table)
    print()
    print(result)
    now = datetime.now(dt_timezone.utc)
    RESULTS.write_text(
        f"# Web pages benchmark ({now:%Y-%m-%d %H:%M} UTC)\n\n"
        f"{TEAMS} teams (owner, member, viewer each; quotas on 2-3 flavors, half in {COHORTS} cohorts), "
        f"{JOBS} jobs over 60 days with their events; PostgreSQL, DEBUG off, Django's test client in process, "
        f"up to {REQUESTS} requests a page after two warm-up requests. A member of one team asks for the dashboard, "
        f"team page and job list; a quota manager for the console and the usage page (last full month of data), "
        f"and for the pages listing every team. \"prom\": the Prometheus queries of one request, to a real HTTP "
        f"server standing in for Prometheus (cluster/prometheus_standin.py) with the GPUs of the listed running jobs.\n\n"
        f"{table}\n\n"
        f"Machine: {machine()}; {load()} at the end of the run.\n\n"
        f"```\n{result}\n```\n"
    )
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
