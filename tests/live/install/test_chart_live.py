"""The chart on the local cluster (kwok runs its pods on the CPU node): `helm install`
into a namespace that enforces the restricted Pod Security profile, every Deployment
available; then the platform, with the chart's ServiceAccount as its identity, converges
teams, quotas and jobs of both schedulers with no 403, and runs `reconcile --all`, a
sweep and the status watcher with the worker's watch cache on, every kind it holds
watched and not one request refused; `auth can-i` shows what that identity cannot do; two
watchers share one Lease and the standby takes over."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.db import connection

from core.owners import registered
from jobs.lifecycle import State
from jobs.tasks import sync_job
from quotas.tasks import sync_cluster_objects, sync_team_quotas
from tenants.tasks import sync_team

from ...support.chart import KUBECTL, REPO, kubectl
from ...support.cluster import reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def platform_kubeconfig(release, kube_cluster, tmp_path_factory) -> str:
    """A kubeconfig whose user is the chart's ServiceAccount (a token from the TokenRequest API)."""
    token = kubectl(kube_cluster, "-n", release["namespace"], "create", "token", release["sa"],
                    "--duration", "2h").stdout.strip()
    admin = yaml.safe_load(Path(kube_cluster).read_text())
    admin["users"] = [{"name": "platform", "user": {"token": token}}]
    for context in admin["contexts"]:
        context["context"]["user"] = "platform"
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(admin))
    return str(path)


@pytest.fixture
def as_platform(platform_kubeconfig, monkeypatch):
    """Tasks, commands and the watcher talk to the cluster as the chart's ServiceAccount."""
    from cluster import Cluster
    from core import reconcile

    cluster = Cluster(kubeconfig=platform_kubeconfig)
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    return cluster


@pytest.fixture
def as_platform_worker(platform_kubeconfig, monkeypatch):
    """As `as_platform`, with the watch cache the worker runs with (KUBE_WATCH_CACHE, on by
    default): its background LIST and WATCH of every kind a reconcile reads, as that identity."""
    from cluster import Cluster
    from core import reconcile

    cluster = Cluster(kubeconfig=platform_kubeconfig, watch_cache=True)
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    yield cluster
    cluster.close()


def test_helm_install_makes_every_deployment_available(release, kube_cluster):
    deployments = yaml.safe_load(kubectl(kube_cluster, "-n", release["namespace"], "get", "deployments", "-o", "yaml").stdout)
    names = {d["metadata"]["name"].rsplit("-", 1)[-1]: d for d in deployments["items"]}
    assert set(names) == {"web", "worker", "webhooks", "beat", "watcher"}
    for component, deployment in names.items():
        assert deployment["status"].get("availableReplicas") == deployment["spec"]["replicas"], component
    assert names["web"]["spec"]["replicas"] == 2 and names["watcher"]["spec"]["replicas"] == 2


def test_the_platform_identity_converges_teams_quotas_and_jobs_without_a_403(world, as_platform):
    team, h100, a100 = world  # made with the admin identity; now everything again as the platform
    outcome = sync_cluster_objects(as_platform) + sync_team(as_platform, team) + sync_team_quotas(as_platform, team)
    assert outcome.writes == 0, outcome.lines()  # converged, and every read allowed
    import threading

    from jobs.watch.watcher import StatusWatcher

    watcher = StatusWatcher(as_platform, resync_seconds=5, retry_seconds=0.5)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        kueue = submit(as_platform, team, h100, workers=1, gpus_per_worker=1)
        gang = submit(as_platform, team, a100, workers=2, gpus_per_worker=1)
        server = submit(as_platform, team, h100, kind="inference", workers=1, gpus_per_worker=1, port=8000,
                        min_replicas=1, max_replicas=2, readiness_path="/healthz",
                        readiness_initial_delay_seconds=0)  # an HPA too
        for job in (kueue, gang):
            reaches(job, State.SUCCEEDED, timeout=180)
        reaches(server, State.RUNNING, timeout=180)
        # cancelling deletes the workload: the prune path, as the platform
        from jobs import actions
        owner = team.memberships.get(role="owner").user
        assert actions.cancel(server, owner)
        sync_job(as_platform, server)
        reaches(server, State.CANCELLED, timeout=60)
    finally:
        watcher.stop()
        thread.join(30)
    team.refresh_from_db()
    assert team.status == "ready", team.message
    assert as_platform.requests, "the platform identity made no request"


