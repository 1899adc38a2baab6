"""`make bench-e2e`: the whole path, from a CI pipeline's POST to a finished job on the
row, against Kueue alone on the same cluster in the same run.

1. A local cluster of its own (cluster.sh, the `e2e` profile of deploy/stack/profiles.py), a fresh PostgreSQL database
   and Redis database; one team with an H100 quota (Kueue) and an A100 quota (Volcano),
   each large enough that admission is never held back by quota.
2. The platform's real processes, started by the soak's machinery (`bench.soak.processes`):
   gunicorn API, Celery worker (its reconciles read from the watch cache), beat, watcher.
3. Ours: BENCH_E2E_JOBS one-GPU training jobs (half Kueue, half Volcano; all Kueue with
   BENCH_E2E_SCHEDULERS=kueue) submitted through
   the API by BENCH_E2E_CLIENTS threads; jobs/s from the first submission to the last
   job admitted and succeeded, as the rows say.
4. Status lag: for each admission and each success, the row's event time minus the moment
   the cluster showed it (a Workload's Admitted, a PodGroup going Inqueue, a Job Complete,
   a Volcano Job Completed, first seen by this process's own watches).
5. Baseline: the same number of queue-labelled suspended batch Jobs created straight onto
   a Kueue LocalQueue by as many threads, timed the same way from the cluster's side.

The cluster stays up for the next run (`make e2e-cluster-down` stops it;
GPUPLATFORM_CLUSTER_STOP=1 stops it at the end). Prints a table, writes
bench/results/e2e.md, and ends with
`RESULT e2e jobs=... admission_ratio=... lag_p50_s=... lag_p99_s=...` (ours / Kueue alone).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_times, cpu_used, machine  # noqa: E402
from bench.soak import world  # noqa: E402
from bench.soak.api import Api  # noqa: E402
from bench.soak.processes import Processes, cluster_sh, cluster_up, kubectl, kubectl_binary  # noqa: E402
from bench.soak.profile import Profile, _with_path, platform_env  # noqa: E402
from deploy.stack import profiles  # noqa: E402
from workloads.kinds import training  # noqa: E402

JOBS = int(os.environ.get("BENCH_E2E_JOBS", "1000"))
CLIENTS = int(os.environ.get("BENCH_E2E_CLIENTS", "8"))
JOB_SECONDS = os.environ.get("BENCH_E2E_JOB_SECONDS", "2s")  # how long kwok runs each pod
# "both" (half Kueue, half Volcano) or "kueue": every job of ours on Kueue, like for like with
# the baseline (no Volcano half sharing the cores).
SCHEDULERS = os.environ.get("BENCH_E2E_SCHEDULERS", "both")
if SCHEDULERS not in ("both", "kueue"):
    raise SystemExit(f"BENCH_E2E_SCHEDULERS={SCHEDULERS!r}: 'both' or 'kueue'")
VOLCANO_JOBS = JOBS // 2 if SCHEDULERS == "both" else 0
KUEUE_JOBS = JOBS - VOLCANO_JOBS
TIMEOUT = float(os.environ.get("BENCH_E2E_TIMEOUT_SECONDS", "3600"))
RESULTS = ROOT / "bench" / "results" / "e2e.md"
BASELINE_NS = "e2e-kueue-baseline"
TEAM = "e2e"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NODES_YAML = ROOT / "deploy" / "local-cluster" / "config" / "nodes.yaml"
EXTRA_NODE_PREFIX = "e2e-"
EXTRA_NODE_LABEL = "gpuplatform.io/e2e-room"


def progress(message: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {message}", flush=True)


def profile() -> Profile:
    base_db = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:55432/gpuplatform"
    base_redis = os.environ.get("REDIS_URL") or "redis://127.0.0.1:56379/0"
    stack = profiles.get("e2e")  # its Redis database and its own cluster
    return Profile(
        minutes=0, jobs_per_kind=JOBS, sweep_seconds=120, lag_budget_seconds=2, seed=0,
        api_port=int(os.environ.get("BENCH_E2E_API_PORT", "18865")),
        database_url=_with_path(base_db, "/gpuplatform_e2e"),
        redis_url=stack.redis_url(base_redis),
        cluster_dir=Path(os.environ.get("BENCH_E2E_CLUSTER_DIR") or stack.cluster_dir),
        logs=ROOT / "var" / "e2e", keep=False, stop_cluster=os.environ.get("GPUPLATFORM_CLUSTER_STOP") == "1",
        cluster_port_offset=stack.port_offset,
    )


def room_for_every_job(kubeconfig: str) -> int:
    """Add fake nodes (copies of the cluster's first H100 and A100 node) until each pool has
    a GPU for every job of its half, so nodes never pace admission: Kueue admits by quota
    whatever the nodes hold, but Volcano enqueues a gang only when the nodes have room for
    it, and with the cluster's 16 A100s the Volcano half would measure the pool instead of
    the pipeline. Returns how many nodes were added (none on a rerun)."""
    import yaml

    templates = {doc["metadata"]["labels"]["gpuplatform.io/pool"]: doc
                 for doc in yaml.safe_load_all(NODES_YAML.read_text())
                 if doc and doc.get("kind") == "Node" and doc["metadata"].get("labels", {}).get("gpuplatform.io/pool")}
    nodes = []
    for pool, jobs in (("h100", KUEUE_JOBS), ("a100", VOLCANO_JOBS)):
        template = templates[pool]
        per_node = int(template["status"]["allocatable"]["nvidia.com/gpu"])
        for i in range(-(-jobs // per_node)):
            node = yaml.safe_load(yaml.safe_dump(template))
            node["metadata"]["name"] = name = f"{EXTRA_NODE_PREFIX}{pool}-{i}"
            node["metadata"]["labels"].update({"kubernetes.io/hostname": name, EXTRA_NODE_LABEL: "true"})
            nodes.append(node)
    applied = subprocess.run([kubectl_binary(), "--kubeconfig", kubeconfig, "apply", "--server-side",
                              "--force-conflicts", "-f", "-"], input=yaml.safe_dump_all(nodes), text=True, check=False,
                             capture_output=True, timeout=300)
    if applied.returncode != 0:
        raise SystemExit(f"could not add the extra fake nodes: {applied.stderr.strip()}")
    ready = kubectl(kubeconfig, "wait", "--for=condition=Ready", "node", "-l", f"{EXTRA_NODE_LABEL}=true",
                    "--timeout=180s", timeout=200)
    if ready.returncode != 0:
        raise SystemExit(f"the extra fake nodes did not turn Ready: {ready.stderr.strip()}")
    return len(nodes)


CLUSTER_PARTS = {"vc-scheduler": "Volcano", "vc-controller-manager": "Volcano", "kube-apiserver": "API server",
                 "kueue": "Kueue", "etcd": "etcd", "kwok": "kwok (fake kubelets)"}


def parts_of(cluster_dir: Path, procs: Processes):
    """Names the processes whose CPU a run counts: ours (by process group), the cluster's
    (by its directory on their command line), PostgreSQL, Redis and this process."""
    ours = {proc.pid: name for name, proc in procs.procs.items()}
    me, marker = os.getpid(), str(cluster_dir)

    def name_of(pid: int, pgid: int, argv: list[str]) -> str | None:
        if pid == me:
            return "bench (clients, observer)"
        if pgid in ours:
            return f"ours: {ours[pgid]}"
        program = os.path.basename(argv[0]) if argv else ""
        if marker in " ".join(argv):
            base = program.rsplit("-v", 1)[0]
            return CLUSTER_PARTS.get(base, base)
        if program.startswith("postgres"):
            return "PostgreSQL (all its databases)"
        if program.startswith("redis-server"):
            return "Redis"
        return None

    return name_of


def fresh_database(url: str) -> None:
    from urllib.parse import urlsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    assert name.endswith("_e2e"), name
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def seed() -> str:
    """One team, an H100 (Kueue) and an A100 (Volcano) quota of JOBS GPUs each; its token."""
    from django.contrib.auth import get_user_model

    from quotas.models import GpuFlavor, Quota
    from tenants.models import Membership, Team
    from tenants.tokens import ALL_SCOPES, ApiToken

    owner = get_user_model().objects.create_user("e2e-ci", password="e2e-ci-pass")
    team = Team.objects.create(slug=TEAM, display_name="End to end")
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    for name, scheduler, pool in (("h100", "kueue", "h100"), ("a100", "volcano", "a100")):
        flavor = GpuFlavor.objects.create(
            name=name, scheduler=scheduler, resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
            node_labels={"gpuplatform.io/pool": pool}, node_taints=[GPU_TAINT], tolerations=[GPU_TOLERATION])
        Quota.objects.create(team=team, flavor=flavor, nominal_gpus=JOBS, cpu_cores=JOBS, memory_gib=JOBS)
    return ApiToken.objects.issue(user=owner, team=team, scopes=ALL_SCOPES, name="e2e pipeline")[1]


class Seen:
    """First moments this process saw each cluster transition (wall clock), by object."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.first: dict[tuple, float] = {}  # (what, namespace, name) -> time
        self.owner: dict[tuple, str] = {}  # (namespace, workload or podgroup) -> owner name
        self.streams, self.threads = [], []
        self.lock = threading.Lock()

    def mark(self, what: str, ns: str, name: str) -> None:
        with self.lock:
            self.first.setdefault((what, ns, name), time.time())

    def start(self) -> None:
        for api_version, kind in (("kueue.x-k8s.io/v1beta2", "Workload"), ("batch/v1", "Job"),
                                  ("batch.volcano.sh/v1alpha1", "Job"), ("scheduling.volcano.sh/v1beta1", "PodGroup")):
            stream = self.cluster.watch(api_version, kind)
            self.streams.append(stream)
            thread = threading.Thread(target=self._run, args=(kind, api_version, stream), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _run(self, kind, api_version, stream) -> None:
        while not stream.stopped:
            try:
                for _, obj in stream:
                    self._see(kind, api_version, obj)
            except Exception as exc:  # noqa: BLE001 - keep watching
                progress(f"observer: {kind}: {exc}")
                time.sleep(1)

    def _see(self, kind, api_version, obj) -> None:
        meta, status = obj["metadata"], obj.get("status") or {}
        ns, name = meta.get("namespace", ""), meta["name"]
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        owners = meta.get("ownerReferences") or []
        if kind == "Workload":
            if owners:
                self.owner[(ns, name)] = owners[0]["name"]
            if conds.get("Admitted") == "True":
                self.mark("admitted", ns, self.owner.get((ns, name), name))
        elif kind == "PodGroup":
            if owners and status.get("phase") in ("Inqueue", "Running"):
                self.mark("admitted", ns, owners[0]["name"])
        elif api_version == "batch/v1":
            self.mark("created", ns, name)
            if conds.get("Complete") == "True" or conds.get("SuccessCriteriaMet") == "True":
                self.mark("succeeded", ns, name)
        else:
            self.mark("created", ns, name)
            if (status.get("state") or {}).get("phase") == "Completed":
                self.mark("succeeded", ns, name)

    def stop(self) -> None:
        for stream in self.streams:
            stream.stop()


def rate(count: int, start: float, times: list[float]) -> float:
    return count / (max(times) - start) if times and max(times) > start else 0.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_ours(api: Api, seen: Seen) -> dict:
    from django.db.models import Count

    from jobs.manifests import object_name
    from jobs.models import Job, JobEvent

    bodies = [dict(team=TEAM, name=f"e2e-{i:05d}", kind=training.NAME, flavor="a100" if i % 2 and VOLCANO_JOBS else "h100",
                   image="registry.example/e2e:1", command=["sleep", "1"], workers=1, gpus_per_worker=1,
                   cpu_per_worker=1, memory_per_worker_gib=1, env={"GPUPLATFORM_FAKE_DURATION": JOB_SECONDS})
              for i in range(JOBS)]
    start = time.time()

    def submit(body):
        status, answer = api.submit(body, key=body["name"])
        assert status in (200, 201), (status, answer)
        return answer["id"]

    with ThreadPoolExecutor(CLIENTS) as pool:
        ids = list(pool.map(submit, bodies))
    submitted = time.time()
    progress(f"ours: {JOBS} submitted in {submitted - start:.1f} s ({JOBS / (submitted - start):.1f}/s)")
    deadline = start + TIMEOUT
    while time.time() < deadline:
        states = dict(Job.objects.filter(pk__in=ids).values_list("state").annotate(n=Count("pk")))
        progress(f"ours: {states}")
        if sum(n for s, n in states.items() if s in ("succeeded", "failed", "cancelled")) == JOBS:
            break
        time.sleep(5)
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=ids).select_related("team", "flavor")}
    admitted = [j.admitted_at.timestamp() for j in jobs.values() if j.admitted_at]
    # Volcano enqueues a gang only when the cluster has room, so its half is paced by the
    # A100 pool; the Kueue half is the like-for-like comparison with Kueue alone.
    kueue_admitted = [j.admitted_at.timestamp() for j in jobs.values() if j.admitted_at and j.flavor.name == "h100"]
    finished = [j.finished_at.timestamp() for j in jobs.values() if j.state == "succeeded" and j.finished_at]
    lags = []
    for event in JobEvent.objects.filter(job_id__in=ids, to_state__in=("admitted", "succeeded")):
        job = jobs[event.job_id]
        cluster_time = seen.first.get((event.to_state, job.team.namespace_name, object_name(job)))
        if cluster_time is not None:
            lags.append(event.created_at.timestamp() - cluster_time)
    by_state = {}
    stages = {"ours: submit -> on the cluster (API, worker)": [], "ours, Kueue half: on the cluster -> admitted": [],
              "ours, Volcano half: on the cluster -> admitted": []}
    for job in jobs.values():
        by_state[job.state] = by_state.get(job.state, 0) + 1
        key = (job.team.namespace_name, object_name(job))
        on_cluster, admitted_at = seen.first.get(("created", *key)), seen.first.get(("admitted", *key))
        if on_cluster is not None and job.submitted_at:
            stages["ours: submit -> on the cluster (API, worker)"].append(on_cluster - job.submitted_at.timestamp())
        if on_cluster is not None and admitted_at is not None:
            half = "Kueue" if job.flavor.name == "h100" else "Volcano"
            stages[f"ours, {half} half: on the cluster -> admitted"].append(admitted_at - on_cluster)
    return dict(start=start, stages=stages, submit_rate=JOBS / (submitted - start), admitted=len(admitted),
                admit_rate=rate(len(admitted), start, admitted), succeeded=len(finished),
                success_rate=rate(len(finished), start, finished), lags=lags, states=by_state,
                kueue_admitted=len(kueue_admitted), kueue_admit_rate=rate(len(kueue_admitted), start, kueue_admitted))


