"""Fixtures for tests against the local Kubernetes GPU cluster (deploy/local-cluster).

`kube_cluster` runs `deploy/local-cluster/cluster.sh up` once per session (building the
binaries the first time) and hands tests the kubeconfig path. The cluster is left running
for the next session (a warm `up` takes seconds; several pytest sessions may share it;
`cluster.sh` serialises concurrent `up` calls with a lock). With GPUPLATFORM_CLUSTER_STOP=1 a
session that started the cluster stops it again at its end.

Clients are built from that kubeconfig explicitly; nothing global (no KUBECONFIG, no
kubernetes.config.load_kube_config into the default configuration) is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from jobs.models import Job
from jobs.tasks import sync_job
from quotas.models import Cohort, PriorityClass, Scheduler
from quotas.tasks import sync_cluster_objects, sync_team_quotas
from tenants.models import Membership, Team
from tenants.tasks import offboard, sync_team

from ..builders import make_flavor, make_job, make_quota, make_team, make_user

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "deploy" / "local-cluster" / "cluster.sh"
KEDA_SH = CLUSTER_SH.parent / "keda.sh"
# A cold build of every component takes minutes; a warm start takes seconds.
UP_TIMEOUT_SECONDS = int(os.environ.get("GPUPLATFORM_CLUSTER_UP_TIMEOUT", "3600"))
# What `cluster.sh up --json` said about the cluster (kubeconfig, prometheus_url, ports), once up.
CLUSTER: dict = {}


def wait_until(predicate, timeout=60.0, interval=0.25, message="condition"):
    """Poll `predicate` until it returns a truthy value (returned) or fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - transient API errors while polling
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            pytest.fail(f"timed out after {timeout}s waiting for {message}{detail}")
        time.sleep(interval)


