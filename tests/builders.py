"""Small builders for test data: each takes overrides and fills in sensible defaults."""

import itertools

from django.contrib.auth import get_user_model

from jobs.models import Job
from quotas.manifests import render_team_quotas
from quotas.models import GpuFlavor, Quota, Scheduler
from tenants.manifests import render_team
from tenants.models import Membership, Team
from tenants.roles import ensure_quota_manager_group

_seq = itertools.count(1)

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def make_user(username: str | None = None, *, quota_manager: bool = False, **fields):
    username = username or f"user{next(_seq)}"
    user = get_user_model().objects.create_user(username=username, password="pw-for-tests-1", **fields)
    if quota_manager:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
        user.groups.add(ensure_quota_manager_group())
    return user


def make_team(slug: str | None = None, *, members: dict | None = None, **fields) -> Team:
    slug = slug or f"team{next(_seq)}"
    team = Team.objects.create(slug=slug, display_name=fields.pop("display_name", slug.title()), **fields)
    for user, role in (members or {}).items():
        Membership.objects.create(team=team, user=user, role=role)
    return team


def make_flavor(name: str | None = None, **fields) -> GpuFlavor:
    defaults = dict(
        resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
        scheduler=Scheduler.KUEUE, node_labels={"gpuplatform.io/pool": "h100"},
        node_taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        tolerations=[GPU_TOLERATION],
        # Multi-node training needs a declared fabric; the test pools, like the demo's, use TCP.
        network_fabric="tcp",
    )
    defaults.update(fields)
    return GpuFlavor.objects.create(name=name or f"flavor{next(_seq)}", **defaults)


def make_quota(team: Team, flavor: GpuFlavor, **fields) -> Quota:
    defaults = dict(nominal_gpus=8, cpu_cores=96, memory_gib=1024)
    defaults.update(fields)
    return Quota.objects.create(team=team, flavor=flavor, **defaults)


def build_job(team: Team, flavor: GpuFlavor, **fields) -> Job:
    """An unsaved job, for validation tests."""
    defaults = dict(
        name=f"job{next(_seq)}", kind=Job.Kind.TRAINING, image="ghcr.io/example/train:1",
        command=["python"], args=["train.py"], env={"EPOCHS": "3"}, workers=1, gpus_per_worker=1,
    )
    defaults.update(fields)
    return Job(team=team, flavor=flavor, **defaults)


def make_job(team: Team, flavor: GpuFlavor, **fields) -> Job:
    job = build_job(team, flavor, **fields)
    job.full_clean()
    job.save()
    return job


def render_team_and_quotas(team: Team) -> list[dict]:
    """Everything a team has on the cluster before any job: what `reconcile --team` applies."""
    return (render_team(team, list(team.memberships.select_related("user")))
            + render_team_quotas(team, list(Quota.objects.of_team(team))))