def test_the_platform_identity_reconciles_sweeps_and_watches_with_its_watch_cache_and_no_403(
        world, keda_on_the_cluster, as_platform_worker, capsys, caplog):
    """What the worker and the watcher do, as the chart's identity, with the cache on; the
    door counts every 403 whoever asked (the cache's own background watches included).
    KEDA is up (on a cold machine the cluster starts without it), so its ScaledObject is
    served and watched like every other kind."""
    from gpuplatform.celery import app
    from gpuplatform.tasks import sweep
    from jobs.watch.watcher import StatusWatcher

    cluster = as_platform_worker
    team, h100, a100 = world
    # 1. reconcile --all: the cache starts every kind a reconcile reads
    call_command("reconcile", "--all")
    assert "failed" not in capsys.readouterr().err
    # 2. a sweep, its tasks run here (the orphan prune starts the workloads' kinds)
    app.conf.task_always_eager = True
    try:
        assert sweep.apply().get()["teams"] >= 1
    finally:
        app.conf.task_always_eager = False
    # 3. every kind of every owner is held by the cache, listed and watched
    owned = {kind for owner in registered() for kind in (*owner.kinds, *owner.also_applies)}

    def all_watched():
        states = cluster.cache.states()
        return set(states) >= owned and all(state == "watching" for state in states.values())
    # "watching" is reached only once a WATCH this identity opened was answered; a count of
    # WATCH requests proves no more (an informer's watch may open before `reconcile` resets it).
    wait_until(all_watched, timeout=60, message=f"every kind watched: {cluster.cache.states()}")
    assert cluster.requests["WATCH"] > 0
    # 4. the status watcher follows jobs of both schedulers to their end
    watcher = StatusWatcher(cluster, resync_seconds=5, retry_seconds=0.5)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        for job in (submit(cluster, team, h100, workers=1, gpus_per_worker=1),
                    submit(cluster, team, a100, workers=2, gpus_per_worker=1)):
            reaches(job, State.SUCCEEDED, timeout=180)
        call_command("reconcile", "--all")  # once more, now from a warm cache
    finally:
        watcher.stop()
        thread.join(30)
    # 5. not one request refused, and nothing said of one
    assert dict(cluster.forbidden) == {}, cluster.forbidden
    assert all(state == "watching" for state in cluster.cache.states().values()), cluster.cache.states()
    assert not [r.getMessage() for r in caplog.records if "forbidden" in r.getMessage().lower()
                or "may not" in r.getMessage()]


@pytest.mark.parametrize("verb, resource, where", [
    ("get", "secrets", ["-n", "kube-system"]),
    ("list", "secrets", ["--all-namespaces"]),
    ("get", "secrets", ["-n", "default"]),
    ("patch", "nodes", []),
    ("delete", "nodes", []),
    ("create", "pods", ["-n", "default"]),
    ("create", "pods/exec", ["-n", "default"]),
    ("create", "daemonsets.apps", ["-n", "kube-system"]),
    ("create", "clusterroles.rbac.authorization.k8s.io", []),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", []),
    ("escalate", "roles.rbac.authorization.k8s.io", ["-n", "default"]),
    ("bind", "clusterroles.rbac.authorization.k8s.io", []),
    ("impersonate", "users", []),
    ("create", "customresourcedefinitions.apiextensions.k8s.io", []),
    ("update", "leases.coordination.k8s.io", ["-n", "kube-system"]),
    ("create", "validatingadmissionpolicies.admissionregistration.k8s.io", []),
    ("patch", "validatingadmissionpolicybindings.admissionregistration.k8s.io", []),
])
def test_the_platform_identity_cannot(release, kube_cluster, verb, resource, where):
    user = f"system:serviceaccount:{release['namespace']}:{release['sa']}"
    result = kubectl(kube_cluster, "auth", "can-i", verb, resource, *where, "--as", user, check=False)
    assert result.stdout.strip() == "no", (verb, resource, where, result.stdout, result.stderr)


