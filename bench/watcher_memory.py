"""`make bench-watcher`: the status watcher's memory at N live jobs (issue 16, item 4).

1. The shared local cluster (deploy/local-cluster/cluster.sh up) and a PostgreSQL database
   of its own, `bench_watcher` (on the server of DATABASE_URL), Redis database 12.
2. BENCH_WATCHER_TEAMS teams (namespaces `bench-watch-bwt0`, ...: TEAM_NAMESPACE_PREFIX is
   `bench-watch-` here and in the watcher it starts), each with a Kueue quota of 0 GPUs on
   the flavor `bwh100`, onboarded with the project's own reconcilers (`sync_team`,
   `sync_team_quotas`). Then BENCH_WATCHER_JOBS (default 10,000) live training jobs: rows in
   state `queued` and, for each, the objects of `render_job(job)` the watcher watches (the
   suspended, queue-labelled batch Job; the headless Service is left out, nothing watches
   it), applied by `Cluster.apply` from a thread pool. Kueue makes a Workload for each and,
   the quota being 0, never admits it: no pods. So the watcher holds, per job, what it holds
   for a queued job in production: the batch Job, its Workload, and Kueue's Events.
3. The real watcher process (`manage.py watch_cluster`, DEBUG off, as production runs it):
   first with 0 live jobs (baseline, before the jobs are made), then with N. It is synced
   when every row shows what Kueue says (reason `WaitingForQuota`: the watcher has listed the
   Workloads and evaluated every job) and its CPU time has settled; then VmRSS/VmHWM are
   sampled from /proc over BENCH_WATCHER_SAMPLE_SECONDS (30).
4. Prints a table, writes bench/results/watcher.md, and ends with
   `RESULT watcher jobs=N rss_mib=... baseline_rss_mib=... peak_mib=... kib_per_job=...`.

Objects are reused: a later run finds the teams' namespaces, rows and cluster objects and
only adds what is missing (the database is kept while its rows match BENCH_WATCHER_JOBS).
Clean-up (deletes the bench namespaces, the flavor's ResourceFlavor and the database):

    BENCH_WATCHER_KEEP=1   keep everything for the next run (default: clean up at the end,
                           so 2N objects do not stay in the shared cluster)
    python bench/watcher_memory.py cleanup      clean up only
    python bench/watcher_memory.py explain      where the memory goes: the watcher run in
                           this process under tracemalloc, plus a deep size of its caches
                           (needs the objects: run with BENCH_WATCHER_KEEP=1 first)

When the objects were kept from an earlier run there is nothing to take a 0-job baseline
against before the run; it is then taken after the clean-up at the end (with KEEP=1 the
last recorded baseline, var/bench-watcher/baseline.json, is used and said so).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402
from deploy.stack import profiles  # noqa: E402

JOBS = int(os.environ.get("BENCH_WATCHER_JOBS", "10000"))
TEAMS = int(os.environ.get("BENCH_WATCHER_TEAMS", "4"))
THREADS = int(os.environ.get("BENCH_WATCHER_THREADS", "16"))
SAMPLE_SECONDS = float(os.environ.get("BENCH_WATCHER_SAMPLE_SECONDS", "30"))
SYNC_TIMEOUT = float(os.environ.get("BENCH_WATCHER_SYNC_TIMEOUT_SECONDS", "1800"))
# Kueue makes the Workloads at its own pace (on a loaded 2-core machine: ~1-2 a second);
# after this long the watcher is measured with those there are, and the report says how many.
KUEUE_WAIT = float(os.environ.get("BENCH_WATCHER_KUEUE_WAIT_SECONDS", str(SYNC_TIMEOUT)))
KEEP = os.environ.get("BENCH_WATCHER_KEEP") == "1"
PROFILE = profiles.get("bench-watcher")  # its Redis database; make cluster-up's cluster
KUBECONFIG = os.environ.get("BENCH_WATCHER_KUBECONFIG") or str(PROFILE.cluster_dir / "kubeconfig")
PREFIX = "bench-watch-"
FLAVOR = "bwh100"
DB_NAME = "bench_watcher"
RESULTS = ROOT / "bench" / "results" / "watcher.md"
STATE_DIR = ROOT / "var" / "bench-watcher"
BASELINE_FILE = STATE_DIR / "baseline.json"
WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")
BATCH_JOB = ("batch/v1", "Job")
# Other platforms share the test cluster (test suites, other benches), and a job's reconcile
# prunes what carries its job label cluster-wide: rows numbered from here (and teams named
# `bw...`) keep their labels apart from everyone else's small ids and slugs.
FIRST_JOB_ID = 770_000_001


def _with(url: str, path: str) -> str:
    return urlsplit(url)._replace(path=path).geturl()


BASE_DB = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:55432/gpuplatform"
BASE_REDIS = os.environ.get("REDIS_URL") or "redis://127.0.0.1:56379/0"
DATABASE_URL = _with(BASE_DB, f"/{DB_NAME}")
REDIS_URL = PROFILE.redis_url(BASE_REDIS)

# The environment of this process and of the watcher it starts: production-like (DEBUG off,
# so Django keeps no query log), our own database, Redis db and namespace prefix.
ENV = {
    "DJANGO_SETTINGS_MODULE": "gpuplatform.settings",
    "PYTHONPATH": str(ROOT),
    "DATABASE_URL": DATABASE_URL,
    "REDIS_URL": REDIS_URL,
    "CELERY_BROKER_URL": REDIS_URL,
    "CELERY_RESULT_BACKEND": REDIS_URL,
    "KUBECONFIG": KUBECONFIG,
    "TEAM_NAMESPACE_PREFIX": PREFIX,
    "DEBUG": "false",
    "SECRET_KEY": "bench-watcher-only-not-secret",
    "SECURE_SSL_REDIRECT": "false",
    "METRICS_PORT": "0",
    "WATCHER_LEADER_ELECTION": "false",
    "LOG_LEVEL": "INFO",
    "PYTHONUNBUFFERED": "1",
}
os.environ.update(ENV)


def progress(message: str) -> None:
    print(f"[bench-watcher {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- database ---------------------------------------------------------------------------------
def _admin_connect():
    import psycopg

    return psycopg.connect(_with(BASE_DB, "/postgres"), autocommit=True)


def database_exists() -> bool:
    with _admin_connect() as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone() is not None


def drop_database() -> None:
    with _admin_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def create_database() -> None:
    drop_database()
    with _admin_connect() as conn:
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def flush_redis() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def setup_django() -> None:
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


# --- cluster ----------------------------------------------------------------------------------
def cluster():
    from cluster import Cluster

    return Cluster(kubeconfig=KUBECONFIG)


def bench_namespaces(c) -> list[str]:
    return sorted(ns["metadata"]["name"] for ns in c.list("v1", "Namespace")
                  if ns["metadata"]["name"].startswith(PREFIX))


def wait_namespaces_gone(c, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while (left := bench_namespaces(c)) and time.monotonic() < deadline:
        progress(f"waiting for {len(left)} namespaces to go ({', '.join(left)})")
        time.sleep(10)
    if left:
        raise SystemExit(f"namespaces still there after {timeout:.0f}s: {left}")


def cleanup(c) -> None:
    """Delete what the bench made: its namespaces (with their Jobs, Workloads, Events),
    its ClusterQueues and ResourceFlavor, its database and Redis db."""
    from cluster import NotFound

    progress("cleaning up: deleting the bench namespaces, ClusterQueues, ResourceFlavor and database")
    for ns in bench_namespaces(c):
        c.delete("v1", "Namespace", ns)
    for cq in c.list("kueue.x-k8s.io/v1beta2", "ClusterQueue"):
        if cq["metadata"]["name"].startswith(PREFIX):
            c.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq["metadata"]["name"])
    try:
        c.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", FLAVOR)
    except NotFound:
        pass
    wait_namespaces_gone(c)
    drop_database()
    flush_redis()
    progress("clean")


# --- seeding ----------------------------------------------------------------------------------
def seed_rows() -> None:
    """Teams with a 0-GPU quota each, and JOBS queued training jobs spread over them."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from jobs.lifecycle import State
    from jobs.models import Job
    from quotas.models import GpuFlavor, Quota
    from tenants.models import Membership, Team

    owner = get_user_model().objects.create_user("bench-watch-owner", password="bench-watch-pass-1")
    flavor = GpuFlavor.objects.create(
        name=FLAVOR, scheduler="kueue", resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
        node_labels={"gpuplatform.io/pool": "h100"},
        node_taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    teams = []
    for number in range(TEAMS):
        team = Team.objects.create(slug=f"bwt{number}", display_name=f"Watcher bench {number}")
        Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
        # No GPUs: Kueue keeps every workload pending (inadmissible), so no pod is ever made.
        Quota.objects.create(team=team, flavor=flavor, nominal_gpus=0, cpu_cores=0, memory_gib=0)
        teams.append(team)
    now = timezone.now()
    template = {"kind": Job.Kind.TRAINING, "flavor": flavor, "submitter": owner, "image": "ghcr.io/example/train:1",
                "command": ["python"], "args": ["train.py", "--epochs", "3"], "env": {"EPOCHS": "3"},
                "workers": 1, "gpus_per_worker": 1, "state": State.QUEUED, "reason": "Queued",
                "message": "Waiting for the scheduler.", "submitted_at": now}
    Job(team=teams[0], name="probe", **template).full_clean()  # the rows below are valid ones
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('jobs_job', 'id'), %s, false)", [FIRST_JOB_ID])
    jobs = [Job(team=teams[i % TEAMS], name=f"w{i:05d}", **template) for i in range(JOBS)]
    Job.objects.bulk_create(jobs, batch_size=1000)
    progress(f"{JOBS} job rows in {TEAMS} teams")


