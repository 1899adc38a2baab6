"""`make bench-reconcile`: onboard N teams with our reconciler and with
`kubectl apply --server-side`, on the same API server, in the same run.

Both sides get the same shape of objects (render_team output for N teams each, about
fourteen objects a team), under different team names so each side creates from scratch.
Then both re-apply unchanged, which for us must issue zero writes: once with the watch
cache warm (the worker's steady state: no request at all) and once from a new process's
cold cache (one LIST per kind in total). Each timed phase starts on a quiet machine (no
namespace terminating, the cores under a quarter busy), so neither side pays for the work
the other's objects set off in the controllers. Results are printed and written to
bench/results/reconcile.md, ending with a RESULT line.
"""

import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuplatform.settings")
os.environ.setdefault("DEBUG", "true")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='gpuplatform-bench-')}/bench.sqlite3")
# Rows made here would enqueue reconciles (membership signals); the bench runs them itself.
os.environ.setdefault("CELERY_BROKER_URL", "memory://")

import django  # noqa: E402

django.setup()

import subprocess  # noqa: E402

import yaml  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402

from bench.machine import machine, wait_for_idle  # noqa: E402
from cluster import Cluster  # noqa: E402
from core.owners import Scope, labelled_kinds, registered  # noqa: E402
from core.ownership import selector  # noqa: E402
from deploy.stack import components  # noqa: E402
from quotas.manifests import render_cluster, render_team_quotas  # noqa: E402
from quotas.models import GpuFlavor, Quota  # noqa: E402
from quotas.tasks import sync_team_quotas  # noqa: E402
from tenants.manifests import render_team  # noqa: E402
from tenants.models import Membership, Team  # noqa: E402
from tenants.tasks import sync_team  # noqa: E402

TEAMS = int(os.environ.get("BENCH_TEAMS", "200"))
THREADS = int(os.environ.get("BENCH_THREADS", "16"))
KUBECONFIG = os.environ.get("KUBECONFIG") or str(Path.home() / ".cache/gpuplatform/cluster/kubeconfig")
RESULTS = ROOT / "bench" / "results" / "reconcile.md"
CPU: list[float] = []  # this process's CPU seconds in each of our runs (client side: Django, render, HTTP)


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def kubectl_binary() -> str:
    kubectl = components.get("kubernetes").binary("kubectl")
    if not Path(kubectl).exists():
        sys.exit("kubectl is not built: run make cluster-up first")
    return kubectl


def make_teams(prefix: str, flavor: GpuFlavor, users) -> list[Team]:
    teams = []
    for number in range(TEAMS):
        team = Team.objects.create(slug=f"{prefix}{number:04d}", display_name=f"Bench {number}")
        Membership.objects.create(team=team, user=users[0], role=Membership.Role.OWNER)
        Membership.objects.create(team=team, user=users[1], role=Membership.Role.VIEWER)
        Quota.objects.create(team=team, flavor=flavor, nominal_gpus=8, cpu_cores=64, memory_gib=512)
        teams.append(team)
    return teams


def ours(cluster: Cluster, teams: list[Team]) -> tuple[float, int]:
    def one(team):
        try:
            return (sync_team(cluster, team) + sync_team_quotas(cluster, team)).writes
        finally:
            connections.close_all()

    start, cpu = time.perf_counter(), time.process_time()
    # Applied, not synced: a prune of cluster-wide objects would take those of whoever else
    # uses this cluster (the tests' flavors) for strays.
    flavor = GpuFlavor.objects.get(name="bench-h100")
    writes = sum(r.wrote for r in cluster.apply(render_cluster([flavor], [], [])))
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        writes += sum(pool.map(one, teams))
    CPU.append(time.process_time() - cpu)
    return time.perf_counter() - start, writes