@pytest.mark.parametrize("verb, resource, where", [
    ("patch", "clusterqueues.kueue.x-k8s.io", []),
    ("create", "namespaces", []),
    ("watch", "pods", ["--all-namespaces"]),
    ("get", "pods/log", ["-n", "team-x"]),
    ("update", "leases.coordination.k8s.io/gpuplatform-watcher", ["-n", "{ns}"]),
])
def test_the_platform_identity_can(release, kube_cluster, verb, resource, where):
    user = f"system:serviceaccount:{release['namespace']}:{release['sa']}"
    where = [w.replace("{ns}", release["namespace"]) for w in where]
    result = kubectl(kube_cluster, "auth", "can-i", verb, resource, *where, "--as", user, check=False)
    assert result.stdout.strip() == "yes", (verb, resource, where, result.stdout, result.stderr)


def _as_platform(platform_kubeconfig, *args, manifest=None):
    return subprocess.run([str(KUBECTL), "--kubeconfig", platform_kubeconfig, *args, "--dry-run=server"],
                          input=yaml.safe_dump(manifest) if manifest else None,
                          capture_output=True, text=True, timeout=120)


def _config_map(namespace, labelled=True):
    labels = {"app.kubernetes.io/managed-by": "gpuplatform"} if labelled else {}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z", "namespace": namespace, "labels": labels}}


def test_the_admission_policy_keeps_the_platform_to_what_it_owns(platform_kubeconfig, world):
    team, _, _ = world
    ours = _as_platform(platform_kubeconfig, "create", "-f", "-", manifest=_config_map(team.namespace_name))
    assert ours.returncode == 0, ours.stderr
    elsewhere = _as_platform(platform_kubeconfig, "create", "-f", "-", manifest=_config_map("default"))
    assert elsewhere.returncode != 0 and "namespaces it made" in elsewhere.stderr, elsewhere.stderr
    unlabelled = _as_platform(platform_kubeconfig, "create", "-f", "-", manifest=_config_map(team.namespace_name, False))
    assert unlabelled.returncode != 0 and "managed-by=gpuplatform" in unlabelled.stderr, unlabelled.stderr
    adopt = _as_platform(platform_kubeconfig, "label", "namespace", "default", "app.kubernetes.io/managed-by=gpuplatform")
    assert adopt.returncode != 0 and "is not one" in adopt.stderr, adopt.stderr


def test_the_platform_identity_stops_idle_workloads_and_changes_nothing_else_of_a_workload(
        world, as_platform, platform_kubeconfig):
    """Idle reclaim's two writes, as the chart's identity: a Kueue Workload's spec.active (the
    confine-writes policy lets it change that field alone) and a Volcano Command."""
    from jobs import actions
    from workloads import kueue, volcano
    from workloads.kinds import for_job
    from workloads.pods import object_name

    team, h100, a100 = world
    runs_long = {"GPUPLATFORM_FAKE_DURATION": "900s"}
    batch = submit(as_platform, team, h100, workers=1, gpus_per_worker=1, env=runs_long)
    gang = submit(as_platform, team, a100, workers=2, gpus_per_worker=1, env=runs_long)
    namespace = team.namespace_name

    def workload():
        return next((w for w in as_platform.list(*kueue.WORKLOAD, namespace=namespace)
                     if any(r["name"] == object_name(batch) for r in w["metadata"].get("ownerReferences") or ())), None)
    name = wait_until(workload, timeout=60, message="Kueue's Workload of the batch job")["metadata"]["name"]
    relabel = _as_platform(platform_kubeconfig, "label", "workload.kueue.x-k8s.io", name, "-n", namespace, "probe=1")
    assert relabel.returncode != 0 and "spec.active alone" in relabel.stderr, relabel.stderr
    elsewhere = _as_platform(platform_kubeconfig, "patch", "workload.kueue.x-k8s.io", name, "-n", namespace,
                             "--type", "merge", "-p", '{"spec": {"queueName": "another"}}')
    assert elsewhere.returncode != 0, elsewhere.stdout

    try:
        wait_until(lambda: as_platform.get(*volcano.JOB, object_name(gang), namespace), timeout=60,
                   message="the Volcano Job")
        for job in (batch, gang):
            for_job(job).stop(as_platform, job)
        wait_until(lambda: workload()["spec"].get("active") is False, timeout=30, message="the Workload deactivated")
        wait_until(lambda: (as_platform.get(*volcano.JOB, object_name(gang), namespace).get("status") or {})
                   .get("state", {}).get("phase") in ("Aborting", "Aborted"), timeout=90,
                   message="Volcano aborting the gang on the platform's Command")
        assert dict(as_platform.forbidden) == {}, as_platform.forbidden
    finally:
        owner = team.memberships.get(role="owner").user
        for job in (batch, gang):
            job.refresh_from_db()
            actions.cancel(job, owner)
            sync_job(as_platform, job)