def rows_match() -> bool:
    from jobs.models import Job
    from tenants.models import Team

    try:
        return (Team.objects.count() == Team.objects.filter(slug__startswith="bwt").count() == TEAMS
                and Job.objects.live().count() == JOBS and not Job.objects.filter(pk__lt=FIRST_JOB_ID).exists())
    except Exception:  # noqa: BLE001 - an empty or half-made database
        return False


def onboard(c) -> None:
    """The flavor's ResourceFlavor, then each team's namespace, RBAC, quotas and queues,
    with the project's reconcilers (each prunes only its own team's objects)."""
    from quotas.manifests import render_cluster
    from quotas.models import GpuFlavor
    from quotas.tasks import sync_team_quotas
    from tenants.models import Team
    from tenants.tasks import sync_team

    flavor = GpuFlavor.objects.get(name=FLAVOR)
    # Only this flavor's ResourceFlavor: applying (never syncing) the cluster-wide objects,
    # so other users' flavors, cohorts and priorities on the shared cluster are left alone.
    c.apply([obj for obj in render_cluster([flavor], [], []) if obj["kind"] == "ResourceFlavor"])
    for team in Team.objects.all():
        sync_team(c, team)
        sync_team_quotas(c, team)
    progress(f"{TEAMS} teams onboarded (namespaces {PREFIX}bwt0..bwt{TEAMS - 1})")


