"""Draining a pool on the local cluster (issue 34, item 1, docs/drain.md): once drained, the
flavor's ClusterQueue holds (Kueue's `stopPolicy: Hold`): a job that would outlive the deadline
is not admitted, nor any other, while the running job keeps running on the same pod; the
console page's "empty at" is the running job's admission plus its maximum runtime; after the
window the sweep's `drain_windows` reopens the queue and the waiting job is admitted.
"""

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.lifecycle import State
from jobs.outlook import drains, feasibility
from jobs.tasks import sync_job
from quotas import actions
from quotas.models import Drain, Scheduler
from quotas.tasks import sync_team_quotas
from workloads import queue_name

from ...builders import build_job, make_flavor, make_quota, make_user
from ...support.cluster import (
    TAINT,
    TOLERATION,
    on_the_cluster,
    reaches,
    stays_true,
    submit,
    team_of_its_own,
    wait_until,
)

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def pool(live, monkeypatch):
    """A team of this helper's own (slug drain-...) with an 8-GPU H100 quota on Kueue; the
    quota reconciles a drain enqueues run at once against the cluster."""
    slug = f"drain-{uuid.uuid4().hex[:6]}"
    team, _ = team_of_its_own(slug)
    h100 = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION, scheduler=Scheduler.KUEUE)
    make_quota(team, h100, nominal_gpus=8, cpu_cores=64, memory_gib=512)
    monkeypatch.setattr("quotas.actions.quotas_changed", lambda t: sync_team_quotas(live, t))
    with on_the_cluster(live, [team], [h100]):
        yield team, h100
        Drain.objects.filter(flavor=h100).delete()


def stop_policy(live, team, flavor) -> str:
    return live.get(KUEUE, "ClusterQueue", queue_name(team.namespace_name, flavor))["spec"]["stopPolicy"]


def pod_uids(live, job) -> set[str]:
    pods = live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    return {p["metadata"]["uid"] for p in pods}


def test_a_drained_pool_admits_nothing_new_keeps_running_jobs_says_when_it_is_empty_and_reopens(live, watcher, pool):
    team, h100 = pool
    fields = {"workers": 1, "gpus_per_worker": 4}
    running = submit(live, team, h100, max_runtime_seconds=900, env={"GPUPLATFORM_FAKE_DURATION": "900s"}, **fields)
    reaches(running, State.RUNNING, timeout=180)
    uids = wait_until(lambda: pod_uids(live, running), message="the running job's pod")

    quinn = make_user(f"quinn-{team.slug}", quota_manager=True)
    now = timezone.now()
    drain = actions.declare_drain(Drain(flavor=h100, deadline=now + timedelta(minutes=10),
                                        reopens_at=now + timedelta(minutes=20), reason="firmware"), quinn)
    assert stop_policy(live, team, h100) == "Hold"

    # A job that would outlive the deadline (and one that would not): told they wait, and not admitted.
    long = submit(live, team, h100, max_runtime_seconds=3600, env={"GPUPLATFORM_FAKE_DURATION": "30s"}, **fields)
    short = submit(live, team, h100, max_runtime_seconds=120, env={"GPUPLATFORM_FAKE_DURATION": "30s"}, **fields)
    assert "draining for maintenance" in feasibility.assess(build_job(team, h100, **fields)).message
    stays_true(lambda: all((j.refresh_from_db(), j.admitted_at is None)[1] for j in (long, short)), 25,
               message="nothing admitted to the drained pool")
    running.refresh_from_db()
    assert running.state == State.RUNNING and pod_uids(live, running) == uids, "the running job kept its pod"
    wait_until(lambda: (long.refresh_from_db(), "admits nothing new" in long.message)[1], timeout=60,
               message="the waiting job told in plain words that the pool is held (Kueue: ClusterQueue is inactive)")

    # The page's "empty at": the running job's admission plus its maximum runtime (as Kueue counts).
    expected = running.admitted_at + timedelta(seconds=900)
    assert drains.on_pool(drain).empty_at == expected
    client = Client()
    client.force_login(quinn)
    page = client.get(f"/quotas/console/drains/{drain.pk}/").content.decode()
    assert f"{timezone.localtime(expected):%Y-%m-%d %H:%M:%S}" in page and running.name in page

    # The window ends: the sweep's part reopens the queue and the waiting jobs are admitted.
    past = timezone.now()
    Drain.objects.filter(pk=drain.pk).update(starts_at=past - timedelta(seconds=3), deadline=past - timedelta(seconds=2),
                                             reopens_at=past - timedelta(seconds=1))
    assert actions.drain_windows()["reopened"] == 1
    assert stop_policy(live, team, h100) == "None"
    for job in (long, short):
        sync_job(live, job)
    wait_until(lambda: any((j.refresh_from_db(), j.admitted_at is not None)[1] for j in (long, short)),
               timeout=120, message="a waiting job admitted once the pool reopened")
    running.refresh_from_db()
    assert running.state == State.RUNNING and pod_uids(live, running) == uids
