"""With the local cluster: approving a grant raises the ClusterQueue's nominal quota on the
cluster, and a job that was queued for lack of quota is then admitted; ending the grant
lowers it again."""

import uuid

import pytest
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import Job
from jobs.tasks import sync_job
from quotas import actions
from quotas import tasks as quota_tasks
from quotas.models import QuotaRequest
from workloads.base import EXCEEDS_QUOTA

from ...builders import make_flavor, make_job, make_quota, make_user
from ...support.cluster import on_the_cluster, team_of_its_own, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

KUEUE = "kueue.x-k8s.io/v1beta2"
TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.fixture(autouse=True)
def reconcile_teams_inline(monkeypatch):
    """The worker's part: run the team-quota reconcile the grant step asks for, here and now."""
    monkeypatch.setattr(quota_tasks.reconcile_team_quotas, "delay",
                        lambda pk: quota_tasks.reconcile_team_quotas.apply(args=[pk]))


@pytest.fixture
def world(live):
    slug = f"gr-{uuid.uuid4().hex[:6]}"
    team, owner = team_of_its_own(slug)
    manager = make_user(f"quinn-{slug}", quota_manager=True)
    h100 = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, tolerations=TOLERATION)
    make_quota(team, h100, nominal_gpus=8, cpu_cores=64, memory_gib=512)
    with on_the_cluster(live, [team], [h100]):
        yield team, h100, owner, manager
        h100.quota_grants.all().delete()
        h100.quota_requests.all().delete()


def cluster_queue_gpus(live, team, flavor) -> str:
    cq = live.get(KUEUE, "ClusterQueue", f"{team.namespace_name}-{flavor.name}")
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]


def test_approving_a_grant_admits_a_job_that_waited_for_quota(live, world, watcher):
    team, h100, owner, manager = world
    job = make_job(team, h100, name=f"j{uuid.uuid4().hex[:6]}", workers=2, gpus_per_worker=8,
                   cpu_per_worker=1, memory_per_worker_gib=2)
    job.submit()
    sync_job(live, job)
    # 16 GPUs on a quota of 8 (no cohort): more than the team can use until the grant,
    # which Kueue says as ExceedsQuota (WaitingForQuota if its message words it otherwise).
    wait_until(lambda: (job.refresh_from_db(), job.reason in (EXCEEDS_QUOTA, "WaitingForQuota"))[1], timeout=90,
               message="the job to wait for quota")
    assert job.state == State.QUEUED and cluster_queue_gpus(live, team, h100) == "8"

    request = QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=h100, gpus=8,
                                          starts_on=timezone.localdate(), justification="A 16-GPU run.")
    grant = actions.approve(request, manager, gpus=8, borrowing_limit_gpus=None, starts_on=timezone.localdate(),
                            ends_on=None, cpu_cores=64, memory_gib=512)
    assert cluster_queue_gpus(live, team, h100) == "16"
    assert live.get("v1", "ResourceQuota", "team-quota", team.namespace_name)["spec"]["hard"][
        "requests.nvidia.com/gpu"] == "16"
    wait_until(lambda: Job.objects.get(pk=job.pk).admitted_at is not None, timeout=120,
               message="the job to be admitted once the grant applies")

    actions.end_grant(grant, manager)
    assert cluster_queue_gpus(live, team, h100) == "8"