def apply_jobs(c) -> None:
    """Each job's watched objects as `render_job` makes them; only those not there yet."""
    from jobs.manifests import job_fields, render_job
    from jobs.models import Job
    from jobs.watch.watcher import LABELLED

    jobs = list(Job.objects.select_related("team", "flavor", "priority").order_by("pk"))
    present = set()
    for ns in {job.team.namespace_name for job in jobs}:
        present |= {(ns, obj["metadata"]["name"]) for obj in c.list(*BATCH_JOB, namespace=ns)}
    todo = []
    for job in jobs:
        objects = [obj for obj in render_job(job) if (obj["apiVersion"], obj["kind"]) in LABELLED]
        if any((obj["metadata"]["namespace"], obj["metadata"]["name"]) not in present for obj in objects):
            todo.append((job, objects))
    progress(f"{len(jobs) - len(todo)} jobs already on the cluster, creating {len(todo)} "
             f"with {THREADS} threads")
    if not todo:
        return
    for attempt in range(1, 6):  # a webhook or API server that blinks costs a retry, not the run
        started, done, failed = time.monotonic(), 0, []
        with ThreadPoolExecutor(THREADS) as pool:
            futures = {pool.submit(c.apply, objects, rules=job_fields(job)): (job, objects) for job, objects in todo}
            for future in as_completed(futures):
                done += 1
                if future.exception() is not None:
                    failed.append((futures[future], future.exception()))
                if done % 500 == 0 or done == len(todo):
                    rate = done / (time.monotonic() - started)
                    progress(f"  {done}/{len(todo)} jobs applied ({rate:.0f}/s, "
                             f"{(len(todo) - done) / rate:.0f}s left, {len(failed)} failed)")
        if not failed:
            return
        (job, _), error = failed[0]
        progress(f"  {len(failed)} jobs failed (attempt {attempt}), e.g. job {job.pk}: {error}")
        todo = [pair for pair, _ in failed]
        time.sleep(15)
    raise SystemExit(f"{len(todo)} jobs could not be applied")