# --- two watchers, one Lease -----------------------------------------------------------------
def _database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}:{s.get('PASSWORD') or ''}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def _watcher(platform_kubeconfig, namespace, name, lease_seconds):
    env = {**os.environ, "DATABASE_URL": _database_url(), "KUBECONFIG": platform_kubeconfig,
           "PLATFORM_NAMESPACE": namespace, "POD_NAME": name, "METRICS_PORT": "0"}
    return subprocess.Popen([sys.executable, "manage.py", "watch_cluster", "--leader-elect", "--resync", "5",
                             "--lease-seconds", str(lease_seconds)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _holder(kube_cluster, namespace) -> str:
    result = kubectl(kube_cluster, "-n", namespace, "get", "lease", "gpuplatform-watcher",
                     "-o", "jsonpath={.spec.holderIdentity}", check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


@pytest.mark.parametrize("stop", ["crash", "clean stop"])
def test_the_standby_watcher_takes_over_and_misses_no_transition(release, platform_kubeconfig, kube_cluster,
                                                                   live, world, stop):
    team, h100, _ = world
    namespace, lease_seconds = release["namespace"], 10
    # The chart's own watchers hold this namespace's Lease; stop them for this test.
    kubectl(kube_cluster, "-n", namespace, "scale", f"deployment/{release['sa']}-watcher", "--replicas=0")
    kubectl(kube_cluster, "-n", namespace, "delete", "lease", "gpuplatform-watcher", "--ignore-not-found")
    first = _watcher(platform_kubeconfig, namespace, "first", lease_seconds)
    second = None
    try:
        wait_until(lambda: _holder(kube_cluster, namespace).startswith("first_"), timeout=60, message="first leads")
        second = _watcher(platform_kubeconfig, namespace, "second", lease_seconds)
        time.sleep(2)
        assert _holder(kube_cluster, namespace).startswith("first_")  # the second waits
        job = submit(live, team, h100, workers=1, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "6s"})
        reaches(job, State.RUNNING, timeout=120)
        # 1. the leader goes away while the job runs; the job ends while nobody watches
        stopped = time.monotonic()
        first.send_signal(signal.SIGKILL if stop == "crash" else signal.SIGTERM)
        first.wait(30)
        # 2. the standby takes the Lease, relists, and the database hears of the end
        wait_until(lambda: _holder(kube_cluster, namespace).startswith("second_"), timeout=lease_seconds * 3,
                   interval=0.1, message="the standby to take the Lease")
        takeover = time.monotonic() - stopped
        sys.stderr.write(f"\n[failover] {stop}: the standby took the Lease after {takeover:.1f}s\n")
        reaches(job, State.SUCCEEDED, timeout=120)  # the end, seen only by the relist, reached the database
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(30)