def run_baseline(cluster, seen: Seen) -> dict:
    """The same number of one-GPU batch Jobs, queue-labelled and suspended, straight onto Kueue."""
    cluster.apply([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BASELINE_NS}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": BASELINE_NS},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": BASELINE_NS}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                      {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": str(JOBS)},
                                                     {"name": "memory", "nominalQuota": f"{JOBS}Gi"},
                                                     {"name": "nvidia.com/gpu", "nominalQuota": str(JOBS)}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "baseline", "namespace": BASELINE_NS}, "spec": {"clusterQueue": BASELINE_NS}},
    ])
    time.sleep(3)  # the ClusterQueue turns active

    def job(i):
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": f"base-{i:05d}", "namespace": BASELINE_NS, "labels": {"kueue.x-k8s.io/queue-name": "baseline"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "tolerations": [GPU_TOLERATION],
                "containers": [{"name": "main", "image": "registry.example/e2e:1", "command": ["sleep", "1"],
                                "env": [{"name": "GPUPLATFORM_FAKE_DURATION", "value": JOB_SECONDS}],
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                              "limits": {"nvidia.com/gpu": "1"}}}]}}}}

    start = time.time()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda i: cluster.apply([job(i)]), range(JOBS)))
    created = time.time()
    progress(f"baseline: {JOBS} created in {created - start:.1f} s")
    names = [f"base-{i:05d}" for i in range(JOBS)]
    deadline = start + TIMEOUT
    while time.time() < deadline:
        done = sum(("succeeded", BASELINE_NS, n) in seen.first for n in names)
        admitted = sum(("admitted", BASELINE_NS, n) in seen.first for n in names)
        progress(f"baseline: {admitted} admitted, {done} succeeded")
        if done == JOBS:
            break
        time.sleep(5)
    admitted = [seen.first[k] for n in names if (k := ("admitted", BASELINE_NS, n)) in seen.first]
    finished = [seen.first[k] for n in names if (k := ("succeeded", BASELINE_NS, n)) in seen.first]
    waits = [seen.first[("admitted", BASELINE_NS, n)] - seen.first[("created", BASELINE_NS, n)] for n in names
             if ("admitted", BASELINE_NS, n) in seen.first and ("created", BASELINE_NS, n) in seen.first]
    return dict(start=start, stages={"Kueue alone: on the cluster -> admitted": waits}, submit_rate=JOBS / (created - start), admitted=len(admitted),
                admit_rate=rate(len(admitted), start, admitted), succeeded=len(finished),
                success_rate=rate(len(finished), start, finished))