def kueue_pending(c) -> tuple[int, int]:
    """(workloads of the bench's jobs, of which Kueue has marked QuotaReserved=False)."""
    total = pending = 0
    for ns in bench_namespaces(c):
        for wl in c.list(*WORKLOAD, namespace=ns):
            total += 1
            conditions = {cond.get("type"): cond for cond in (wl.get("status") or {}).get("conditions") or []}
            if (conditions.get("QuotaReserved") or {}).get("status") == "False":
                pending += 1
    return total, pending


def wait_for_kueue(c) -> int:
    """Until Kueue has made every Workload and tried (and failed) to admit each: what the
    watcher then shows is the steady state of a queued job. Returns how many are pending
    (all of them, unless BENCH_WATCHER_KUEUE_WAIT_SECONDS ran out first)."""
    deadline, last = time.monotonic() + KUEUE_WAIT, None
    while True:
        total, pending = kueue_pending(c)
        if (total, pending) != last:
            progress(f"Kueue: {total}/{JOBS} workloads made, {pending} marked pending (no quota)")
            last = (total, pending)
        if total >= JOBS and pending >= JOBS:
            return pending
        if time.monotonic() >= deadline:
            progress(f"Kueue is behind (BENCH_WATCHER_KUEUE_WAIT_SECONDS={KUEUE_WAIT:.0f}): measuring with "
                     f"{pending} of {JOBS} Workloads pending; the rest are batch Jobs only for now")
            return pending
        time.sleep(10)


# --- the watcher process ----------------------------------------------------------------------
def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM ... in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("Vm", "Rss")):
            key, value = line.split(":", 1)
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_rows() -> None:
    """The rows as the worker leaves them after applying: the watcher must bring each one
    to what Kueue says, which is how this run knows it has seen them all."""
    from jobs.models import Job

    Job.objects.update(reason="Queued", message="Waiting for the scheduler.")


def unsynced_rows() -> int:
    from django.db import connections

    from jobs.models import Job

    count = Job.objects.live().filter(reason="Queued").count()
    connections.close_all()
    return count


