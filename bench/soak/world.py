"""The soak's world: a fresh database, the teams, quotas and people a day of operation
needs, their API tokens, the two dated grants, and a cluster emptied of earlier runs.

Two teams share the H100s in a cohort (so one borrows what the other leaves idle) and have
quotas on four flavors: H100 (Kueue) and A100 (Volcano) for training, time-sliced T4
(Kueue) and MIG slices (Volcano) for inference. The pools match deploy/local-cluster.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import psycopg

from .processes import kubectl, manage
from .profile import Profile

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
FLAVORS = {
    # name: (scheduler, resource, GPUs per node, pool label, product label)
    "h100": ("kueue", "nvidia.com/gpu", 8, "h100", "NVIDIA-H100-80GB-HBM3"),
    "a100": ("volcano", "nvidia.com/gpu", 8, "a100", "NVIDIA-A100-SXM4-80GB"),
    "t4-shared": ("kueue", "nvidia.com/gpu", 16, "timesliced", "Tesla-T4-SHARED"),
    "mig-1g-10gb": ("volcano", "nvidia.com/mig-1g.10gb", 14, "mig", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"),
}
TEAMS = ("vision", "nlp")
# team -> flavor -> nominal GPUs; H100 quotas sit in the cohort and borrow without limit.
QUOTAS = {
    "vision": {"h100": 12, "a100": 8, "t4-shared": 8, "mig-1g-10gb": 7},
    "nlp": {"h100": 12, "a100": 8, "t4-shared": 8, "mig-1g-10gb": 7},
}
COHORT = "research"
PRIORITIES = {"high": 1000, "normal": 100, "low": 10}
CPU_PER_GPU, MEMORY_GIB_PER_GPU = 12, 120
# Dated grants, as fractions of the run: one starts mid-run, one ends mid-run.
GRANT_STARTS = ("nlp", "h100", 8, 0.30)
GRANT_ENDS = ("vision", "a100", 4, 0.65)
# A drain window (docs/drain.md), as fractions of the run: announced at the start, the pool
# admits nothing new from the first, must be empty by the second, reopens at the third.
# After the preemption scenes (a held queue preempts nothing), over the borrowing jobs and
# the long ones, which must keep running; reopened before the API-server restart (0.60), so
# the admissions it lets go are not read through a restart.
DRAIN = ("h100", 0.38, 0.46, 0.54)
# Our objects from an earlier run; namespaces first (they hold the workloads).
LEFTOVERS = [
    "namespaces",
    "clusterqueues.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,cohorts.kueue.x-k8s.io,"
    "workloadpriorityclasses.kueue.x-k8s.io,queues.scheduling.volcano.sh",
]


def fresh_database(profile: Profile) -> None:
    """Drop and create the soak's database (never the tests' or the demo's)."""
    name = profile.database_name
    assert name.endswith("_soak"), f"refusing to recreate database {name!r}"
    parts = urlsplit(profile.database_url)
    admin_url = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def migrate(env: dict) -> None:
    result = manage(env, "migrate", "--no-input", "-v", "0")
    if result.returncode != 0:
        raise SystemExit(f"migrate failed:\n{result.stdout}\n{result.stderr}")


def empty_cluster(kubeconfig: str) -> None:
    """Delete what earlier runs left: job ids start again at 1 in a fresh database, and
    a leftover object labelled with job 1 would be taken for the new job 1."""
    for kinds in LEFTOVERS:
        result = kubectl(kubeconfig, "delete", kinds, "-l", "app.kubernetes.io/managed-by=gpuplatform",
                         "--wait=true", "--timeout=240s", "--ignore-not-found", timeout=300)
        if result.returncode != 0:
            raise SystemExit(f"could not clear the soak cluster: {result.stderr.strip()}")