def cpu_table(ours: dict, base: dict) -> str:
    rows = ["| part | ours: CPU s | ours: CPU ms a job | Kueue alone: CPU s | Kueue alone: CPU ms a job |",
            "|---|---|---|---|---|"]
    for part in sorted(set(ours) | set(base), key=lambda p: (not p.startswith("ours"), -ours.get(p, 0))):
        o, b = ours.get(part, 0.0), base.get(part, 0.0)
        rows.append(f"| {part} | {o:.1f} | {o / JOBS * 1000:.0f} | {b:.1f} | {b / JOBS * 1000:.0f} |")
    o, b = sum(ours.values()), sum(base.values())
    rows.append(f"| **all** | **{o:.1f}** | **{o / JOBS * 1000:.0f}** | **{b:.1f}** | **{b / JOBS * 1000:.0f}** |")
    return "\n".join(rows)


def main() -> int:
    # Stopped from outside (kill, Ctrl-C): unwind, so the `finally`s stop our processes
    # instead of leaving a worker behind to take the next run's tasks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    prof = profile()
    progress(f"{JOBS} jobs, {CLIENTS} clients, pods run {JOB_SECONDS}; database {prof.database_name}, "
             f"Redis {prof.redis_url}, cluster {prof.cluster_dir}")
    cluster = cluster_up(prof)
    kubeconfig = cluster["kubeconfig"]
    env = {**platform_env(prof, cluster), "API_THROTTLE_RATE": "1000000/minute"}
    fresh_database(prof.database_url)
    world.migrate(env)
    os.environ.update(env)
    import django

    django.setup()
    from cluster import Cluster

    progress("emptying the cluster of earlier runs")
    world.empty_cluster(kubeconfig)
    kubectl(kubeconfig, "delete", "namespace", BASELINE_NS, "--ignore-not-found", "--wait=true", timeout=300)
    kubectl(kubeconfig, "delete", "clusterqueue", BASELINE_NS, "--ignore-not-found")
    added = room_for_every_job(kubeconfig)
    progress(f"{added} fake nodes added: each pool has a GPU for every job of its half")
    token = seed()
    world.first_reconcile(env)
    import redis

    redis.Redis.from_url(prof.redis_url).flushdb()
    seen = Seen(Cluster(kubeconfig=kubeconfig, field_manager="e2e-observer"))
    seen.start()
    procs = Processes(prof, env)
    name_of = parts_of(prof.cluster_dir, procs)
    try:
        before = cpu_times(name_of)
        procs.start_all()
        name_of = parts_of(prof.cluster_dir, procs)
        progress("ours: submitting through the API")
        ours = run_ours(Api(prof.api_url, token), seen)
        ours["cpu"] = cpu_used(before, cpu_times(name_of))
    finally:
        procs.stop_all()
    try:
        progress("baseline: batch Jobs straight onto Kueue")
        before = cpu_times(name_of)
        base = run_baseline(Cluster(kubeconfig=kubeconfig, field_manager="e2e-baseline"), seen)
        base["cpu"] = cpu_used(before, cpu_times(name_of))
    finally:
        seen.stop()
        kubectl(kubeconfig, "delete", "namespace", BASELINE_NS, "--wait=false")
        kubectl(kubeconfig, "delete", "clusterqueue", BASELINE_NS, "--wait=false")
        kubectl(kubeconfig, "delete", "namespaces", "-l", "app.kubernetes.io/managed-by=gpuplatform", "--wait=false")
        if prof.stop_cluster:
            cluster_sh(prof, "down")

    lags = ours["lags"]
    ratio = ours["admit_rate"] / base["admit_rate"] if base["admit_rate"] else float("nan")
    kueue_ratio = ours["kueue_admit_rate"] / base["admit_rate"] if base["admit_rate"] else float("nan")
    table = "\n".join([
        f"# End-to-end benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"{JOBS} one-GPU training jobs ({KUEUE_JOBS} Kueue, {VOLCANO_JOBS} Volcano) submitted through the API "
        f"by {CLIENTS} clients; pods run {JOB_SECONDS} on kwok nodes of 8 GPUs, as many as give each pool a GPU "
        f"for every job of its half ({added} nodes added to the cluster's 4 H100 and 2 A100). Baseline: {JOBS} "
        f"queue-labelled suspended batch Jobs created straight onto one Kueue LocalQueue by {CLIENTS} threads. "
        "Quotas and nodes are large enough that only the pipeline, not quota or room, paces admission. "
        f"Our worker: {os.environ.get('CELERY_WORKER_CONCURRENCY')} reconciles in flight "
        f"({os.environ.get('CELERY_WORKER_POOL', 'threads')} pool); the API: gunicorn, "
        f"{os.environ.get('WEB_CONCURRENCY')} workers.",
        "",
        "| | submitted/s | admitted | admitted/s (from first submit) | succeeded | succeeded/s |",
        "|---|---|---|---|---|---|",
        f"| ours (API -> worker -> cluster -> watcher -> row) | {ours['submit_rate']:.1f} | {ours['admitted']} "
        f"| {ours['admit_rate']:.2f} | {ours['succeeded']} | {ours['success_rate']:.2f} |",
        f"| ours, the Kueue half only | | {ours['kueue_admitted']} | {ours['kueue_admit_rate']:.2f} | | |",
        f"| Kueue alone (batch Jobs) | {base['submit_rate']:.1f} | {base['admitted']} | {base['admit_rate']:.2f} "
        f"| {base['succeeded']} | {base['success_rate']:.2f} |",
        "",
        f"Admission throughput, ours / Kueue alone: **{ratio:.2f}x** (all jobs), **{kueue_ratio:.2f}x** for our "
        "Kueue half (the like-for-like one: Volcano admits a gang when the nodes have room, Kueue by quota).",
        f"Status lag (cluster transition first seen -> row event), over {len(lags)} admissions and successes: "
        f"p50 {pct(lags, 0.5):.2f} s, p90 {pct(lags, 0.9):.2f} s, p99 {pct(lags, 0.99):.2f} s, "
        f"max {max(lags) if lags else float('nan'):.2f} s"
        + (f", mean {statistics.mean(lags):.2f} s." if lags else "."),
        f"Our final states: {ours['states']}.",
        "",
        "Where a job waits (seconds; \"on the cluster\": its batch Job or Volcano Job first seen by this process):",
        "",
        "| stage | jobs | p50 | p90 | max |",
        "|---|---|---|---|---|",
        *(f"| {name} | {len(values)} | {pct(values, 0.5):.1f} | {pct(values, 0.9):.1f} | "
          f"{max(values) if values else float('nan'):.1f} |" for name, values in {**ours["stages"], **base["stages"]}.items()),
        "",
        "CPU seconds each part used, from the first submission until every job succeeded (ours: our "
        "processes' start-up included):",
        "",
        cpu_table(ours["cpu"], base["cpu"]),
        "",
        "Machine: " + machine() + "; the API server, etcd, Kueue, Volcano, kwok and the platform's processes "
        "share these cores (and other work on the machine).",
        "",
    ])
    result = (f"RESULT e2e jobs={JOBS} admission_ratio={ratio:.2f} lag_p50_s={pct(lags, 0.5):.2f} "
              f"lag_p99_s={pct(lags, 0.99):.2f} kueue_admission_ratio={kueue_ratio:.2f}")
    RESULTS.write_text(table + "\n```\n" + result + "\n```\n")
    print("\n" + table)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