class Watcher:
    """`manage.py watch_cluster` in a session of its own, logging to var/bench-watcher/."""

    def __init__(self, label: str):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = STATE_DIR / f"watcher-{label}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - the watcher's stdout until stop()
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "manage.py", "watch_cluster"], cwd=ROOT,
                                     env={**os.environ, **ENV}, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise SystemExit(f"the watcher exited ({self.proc.returncode}); see {self.log_path}")

    def wait_settled(self, rows: int, expect: int) -> float:
        """Until every row is synced and the process' CPU time stays flat for 5 s; returns
        the seconds it took."""
        deadline = time.monotonic() + SYNC_TIMEOUT
        while rows and time.monotonic() < deadline:
            self.alive()
            left = unsynced_rows()
            if rows - left >= expect:
                break
            progress(f"  watcher: {rows - left}/{rows} rows synced, RSS "
                     f"{proc_status(self.pid)['VmRSS'] / 2**20:.0f} MiB, CPU {cpu_seconds(self.pid):.0f}s")
            time.sleep(5)
        else:
            if rows:
                raise SystemExit(f"the watcher did not sync every row within {SYNC_TIMEOUT:.0f}s")
        synced = time.monotonic() - self.started
        # The first minutes hold a burst of evaluations (one per event, then the first
        # resync): wait until it is idle, so the samples are its steady state.
        # Settled: at least 20 s up, and for 5 s neither more than 0.5 s of CPU nor 1 MiB of
        # RSS more (a LIST in flight costs little CPU here but grows the RSS when it lands).
        last, last_rss = cpu_seconds(self.pid), proc_status(self.pid)["VmRSS"]
        quiet_since = time.monotonic()
        while ((time.monotonic() - quiet_since < 5 or time.monotonic() - self.started < 20)
               and time.monotonic() < deadline):
            time.sleep(1)
            self.alive()
            now, rss = cpu_seconds(self.pid), proc_status(self.pid)["VmRSS"]
            if now - last > 0.5 or abs(rss - last_rss) > 2**20:
                quiet_since = time.monotonic()
            last, last_rss = now, rss
        return synced, time.monotonic() - self.started

    def sample(self, seconds: float, every: float = 5) -> dict:
        rss, hwm = [], 0
        cpu0, t0 = cpu_seconds(self.pid), time.monotonic()
        while True:
            self.alive()
            status = proc_status(self.pid)
            rss.append(status["VmRSS"])
            hwm = max(hwm, status["VmHWM"])
            if time.monotonic() - t0 >= seconds:
                break
            time.sleep(every)
        cpu = (cpu_seconds(self.pid) - cpu0) / (time.monotonic() - t0)
        return {"rss": statistics.median(rss), "rss_min": min(rss), "rss_max": max(rss), "hwm": hwm,
                "samples": len(rss), "cpu": cpu}

    def stop(self) -> None:
        import signal

        if self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.log.close()


def measure(label: str, rows: int, expect: int = 0) -> dict:
    reset_rows()
    progress(f"starting the watcher ({label}: {rows} live jobs)")
    watcher = Watcher(label)
    try:
        synced, settled = watcher.wait_settled(rows, expect)
        progress(f"  rows synced after {synced:.0f}s, CPU settled after {settled:.0f}s; "
                 f"sampling RSS for {SAMPLE_SECONDS:.0f}s")
        result = watcher.sample(SAMPLE_SECONDS)
        result["synced_seconds"], result["settled_seconds"] = synced, settled
    finally:
        watcher.stop()
    result["log"] = str(watcher.log_path.relative_to(ROOT))
    progress(f"  {label}: RSS {result['rss'] / 2**20:.1f} MiB (peak {result['hwm'] / 2**20:.1f} MiB), "
             f"CPU {result['cpu'] * 100:.0f}% while sampling")
    return result


def cluster_counts(c) -> dict:
    """What the watcher's watches see cluster-wide (all users of the shared cluster)."""
    from jobs.watch.watcher import OURS

    return {
        "our batch Jobs": len(c.list(*BATCH_JOB, label_selector=OURS)),
        "Workloads (all)": len(c.list(*WORKLOAD)),
        "Workloads of the bench's jobs (pending)": "{} ({})".format(*kueue_pending(c)),
        "Events (all)": len(c.list("v1", "Event")),
        "Events in the bench namespaces": sum(len(c.list("v1", "Event", namespace=ns)) for ns in bench_namespaces(c)),
        "our Pods": len(c.list("v1", "Pod", label_selector=OURS)),
    }


# --- report -----------------------------------------------------------------------------------
def mib(value: float) -> str:
    return f"{value / 2**20:.1f}"


