"""GPU telemetry on the local cluster: jobs submitted through the platform run on fake GPU
nodes, the dcgm-format exporter (deploy/local-cluster/modules/gpu-exporter) reports what
their env says, the local Prometheus scrapes it, and jobs.use.telemetry finds each job's GPUs by
the names the real controllers gave its pods. And with Prometheus stopped, the one
PrometheusUnavailable with its reason, in time."""

import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.prometheus import Prometheus, PrometheusUnavailable
from jobs.lifecycle import State
from jobs.models import Job
from jobs.use import telemetry

from ...support.cluster import CLUSTER_SH, reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

RUNS_LONG = {"GPUPLATFORM_FAKE_DURATION": "600s"}


def loaded(*jobs):
    return list(Job.objects.select_related("team", "flavor").filter(pk__in=[j.pk for j in jobs]))


def test_a_jobs_gpus_report_its_profile_now_and_over_time(live, world, watcher, live_prometheus):
    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=2,
                 env={**RUNS_LONG, "GPU_SIM_UTIL": "0:90,20:5", "GPU_SIM_MEM_MIB": "4096"})
    reaches(job, State.RUNNING)

    def now_reads(util):
        reading = telemetry.utilization_now(loaded(job))[job.pk]
        return reading if reading.gpus_reporting == 2 and reading.mean_util_percent == util else None

    busy = wait_until(lambda: now_reads(90), timeout=60, message="the job's 2 GPUs at 90 %")
    assert busy.mem_used_mib == 2 * 4096
    assert {gpu.key.namespace for gpu in busy.gpus} == {team.namespace_name}
    assert all(gpu.engine_active == 0.9 for gpu in busy.gpus)
    wait_until(lambda: now_reads(5), timeout=60, message="the job's GPUs at 5 % after 20 s")

    job.refresh_from_db()

    def over_time_ends_idle():
        # A range query's last point is the last step before its end: up to a step behind now.
        series = telemetry.utilization_over_time(job, job.started_at - timedelta(seconds=10), timezone.now(),
                                                 timedelta(seconds=5))
        return series if len(series) == 2 and all(s.util_percent[-1][1] == 5 for s in series) else None

    series = wait_until(over_time_ends_idle, timeout=30, message="both GPUs' series to end at 5 %")
    for gpu in series:
        values = [v for _, v in gpu.util_percent]
        assert 90 in values, values
        assert values.index(5) > values.index(90)  # busy first, idle after
        assert {v for _, v in gpu.mem_used_mib} == {4096}


def test_every_kinds_pods_are_found_by_the_names_their_controllers_gave(live, world, watcher, live_prometheus):
    team, h100, a100 = world
    gang = submit(live, team, a100, workers=2, gpus_per_worker=1, env={**RUNS_LONG, "GPU_SIM_UTIL": "33"})
    server = submit(live, team, h100, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=1,
                    gpus_per_worker=1, env={"GPU_SIM_UTIL": "44"})
    other = submit(live, team, h100, workers=1, gpus_per_worker=1, env=RUNS_LONG)  # the default 70 %
    for job in (gang, server, other):
        reaches(job, State.RUNNING)

    def all_report():
        now = telemetry.utilization_now(loaded(gang, server, other))
        counts = {pk: (r.gpus_reporting, r.mean_util_percent) for pk, r in now.items()}
        return counts if counts == {gang.pk: (2, 33), server.pk: (1, 44), other.pk: (1, 70)} else None

    wait_until(all_report, timeout=90, message="each job's own GPUs, and no other's")


def test_a_stopped_prometheus_is_unavailable_with_its_reason_in_time(prometheus_url):
    prometheus = Prometheus(prometheus_url, timeout=2)
    assert prometheus.query("up") is not None  # it answers before
    subprocess.run([str(CLUSTER_SH), "stop-prometheus"], check=True, capture_output=True)
    try:
        began = time.monotonic()
        with pytest.raises(PrometheusUnavailable) as raised:
            prometheus.query('{__name__="DCGM_FI_DEV_GPU_UTIL"}')
        assert time.monotonic() - began < 2 * prometheus.timeout
        assert raised.value.reason == f"Prometheus at {prometheus_url} cannot be reached."
    finally:
        subprocess.run([str(CLUSTER_SH), "start-prometheus"], check=True, capture_output=True)
    wait_until(lambda: prometheus.query("up"), timeout=30, message="Prometheus back")
