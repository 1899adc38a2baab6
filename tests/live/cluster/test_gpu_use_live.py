"""Utilization in the product on the local cluster: a job whose fake GPUs are steered by
GPU_SIM_UTIL shows its utilization on its page and in the jobs list, and the accounting's
used GPU-hours are its allocated GPU time x the steered utilization (jobs.use.gpu_use, sampled
as the beat samples it, from the local Prometheus scraping the dcgm-format exporter)."""

import time
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

from console.accounting import month_window, usage_rows
from jobs.lifecycle import State
from jobs.models import GpuInterval, GpuUse
from jobs.use import gpu_use
from tenants.models import Team

from ...support.cluster import reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

STEERED = 40  # percent, every GPU of the job
SAMPLE_SECONDS = 10


def test_a_steered_job_shows_its_utilization_and_is_charged_what_it_used(live, world, watcher, live_prometheus,
                                                                         client_for, settings):
    settings.GPU_USE_SAMPLE_SECONDS = SAMPLE_SECONDS
    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=2,
                 env={"GPUPLATFORM_FAKE_DURATION": "600s", "GPU_SIM_UTIL": str(STEERED)})
    reaches(job, State.RUNNING)
    client = client_for(team.memberships.get().user)

    seen = []

    def panel():
        seen.append(client.get(reverse("jobs:gpus", args=[job.pk])).content.decode())
        return seen[-1] if f"{STEERED} % mean utilization over 2 reporting" in seen[-1] else None

    try:
        page = wait_until(panel, timeout=90, message="the job page's GPU panel at the steered utilization")
    except BaseException:
        print(seen[-1] if seen else "no page")
        raise
    assert "Using 2 of 2 GPUs now" in page and page.count('<polyline class="series-line') == 4
    listed = client.get(reverse("jobs:list"), {"team": team.slug}).content.decode()
    assert f'{STEERED} %<span class="muted small"> · 2 of 2</span>' in listed

    # The beat's cadence, six samples (not a wait for the cluster: the sampler runs this often).
    for _ in range(6):
        gpu_use.sample()
        time.sleep(SAMPLE_SECONDS)
    gpu_use.sample()
    use = GpuUse.objects.filter(interval__job=job).aggregate(
        measured=Sum("measured_gpu_seconds"), used=Sum("used_gpu_seconds"), idle=Sum("idle_gpu_seconds"))
    interval = GpuInterval.objects.get(job=job, ended_at__isnull=True)
    allocated = interval.gpus * (interval.measured_until - interval.started_at).total_seconds()
    assert use["measured"] >= 0.9 * allocated, (use, allocated)  # all of it but the first scrape or so
    assert use["used"] == pytest.approx(use["measured"] * STEERED / 100, rel=0.02)
    assert use["idle"] == 0

    rows = usage_rows(*month_window(timezone.localdate().strftime("%Y-%m")), teams=Team.objects.filter(pk=team.pk),
                      now=interval.measured_until)
    allocated_hours = sum(row.gpu_hours for row in rows)
    used_hours = sum(row.used_gpu_hours for row in rows)
    assert allocated_hours > 0
    assert float(used_hours) == pytest.approx(float(allocated_hours) * STEERED / 100, abs=0.01 + 0.1 * float(allocated_hours))
    assert timezone.now() - interval.measured_until < timedelta(seconds=SAMPLE_SECONDS * 3)
