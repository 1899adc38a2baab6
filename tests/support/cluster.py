"""Plain helpers of the tests against the local Kubernetes GPU cluster (deploy/local-cluster):
polling, a team with its quotas made on the cluster and taken down again, and submitting a
job there. The fixtures that start the cluster are in tests/fixtures/cluster.py."""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path

import pytest

from cluster import TransientError
from jobs.models import Job
from jobs.tasks import sync_job
from quotas.tasks import sync_cluster_objects, sync_team_quotas
from tenants.models import Membership, Team
from tenants.tasks import offboard, sync_team

from ..builders import make_job, make_team, make_user

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "deploy" / "local-cluster" / "cluster.sh"
KEDA_SH = CLUSTER_SH.parent / "keda.sh"
OUTLIVES_THE_TEST = {"GPUPLATFORM_FAKE_DURATION": "900s"}  # the fake kubelet ends pods after this


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


def submit(live, team, flavor, **fields) -> Job:
    fields = {"cpu_per_worker": 4, "memory_per_worker_gib": 2, **fields}  # more CPU than any default limit
    job = make_job(team, flavor, name=f"j{uuid.uuid4().hex[:6]}", **fields)
    job.submit()
    sync_job(live, job)
    return job


def sync_retrying(live, job, timeout=60.0) -> None:
    """`sync_job` retried on a transient refusal, as the reconcile task retries it (Kueue
    refuses a notebook's restart until the Workload of its stop is deleted)."""
    def synced() -> bool:
        try:
            sync_job(live, job)
        except TransientError:
            return False
        return True

    wait_until(synced, timeout=timeout, interval=1.0, message=f"job {job.name} to be applied")


def reaches(job, state, timeout=120):
    def check():
        job.refresh_from_db()
        return job.state == state
    wait_until(check, timeout=timeout, message=f"job {job.name} to become {state} (is {job.state}: {job.message})")