def stays_true(predicate, seconds, interval=0.5, message="condition"):
    """Assert `predicate` holds on every poll for `seconds` s (for "nothing happens" checks)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), f"{message} stopped holding"
        time.sleep(interval)


def _cluster_running() -> bool:
    result = subprocess.run([str(CLUSTER_SH), "status"], check=False, capture_output=True, text=True)
    return result.returncode == 0


def _run_up(request, script=CLUSTER_SH, *args):
    """Run `<script> up [args]`, showing its progress lines live (a cold build takes minutes)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    live = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    progress = []
    with live, subprocess.Popen(
        [str(script), "up", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        timer = threading.Timer(UP_TIMEOUT_SECONDS, proc.kill)
        timer.start()
        try:
            for line in proc.stderr:
                progress.append(line)
                sys.stderr.write(line)
                sys.stderr.flush()
            stdout = proc.stdout.read()
            returncode = proc.wait()
        finally:
            timer.cancel()
    return returncode, stdout, "".join(progress)


@pytest.fixture(scope="session")
def kube_cluster(request):
    """Path of the kubeconfig of the running local cluster."""
    was_running = _cluster_running()
    returncode, stdout, progress = _run_up(request, CLUSTER_SH, "--json")
    if returncode != 0:
        pytest.fail(f"cluster.sh up failed ({returncode}):\n{progress[-4000:]}")
    CLUSTER.update(json.loads(stdout))
    kubeconfig = CLUSTER["kubeconfig"]
    assert Path(kubeconfig).is_file()
    yield kubeconfig
    # under pytest-xdist several workers share the cluster: leave it running for the others
    shared = "PYTEST_XDIST_WORKER" in os.environ
    if not was_running and not shared and os.environ.get("GPUPLATFORM_CLUSTER_STOP") == "1":
        subprocess.run([str(CLUSTER_SH), "down"], check=False, capture_output=True, text=True)


@pytest.fixture(scope="session")
def keda_on_the_cluster(kube_cluster, request):
    """KEDA's operator and metrics API server running on the local cluster: `make test` starts
    the cluster without it (GPUPLATFORM_KEDA=later) while it builds, and the tests that need it
    run after the others (tests/conftest.py)."""
    returncode, _, progress = _run_up(request, KEDA_SH)
    if returncode != 0:
        pytest.fail(f"keda.sh up failed ({returncode}):\n{progress[-4000:]}")
    return kube_cluster


@pytest.fixture(scope="session")
def prometheus_url(kube_cluster):
    """The local cluster's Prometheus, which scrapes its dcgm-format GPU exporter."""
    return CLUSTER["prometheus_url"]


@pytest.fixture
def live_prometheus(prometheus_url, settings):
    """The platform's settings point at the local Prometheus for the test's length."""
    from cluster.prometheus import prometheus_from_settings

    settings.PROMETHEUS_URL = prometheus_url
    prometheus_from_settings.cache_clear()
    yield prometheus_from_settings()
    prometheus_from_settings.cache_clear()


@pytest.fixture(scope="session")
def kube_config(kube_cluster):
    """A kubernetes.client.Configuration for the cluster admin (not installed as default)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=kube_cluster, client_configuration=configuration)
    return configuration


@pytest.fixture(scope="session")
def api_client(kube_config):
    from kubernetes import client

    with client.ApiClient(kube_config) as api:
        yield api


@pytest.fixture
def make_namespace(api_client):
    """Create uniquely named namespaces (ready for pods) and delete them after the test."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    created = []

    def make(prefix="t"):
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        created.append(name)
        # pods can only be created once the controller manager made the default ServiceAccount
        wait_until(
            lambda: core.read_namespaced_service_account("default", name),
            timeout=60,
            message=f"ServiceAccount default in {name}",
        )
        return name

    yield make
    for name in created:
        try:
            core.delete_namespace(name, propagation_policy="Background")
        except client.ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def live(kube_cluster, monkeypatch):
    """The platform's tasks, commands and views talk to the local cluster through one door."""
    from cluster import Cluster
    from core import reconcile

    cluster = Cluster(kubeconfig=kube_cluster)
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    return cluster


@pytest.fixture
def watcher(live):
    """The status watcher, running in a thread for the test's length."""
    import threading

    from jobs.watcher import StatusWatcher

    watcher = StatusWatcher(live, resync_seconds=5, retry_seconds=0.5)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    yield watcher
    watcher.stop()
    thread.join(timeout=30)


# --- a team on the cluster, with one quota per scheduler -----------------------------------
TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


@contextlib.contextmanager
def on_the_cluster(live, teams, flavors, *, cohort=None, then=None):
    """``teams`` and their quotas on ``flavors`` made on the cluster (namespaces, RBAC, queues);
    afterwards the teams offboarded, the flavors' jobs and quotas and the flavors deleted (the
    cohort too, and what ``then`` deletes), and the cluster's shared objects synced again: what
    every live fixture with teams of its own does around its tests."""
    sync_cluster_objects(live)
    for team in teams:
        sync_team(live, team)
        sync_team_quotas(live, team)
    yield
    for team in teams:
        if Team.objects.filter(pk=team.pk).exists():
            team.refresh_from_db()
            offboard(live, team)
    for flavor in flavors:
        flavor.quotas.all().delete()
        flavor.jobs.all().delete()
        flavor.delete()
    if cohort is not None:
        cohort.delete()
    if then is not None:
        then()
    sync_cluster_objects(live)


def team_of_its_own(slug: str, **fields) -> tuple[Team, object]:
    """A team named ``slug`` and its owner (``owner-<slug>``)."""
    owner = make_user(f"owner-{slug}")
    return make_team(slug, members={owner: Membership.Role.OWNER}, display_name=slug, **fields), owner


@pytest.fixture
def world(live):
    """A team with an 8-GPU H100 quota (Kueue) and an 8-GPU A100 quota (Volcano)."""
    slug = f"it-{uuid.uuid4().hex[:6]}"
    team, _ = team_of_its_own(slug, max_priority_value=1000)  # may preempt
    h100 = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION)
    a100 = make_flavor(f"a100-{slug}", scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"},
                       tolerations=TOLERATION)
    make_quota(team, h100, nominal_gpus=8, cpu_cores=64, memory_gib=512)
    make_quota(team, a100, nominal_gpus=8, cpu_cores=64, memory_gib=512)
    def its_classes_and_cohorts():
        PriorityClass.objects.filter(name__endswith=slug).delete()
        Cohort.objects.filter(name__endswith=slug).delete()

    with on_the_cluster(live, [team], [h100, a100], then=its_classes_and_cohorts):
        yield team, h100, a100


def submit(live, team, flavor, **fields) -> Job:
    fields = {"cpu_per_worker": 4, "memory_per_worker_gib": 2, **fields}  # more CPU than any default limit
    job = make_job(team, flavor, name=f"j{uuid.uuid4().hex[:6]}", **fields)
    job.submit()
    sync_job(live, job)
    return job


def reaches(job, state, timeout=120):
    def check():
        job.refresh_from_db()
        return job.state == state
    wait_until(check, timeout=timeout, message=f"job {job.name} to become {state} (is {job.state}: {job.message})")
