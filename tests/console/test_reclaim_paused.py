"""The quota console says when idle reclaim is paused and why (jobs.use.reclaim.paused on the
capacity page): the sweep runs on the in-memory cluster against the Prometheus stand-in
(cluster/prometheus_standin.py, a real HTTP server), then a quota manager reads the page."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cluster.prometheus import Prometheus
from jobs.lifecycle import State
from jobs.models import Job
from jobs.use import reclaim
from tests.builders import make_job
from workloads.pods import object_name

pytestmark = pytest.mark.django_db

W = 10


@pytest.fixture(autouse=True)
def policy(settings, tmp_path):
    settings.IDLE_GPU_THRESHOLD_PERCENT = 5
    settings.IDLE_GPU_AFTER_SECONDS = 600
    settings.IDLE_GPU_GRACE_SECONDS = 600
    settings.IDLE_GPU_WINDOW_SECONDS = W
    settings.IDLE_GPU_SWEEP_SECONDS = W
    settings.KUBECONFIG = str(tmp_path / "missing")  # the page's node count: unknown, said so


def running(team, flavor, name, *, since=timedelta(minutes=2)) -> Job:
    job = make_job(team, flavor, name=name)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, gpus_in_use=job.gpus_to_start,
                                         started_at=timezone.now() - since)
    job.refresh_from_db()
    return job


def gpu(prometheus_api, job, percent) -> None:
    prometheus_api.gpu(job.team.namespace_name, f"{object_name(job)}-0-abcde", 0, util=percent)


def capacity_page(client_for, quota_manager) -> str:
    return client_for(quota_manager).get(reverse("console:capacity")).content.decode()


def test_prometheus_away_pauses_reclaim_and_the_console_says_why(client_for, quota_manager, team, flavor, fake,
                                                                  prometheus_api):
    jobs = [running(team, flavor, "one"), running(team, flavor, "two")]
    for job in jobs:
        gpu(prometheus_api, job, 0)
    prometheus = Prometheus(prometheus_api.url)
    prometheus_api.answer = (503, b"")  # away
    assert reclaim.sweep_idle_jobs(fake, prometheus)["paused"] == 2
    html = capacity_page(client_for, quota_manager)
    down = f"Prometheus at {prometheus.where} answered HTTP 503."
    assert f"Idle-GPU reclaim is paused for every job it watches (2): {down}" in html
    assert "Last idle sweep:" in html

    prometheus_api.answer = None  # back: the next sweep judges them and the line goes
    assert reclaim.sweep_idle_jobs(fake, prometheus)["paused"] == 0
    assert "Idle-GPU reclaim is paused" not in capacity_page(client_for, quota_manager)


def test_a_job_whose_gpus_stopped_reporting_is_named_as_paused_beside_a_judged_one(
        client_for, quota_manager, team, flavor, fake, prometheus_api):
    silent, busy = running(team, flavor, "silent"), running(team, flavor, "busy")
    gpu(prometheus_api, busy, 80)  # the silent job's GPU has no series at all
    assert reclaim.sweep_idle_jobs(fake, Prometheus(prometheus_api.url))["paused"] == 1
    assert silent.idle_watch.paused_reason and not busy.idle_watch.paused_reason
    html = capacity_page(client_for, quota_manager)
    assert ("Idle-GPU reclaim is paused for 1 of the 2 jobs it watches: "
            "No GPU metrics for this job&#x27;s GPUs in the latest window.") in html


def test_a_job_younger_than_one_window_is_no_reason_to_say_reclaim_is_paused(
        client_for, quota_manager, team, flavor, fake, prometheus_api):
    job = running(team, flavor, "new", since=timedelta(seconds=1))
    gpu(prometheus_api, job, 0)
    assert reclaim.sweep_idle_jobs(fake, Prometheus(prometheus_api.url))["paused"] == 1
    assert reclaim.status()["paused_because"] == {"Running for less than one window.": 1}
    assert "Idle-GPU reclaim is paused" not in capacity_page(client_for, quota_manager)


def test_no_sweep_lately_is_said_too(team, flavor, fake, prometheus_api):
    job = running(team, flavor, "one")
    swept = timezone.now()
    gpu(prometheus_api, job, 80)
    reclaim.sweep_idle_jobs(fake, Prometheus(prometheus_api.url), now=swept)
    assert reclaim.paused(now=swept + reclaim.late_after()) is None
    late = reclaim.paused(now=swept + reclaim.late_after() + timedelta(seconds=1))
    assert "no idle sweep has run lately" in late.text and late.at == swept


def test_nothing_is_said_when_no_policy_watches_a_job(client_for, quota_manager, team, flavor, fake, settings,
                                                      prometheus_api):
    settings.IDLE_GPU_THRESHOLD_PERCENT = settings.IDLE_GPU_AFTER_SECONDS = settings.IDLE_GPU_GRACE_SECONDS = None
    job = running(team, flavor, "one")
    gpu(prometheus_api, job, 0)
    prometheus_api.answer = (503, b"")  # away, and no policy asks it anything
    assert reclaim.sweep_idle_jobs(fake, Prometheus(prometheus_api.url))["watched"] == 0
    assert reclaim.paused(now=timezone.now() + timedelta(days=0.5)) is None
    assert "Idle-GPU reclaim is paused" not in capacity_page(client_for, quota_manager)
