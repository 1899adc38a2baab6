"""Idle-GPU reclaim on the local cluster: real Kueue, the dcgm-format exporter steered by the
pods' GPU_SIM_UTIL, the local Prometheus scraping it (every 5 s), and the idle sweep
(jobs.use.reclaim) run as the beat runs it. A job busy for two minutes and then idle is warned
and reclaimed (its Workload deactivated on the cluster, its pods gone); a busy job beside it
runs on; Prometheus stopped mid-grace pauses reclaim, and it resumes when Prometheus is back."""

import subprocess
import time

import pytest

from jobs.lifecycle import State
from jobs.models import IdleWatch
from jobs.use import reclaim
from workloads import kueue
from workloads.pods import object_name

from ...support.cluster import CLUSTER_SH, reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

RUNS_LONG = {"GPUPLATFORM_FAKE_DURATION": "900s"}


def sweep_until(live, prometheus, predicate, *, timeout, message):
    """Run the sweep every 3 s (as the beat would) until `predicate()` holds."""
    def once():
        reclaim.sweep_idle_jobs(live, prometheus)
        return predicate()
    return wait_until(once, timeout=timeout, interval=3, message=message)


def watch_of(job) -> IdleWatch | None:
    return IdleWatch.objects.filter(job=job).first()


def workload_of(live, job) -> dict:
    api_version, kind = kueue.WORKLOAD
    [workload] = [w for w in live.list(api_version, kind, namespace=job.team.namespace_name)
                  if any(r["name"] == object_name(job) for r in w["metadata"].get("ownerReferences") or ())]
    return workload


def pods_of(live, job) -> list[dict]:
    return [p for p in live.list("v1", "Pod", namespace=job.team.namespace_name)
            if p["metadata"]["name"].startswith(object_name(job) + "-") and not p["metadata"].get("deletionTimestamp")]


def test_an_idle_job_is_warned_paused_without_prometheus_and_reclaimed_while_a_busy_one_runs_on(
        live, world, watcher, live_prometheus, short_idle_policy):
    team, h100, _ = world
    idle = submit(live, team, h100, workers=1, gpus_per_worker=2, env={**RUNS_LONG, "GPU_SIM_UTIL": "0:90,120:1"})
    busy = submit(live, team, h100, workers=1, gpus_per_worker=1, env={**RUNS_LONG, "GPU_SIM_UTIL": "80"})
    reaches(idle, State.RUNNING)
    reaches(busy, State.RUNNING)

    # 1. Busy for 120 s, then idle: warned once its GPUs stayed idle for 30 s.
    began = time.monotonic()
    sweep_until(live, live_prometheus, lambda: (w := watch_of(idle)) is not None and w.is_warned,
                timeout=240, message="the idle job to be warned")
    assert time.monotonic() - began > 100  # not while it was busy
    assert watch_of(busy) is not None and not watch_of(busy).is_warned

    # 2. Prometheus away past the grace: reclaim pauses, nothing is reclaimed.
    subprocess.run([str(CLUSTER_SH), "stop-prometheus"], check=True, capture_output=True)
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            counts = reclaim.sweep_idle_jobs(live, live_prometheus)
            assert counts["reclaimed"] == 0 and counts["paused"] == counts["watched"] == 2, counts
            time.sleep(3)
        idle.refresh_from_db()
        assert idle.state == State.RUNNING
        assert "cannot be reached" in watch_of(idle).paused_reason
        assert "cannot be reached" in reclaim.status()["why_paused"]
        assert workload_of(live, idle)["spec"].get("active", True) is True
    finally:
        subprocess.run([str(CLUSTER_SH), "start-prometheus"], check=True, capture_output=True)

    # 3. Back: the grace counts again from where the metrics resume, then the job is reclaimed.
    def reclaimed():
        idle.refresh_from_db()
        return idle.state == State.RECLAIMED
    sweep_until(live, live_prometheus, reclaimed, timeout=150, message="the idle job to be reclaimed")
    watch = watch_of(idle)
    assert watch.stopped_at is not None and watch.reclaimed_idle_gpu_hours is not None
    assert workload_of(live, idle)["spec"]["active"] is False
    wait_until(lambda: not pods_of(live, idle), timeout=60, message="the reclaimed job's pods to go")
    assert any(e.reason == "IdleGpus" for e in idle.events.all())

    busy.refresh_from_db()
    assert busy.state == State.RUNNING and not watch_of(busy).is_warned
    assert pods_of(live, busy)