def report(baseline: dict, loaded: dict, counts: dict, baseline_note: str, setup_seconds: float | None) -> str:
    per_job = (loaded["rss"] - baseline["rss"]) / JOBS
    rows = [
        ("0 live jobs (baseline)", baseline),
        (f"{JOBS} live jobs", loaded),
    ]
    header = ("| watcher | VmRSS MiB (median) | min-max | VmHWM (peak) MiB | CPU while sampling "
              "| rows synced after | idle after |")
    lines = [header, "|---|---|---|---|---|---|---|"]
    for name, r in rows:
        lines.append(f"| {name} | {mib(r['rss'])} | {mib(r['rss_min'])}-{mib(r['rss_max'])} | {mib(r['hwm'])} "
                     f"| {r['cpu'] * 100:.0f}% | {r.get('synced_seconds', 0):.0f} s | {r.get('settled_seconds', 0):.0f} s |")
    lines.append(f"| per live job | {per_job / 1024:.1f} KiB | | | | | |")
    table = "\n".join(lines)
    result = (f"RESULT watcher jobs={JOBS} rss_mib={mib(loaded['rss'])} baseline_rss_mib={mib(baseline['rss'])} "
              f"peak_mib={mib(loaded['hwm'])} kib_per_job={per_job / 1024:.1f}")
    seen = ", ".join(f"{k}: {v}" for k, v in counts.items())
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    setup = f" Creating the missing jobs and waiting for Kueue took {setup_seconds:.0f} s." if setup_seconds else ""
    text = f"""# Watcher memory benchmark ({stamp} UTC)

The status watcher (`manage.py watch_cluster`, DEBUG off, as production runs it) on the local
cluster, with {JOBS} live (queued) Kueue training jobs in {TEAMS} teams: per job the suspended
batch Job as `render_job` makes it, the Workload Kueue makes for it, and Kueue's Events. The
teams' quotas are 0 GPUs, so Kueue never admits them and no pod exists. The watcher is sampled
({baseline['samples']}-{loaded['samples']} samples over {SAMPLE_SECONDS:.0f} s, /proc VmRSS and VmHWM) once every row shows what
Kueue says and its CPU time has settled; the baseline is the same command with 0 live jobs,
{baseline_note}.{setup}

{table}

What the watcher's watches saw when sampled (cluster-wide, other users of the shared cluster included): {seen}.

Machine: {machine()}; the API server, etcd, Kueue, Volcano, kwok and other work share these cores.

```
{result}
```
"""
    print()
    print(table)
    print(f"\nwatched objects: {seen}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(f"written to {RESULTS.relative_to(ROOT)}")
    print(result, flush=True)
    return text


# --- main -------------------------------------------------------------------------------------
def run() -> None:
    c = cluster()
    flush_redis()
    reuse = database_exists() and bool(bench_namespaces(c))
    if reuse:
        setup_django()
        reuse = rows_match()
        if not reuse:
            from django.db import connections

            connections.close_all()
    if not reuse:
        if bench_namespaces(c):
            progress("the bench's namespaces do not match its database: starting over")
            cleanup(c)
        create_database()
        setup_django()
        migrate()
    else:
        progress(f"reusing the database {DB_NAME} and the objects of an earlier run")

    baseline, baseline_note = None, ""
    if not reuse:
        # Nothing of the bench on the cluster yet: the baseline, same code, same run.
        baseline = measure("baseline", 0)
        baseline_note = "measured in the same run before the jobs were made"
        save_baseline(baseline)
        seed_rows()
    started = time.monotonic()
    onboard(c)
    apply_jobs(c)
    pending = wait_for_kueue(c)
    setup_seconds = time.monotonic() - started
    loaded = measure(f"{JOBS}-jobs", JOBS, pending)
    counts = cluster_counts(c)
    if not KEEP:
        from django.db import connections

        connections.close_all()
        cleanup(c)
        if baseline is None:
            baseline = measure_clean_baseline()
            baseline_note = "measured in the same run after the clean-up (the jobs were kept from an earlier run)"
    if baseline is None:
        if not BASELINE_FILE.exists():
            raise SystemExit("no baseline: run once without BENCH_WATCHER_KEEP=1")
        baseline = json.loads(BASELINE_FILE.read_text())
        baseline_note = f"recorded by an earlier run at {baseline.get('at', '?')} (objects kept, BENCH_WATCHER_KEEP=1)"
    else:
        save_baseline(baseline)
    report(baseline, loaded, counts, baseline_note, setup_seconds)
    if KEEP:
        progress("objects and database kept (BENCH_WATCHER_KEEP=1); clean up with: "
                 ".venv/bin/python bench/watcher_memory.py cleanup")


def save_baseline(baseline: dict) -> None:
    BASELINE_FILE.parent.mkdir(parents=True, exist_ok=True)
    BASELINE_FILE.write_text(json.dumps({**baseline, "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))


def measure_clean_baseline() -> dict:
    create_database()
    migrate()
    try:
        return measure("baseline", 0)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database()


# --- explain: where the memory goes -----------------------------------------------------------
def deep_size(obj, seen: set) -> int:
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set)):
        size += sum(deep_size(v, seen) for v in obj)
    return size


def explain() -> None:
    """Run the watcher in this process under tracemalloc against the kept objects; print
    what its caches hold, by kind and by part of the object."""
    sys.stdout.reconfigure(line_buffering=True)
    import tracemalloc

    setup_django()
    if not rows_match():
        raise SystemExit("run with BENCH_WATCHER_KEEP=1 first: explain needs the objects and rows")
    reset_rows()
    tracemalloc.start(8)
    from cluster import Cluster
    from jobs.watch.watcher import StatusWatcher, slim  # what the watcher keeps of an object

    before = tracemalloc.take_snapshot()
    watcher = StatusWatcher(Cluster(kubeconfig=KUBECONFIG), resync_seconds=3600)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + SYNC_TIMEOUT
    while (left := unsynced_rows()) and time.monotonic() < deadline:
        progress(f"  {JOBS - left}/{JOBS} rows synced")
        time.sleep(5)
    time.sleep(5)
    after = tracemalloc.take_snapshot()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()  # the analysis below would be traced too, and crawl
    print(f"\ntracemalloc: {current / 2**20:.1f} MiB traced now, {peak / 2**20:.1f} MiB peak")
    print("\nTop allocations since the watcher started, by where they were made:")
    ours = [tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>")]
    for stat in after.filter_traces(ours).compare_to(before.filter_traces(ours), "traceback")[:4]:
        print(f"  {stat.size_diff / 2**20:8.1f} MiB  {stat.count_diff:>8} blocks")
        frames = [f for f in stat.traceback if f.filename.startswith(str(ROOT)) and "/.venv/" not in f.filename]
        for frame in (frames or list(stat.traceback))[-4:]:  # our innermost frames
            print(f"      {frame.filename.replace(str(ROOT) + '/', '')}:{frame.lineno}")
    with watcher._lock:
        print(f"\nDeep size (sys.getsizeof, recursively) of what the watcher holds ({JOBS} bench jobs; "
              "the shared cluster's other objects included):")
        print(f"  {'kind':<40} {'objects':>7} {'MiB':>6} {'KiB/obj':>7} {'JSON KiB/obj':>12} "
              f"{'managedFields':>13} {'spec':>6} {'slim KiB/obj':>12}")
        shared: set = set()
        for kind, objects in list(watcher._cache.items()):
            total = deep_size(objects, shared)
            managed = spec = json_bytes = slim_bytes = 0
            for obj in objects.values():
                managed += deep_size((obj.get("metadata") or {}).get("managedFields"), set())
                spec += deep_size(obj.get("spec"), set())
                json_bytes += len(json.dumps(obj))
                slim_bytes += deep_size(slim(obj), set())
            n = max(len(objects), 1)
            print(f"  {'/'.join(kind):<40} {len(objects):>7} {total / 2**20:>6.1f} {total / n / 1024:>7.1f} "
                  f"{json_bytes / n / 1024:>12.1f} {managed / n / 1024:>9.1f} KiB {spec / n / 1024:>3.1f} KiB"
                  f" {slim_bytes / n / 1024:>12.1f}")
        for kind, stream in list(watcher._streams.items()):
            known = getattr(stream, "_known", {})
            extra = deep_size(known, shared)  # beyond what the cache above already counted
            print(f"  stream {'/'.join(kind):<33} {len(known):>8} {extra / 2**20:>8.1f}  (its own `_known`, "
                  f"beyond objects shared with the cache)")
        print(f"  warnings remembered: {len(watcher._warnings)}, {deep_size(watcher._warnings, shared) / 2**20:.1f} MiB")
    watcher.stop()
    thread.join(timeout=30)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    if command == "run":
        run()
    elif command == "cleanup":
        cleanup(cluster())
    elif command == "explain":
        explain()
    else:
        raise SystemExit(f"usage: {sys.argv[0]} [run|cleanup|explain]")


if __name__ == "__main__":
    main()