def seed() -> dict:
    """Rows for the run, created as a quota manager and team owners would; returns the
    API token of each team's CI pipeline."""
    from django.contrib.auth import get_user_model

    from quotas.models import Cohort, GpuFlavor, PriorityClass, Quota
    from tenants.models import Membership, Team
    from tenants.roles import ensure_quota_manager_group
    from tenants.tokens import ALL_SCOPES, ApiToken

    users = get_user_model().objects
    quinn = users.create_user("soak-quinn", password="soak-quinn-pass")
    quinn.groups.add(ensure_quota_manager_group())
    flavors = {
        name: GpuFlavor.objects.create(
            name=name, scheduler=scheduler, resource_name=resource, gpu_memory_gib=80, gpus_per_node=per_node,
            node_labels={"gpuplatform.io/pool": pool, "nvidia.com/gpu.product": product},
            node_taints=[GPU_TAINT], tolerations=[GPU_TOLERATION], cost_per_gpu_hour="1.00",
            network_fabric="tcp",  # multi-node gangs need a declared fabric (docs/sharing.md)
        )
        for name, (scheduler, resource, per_node, pool, product) in FLAVORS.items()
    }
    cohort = Cohort.objects.create(name=COHORT, description="The soak's teams lend each other idle H100s.")
    for name, value in PRIORITIES.items():
        PriorityClass.objects.create(name=name, value=value)
    tokens = {}
    for slug in TEAMS:
        # Every soak team may use every priority (the preemption scenario needs "high").
        team = Team.objects.create(slug=slug, display_name=f"Soak {slug}",
                                   max_priority_value=max(PRIORITIES.values()))
        owner = users.create_user(f"soak-{slug}-ci", password=f"soak-{slug}-pass")
        Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
        for flavor, nominal in QUOTAS[slug].items():
            Quota.objects.create(team=team, flavor=flavors[flavor], nominal_gpus=nominal,
                                 cohort=cohort if flavor == "h100" else None,
                                 cpu_cores=nominal * CPU_PER_GPU, memory_gib=nominal * MEMORY_GIB_PER_GPU)
        _, tokens[slug] = ApiToken.objects.issue(user=owner, team=team, scopes=ALL_SCOPES, name="soak CI pipeline")
    return tokens


def dated_grants(profile: Profile, started: datetime) -> tuple[datetime, datetime]:
    """The grant that starts mid-run and the one that ends mid-run (active from now), as a
    quota manager approves them; the sweep's ``apply_grants`` takes them in and out."""
    from django.contrib.auth import get_user_model

    from quotas import actions
    from quotas.models import GpuFlavor, Quota
    from tenants.models import Team

    quinn = get_user_model().objects.get(username="soak-quinn")

    def dated(spec, *, starts_at, ends_at):
        slug, flavor_name, gpus, _ = spec
        team, flavor = Team.objects.get(slug=slug), GpuFlavor.objects.get(name=flavor_name)
        cpu, memory = Quota.objects.resources_for(team, flavor, gpus)
        actions.grant(team=team, flavor=flavor, gpus=gpus, cpu_cores=cpu, memory_gib=memory,
                      starts_at=starts_at, ends_at=ends_at, granted_by=quinn, note="soak")

    start_at = started + timedelta(seconds=profile.at(GRANT_STARTS[3]))
    end_at = started + timedelta(seconds=profile.at(GRANT_ENDS[3]))
    dated(GRANT_STARTS, starts_at=start_at, ends_at=None)
    dated(GRANT_ENDS, starts_at=started - timedelta(seconds=1), ends_at=end_at)
    actions.apply_grants(started)  # the second is active now: its team is reconciled at once
    return start_at, end_at


def first_reconcile(env: dict) -> None:
    """Put teams and queues on the cluster before the run, so the first jobs do not wait."""
    deadline = time.monotonic() + 120
    while True:
        result = manage(env, "reconcile", "--all")
        if result.returncode == 0 and "failed" not in result.stderr:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the first reconcile failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
        time.sleep(2)


def dated_drain(profile: Profile, started: datetime) -> tuple[datetime, datetime, datetime]:
    """The drain window, announced now by a quota manager as on the console; the sweep's
    ``drain_windows`` holds the flavor's queues at its start and reopens them at its end."""
    from django.contrib.auth import get_user_model

    from quotas import actions
    from quotas.models import Drain, GpuFlavor

    flavor, start, deadline, reopen = DRAIN
    at = [started + timedelta(seconds=profile.at(fraction)) for fraction in (start, deadline, reopen)]
    actions.declare_drain(Drain(flavor=GpuFlavor.objects.get(name=flavor), starts_at=at[0], deadline=at[1],
                                reopens_at=at[2], reason="soak maintenance window"),
                          get_user_model().objects.get(username="soak-quinn"))
    return at[0], at[1], at[2]