def kubectl(manifest: Path) -> float:
    start = time.perf_counter()
    subprocess.run([kubectl_binary(), "--kubeconfig", KUBECONFIG, "apply", "--server-side",
                    "--force-conflicts", "--field-manager=kubectl-bench", "-f", str(manifest)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def requests_of(cluster: Cluster) -> dict[str, int]:
    return {verb: n for verb, n in cluster.requests.items() if n}


def cleanup(cluster: Cluster, teams: list[Team]) -> None:
    kinds = labelled_kinds(registered(), Scope.TEAM)  # what offboarding deletes
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        list(pool.map(lambda t: cluster.prune(selector(team=t.slug), [], kinds), teams))


def wait_for_quiet(cluster: Cluster, timeout: float = 600) -> None:
    """Wait until no namespace is terminating: a previous run's cleanup (or a test suite's)
    goes on deleting for minutes after it returns, and would slow whichever side runs first.
    Between the phases `wait_for_idle` does the same for what the phase before set off."""
    deadline = time.monotonic() + timeout
    while True:
        terminating = [ns for ns in cluster.list("v1", "Namespace")
                       if (ns.get("status") or {}).get("phase") == "Terminating"]
        if not terminating:
            return
        if time.monotonic() > deadline:
            progress(f"  still {len(terminating)} namespaces terminating after {timeout:.0f} s; measuring anyway")
            return
        progress(f"  waiting for {len(terminating)} terminating namespaces to go")
        time.sleep(5)


def main() -> None:
    progress(f"{TEAMS} teams per side, {THREADS} threads, API server from {KUBECONFIG}")
    call_command("migrate", verbosity=0)
    User = get_user_model()
    users = [User.objects.get_or_create(username=name)[0] for name in ("bench-owner", "bench-viewer")]
    flavor, _ = GpuFlavor.objects.get_or_create(
        name="bench-h100", defaults=dict(resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
                                         node_labels={"gpuplatform.io/pool": "h100"}))
    run = time.strftime("%H%M%S")
    kubectl_teams = make_teams(f"bk{run}-", flavor, users)
    our_teams = make_teams(f"bo{run}-", flavor, users)
    cluster = Cluster(kubeconfig=KUBECONFIG, field_manager="gpuplatform", watch_cache=True)
    wait_for_quiet(cluster)

    objects = render_cluster([flavor], [], []) + [
        obj for team in kubectl_teams
        for obj in render_team(team, list(team.memberships.select_related("user")))
        + render_team_quotas(team, list(Quota.objects.of_team(team)))]
    manifest = Path(tempfile.mkdtemp()) / "teams.yaml"
    manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    per_team = (len(objects) - 1) // TEAMS
    progress(f"rendered {len(objects)} objects ({per_team} a team) for kubectl")

    try:
        wait_for_idle(progress)
        progress("kubectl apply --server-side: create")
        kubectl_create = kubectl(manifest)
        progress(f"  {kubectl_create:.1f} s")
        wait_for_idle(progress)
        progress("our reconciler: create (the watch cache starts with it)")
        cluster.reset_counts()
        our_create, create_writes = ours(cluster, our_teams)
        create_requests = requests_of(cluster)
        progress(f"  {our_create:.1f} s, {create_writes} writes")
        wait_for_idle(progress)
        progress("kubectl apply --server-side: no-op re-apply")
        kubectl_noop = kubectl(manifest)
        progress(f"  {kubectl_noop:.1f} s")
        wait_for_idle(progress)
        progress("our reconciler: no-op resync, warm cache")
        cluster.reset_counts()
        our_noop, noop_writes = ours(cluster, our_teams)
        noop_requests = requests_of(cluster)
        progress(f"  {our_noop:.1f} s, {noop_writes} writes, requests {noop_requests}")
        wait_for_idle(progress)
        progress("our reconciler: no-op resync, cold cache (a new worker process)")
        cold = Cluster(kubeconfig=KUBECONFIG, field_manager="gpuplatform", watch_cache=True)
        try:
            our_cold, cold_writes = ours(cold, our_teams)
            cold_requests = requests_of(cold)
        finally:
            cold.close()
        progress(f"  {our_cold:.1f} s, {cold_writes} writes, requests {cold_requests}")
    finally:
        progress("cleaning up both sides")
        cleanup(cluster, kubectl_teams + our_teams)

    def verbs(counts):
        return ", ".join(f"{verb} {n}" for verb, n in sorted(counts.items()))

    table = "\n".join([
        f"# Reconcile benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"{TEAMS} teams per side, {per_team} objects a team ({per_team * TEAMS} objects), one local API server "
        f"(deploy/local-cluster), {os.cpu_count()} cores; ours with {THREADS} threads; each phase started with the "
        "cores under a quarter busy.",
        "",
        "| run | kubectl apply --server-side | our reconciler | ratio (kubectl / ours) | our writes |",
        "|---|---|---|---|---|",
        f"| create | {kubectl_create:.1f} s | {our_create:.1f} s | {kubectl_create / our_create:.2f}x | {create_writes} |",
        f"| no-op re-apply, warm cache | {kubectl_noop:.1f} s | {our_noop:.2f} s | {kubectl_noop / our_noop:.2f}x "
        f"| {noop_writes} |",
        f"| no-op re-apply, cold cache | {kubectl_noop:.1f} s | {our_cold:.2f} s | {kubectl_noop / our_cold:.2f}x "
        f"| {cold_writes} |",
        "",
        f"Our requests by verb, create: {verbs(create_requests)}",
        f"CPU seconds of the bench process (rendering, database, HTTP client) in our runs: create {CPU[0]:.1f}, "
        f"no-op warm {CPU[1]:.1f}, no-op cold {CPU[2]:.1f}.",
        f"Our requests by verb, no-op resync with the watch cache warm: {verbs(noop_requests) or 'none'}",
        f"Our requests by verb, no-op resync from a cold cache: {verbs(cold_requests) or 'none'} "
        f"(one LIST and one WATCH per kind, for all {TEAMS} teams)",
        "",
        "Machine: " + machine(),
        "",
    ])
    result = (f"RESULT reconcile create_ratio={kubectl_create / our_create:.2f} noop_ratio={kubectl_noop / our_noop:.2f} "
              f"noop_requests={sum(noop_requests.values())} noop_writes={noop_writes} "
              f"cold_noop_requests={sum(cold_requests.values())} cold_noop_writes={cold_writes}")
    RESULTS.write_text(table + "\n```\n" + result + "\n```\n")
    print()
    print(table)
    print(result)
    if noop_writes or cold_writes:
        sys.exit(f"a no-op resync wrote {noop_writes + cold_writes} times; it must write nothing")


if __name__ == "__main__":
    main()
