"""jobs.use.telemetry: a job's GPUs found among dcgm-exporter's series by namespace and the pod
names its kind gives, one query for many jobs, against a real HTTP server speaking
Prometheus's API (cluster/prometheus_standin.py, tests/standin.py). The live test against the local cluster's
Prometheus: tests/live/cluster/test_telemetry_live.py."""

import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest

from cluster.prometheus import Prometheus, PrometheusUnavailable
from jobs.manifests import object_name
from jobs.models import Job
from jobs.use import telemetry
from quotas.models import GpuFlavor, Scheduler
from tenants.models import Team
from workloads.kinds import for_job

# Rows in memory, with ids: telemetry reads a job's id, kind, team and flavor, nothing else.
_ids = itertools.count(101)


def make_flavor(name, scheduler=Scheduler.KUEUE):
    return GpuFlavor(name=name, scheduler=scheduler, resource_name="nvidia.com/gpu")


def make_job(team, flavor, *, name="train", kind=Job.Kind.TRAINING, **fields):
    return Job(pk=next(_ids), team=team, flavor=flavor, name=name, kind=kind, **fields)


@pytest.fixture
def team():
    return Team(slug="vision")


@pytest.fixture
def flavor():
    return make_flavor("h100")


def gpu_series(api, job, pod, metric, value, *, gpu="0", uuid=None, host="node-a"):
    return api.add(value, __name__=metric, namespace=job.team.namespace_name, pod=pod, container="main",
                   gpu=gpu, UUID=uuid or f"GPU-{host}-{gpu}", device=f"nvidia{gpu}", Hostname=host,
                   modelName="NVIDIA H100 80GB HBM3")


@pytest.fixture
def volcano():
    return make_flavor("a100-volcano", scheduler=Scheduler.VOLCANO)


# --- pod names, per kind ---------------------------------------------------------------
POD_NAMES = [
    # (case, kind, scheduler, pod name made from the job's object name `o`, matches)
    ("a batch Job's indexed pod", Job.Kind.TRAINING, Scheduler.KUEUE, "{o}-0-x7kqz", True),
    ("a batch Job's pod of index 12", Job.Kind.TRAINING, Scheduler.KUEUE, "{o}-12-b2c4d", True),
    ("a batch Job pod without an index", Job.Kind.TRAINING, Scheduler.KUEUE, "{o}-x7kqz", False),
    ("another job's batch pod whose name starts with ours", Job.Kind.TRAINING, Scheduler.KUEUE, "{o}-b-9-0-x7kqz",
     False),
    ("a Volcano master", Job.Kind.TRAINING, Scheduler.VOLCANO, "{o}-master-0", True),
    ("a Volcano worker", Job.Kind.TRAINING, Scheduler.VOLCANO, "{o}-worker-3", True),
    ("a Volcano pod of a task we never render", Job.Kind.TRAINING, Scheduler.VOLCANO, "{o}-chief-0", False),
    ("a Deployment's pod", Job.Kind.INFERENCE, Scheduler.KUEUE, "{o}-5d8f9c7b6d-q2w4e", True),
    ("a Deployment's pod on Volcano", Job.Kind.INFERENCE, Scheduler.VOLCANO, "{o}-7c9d-q2w4e", True),
    ("a longer job's Deployment pod", Job.Kind.INFERENCE, Scheduler.KUEUE, "{o}-b-9-5d8f9c7b6d-q2w4e", False),
]


@pytest.mark.parametrize("case, kind, scheduler, pod, matches", POD_NAMES, ids=[c[0] for c in POD_NAMES])
def test_each_kind_knows_its_pods_names(team, case, kind, scheduler, pod, matches):
    flavor = make_flavor(f"f-{scheduler}", scheduler=scheduler)
    job = make_job(team, flavor, name="a", kind=kind)
    pattern = for_job(job).pod_pattern(job)
    assert bool(re.fullmatch(pattern, pod.format(o=object_name(job)))) is matches


def test_job_a_never_takes_the_gpus_of_job_a_b(team, flavor, prometheus_api):
    a = make_job(team, flavor, name="a")
    a_b = make_job(team, flavor, name="a-b")
    gpu_series(prometheus_api, a, f"{object_name(a)}-0-abcde", telemetry.GPU_UTIL, 90, gpu="0")
    gpu_series(prometheus_api, a_b, f"{object_name(a_b)}-0-abcde", telemetry.GPU_UTIL, 10, gpu="1")
    now = telemetry.utilization_now([a, a_b], prometheus=Prometheus(prometheus_api.url))
    assert now[a.pk].gpus_reporting == 1 and now[a.pk].mean_util_percent == 90
    assert now[a_b.pk].gpus_reporting == 1 and now[a_b.pk].mean_util_percent == 10


# --- now ---------------------------------------------------------------------------------
def test_utilization_now_answers_for_many_jobs_with_one_query(team, flavor, volcano, prometheus_api):
    other = Team(slug="other-team")
    batch = make_job(team, flavor, name="train", workers=2, gpus_per_worker=2)
    gang = make_job(team, volcano, name="gang", workers=2)
    elsewhere = make_job(other, flavor, name="train")
    quiet = make_job(team, flavor, name="quiet")
    o = object_name(batch)
    for pod, gpu, util, mem in [(f"{o}-0-aaaaa", "0", 80, 1000), (f"{o}-0-aaaaa", "1", 60, 3000),
                                (f"{o}-1-bbbbb", "2", 40, 2000), (f"{o}-1-bbbbb", "3", 20, 2000)]:
        gpu_series(prometheus_api, batch, pod, telemetry.GPU_UTIL, util, gpu=gpu)
        gpu_series(prometheus_api, batch, pod, telemetry.FB_USED, mem, gpu=gpu)
        gpu_series(prometheus_api, batch, pod, telemetry.GR_ENGINE_ACTIVE, util / 100, gpu=gpu)
        gpu_series(prometheus_api, batch, pod, telemetry.POWER_USAGE, 300, gpu=gpu)  # not asked for
    gpu_series(prometheus_api, gang, f"{object_name(gang)}-master-0", telemetry.GPU_UTIL, 95, host="node-b")
    gpu_series(prometheus_api, gang, f"{object_name(gang)}-worker-0", telemetry.GPU_UTIL, 5, host="node-c")
    gpu_series(prometheus_api, elsewhere, f"{object_name(elsewhere)}-0-ccccc", telemetry.GPU_UTIL, 33, gpu="7")

    now = telemetry.utilization_now([batch, gang, elsewhere, quiet], prometheus=Prometheus(prometheus_api.url))

    assert len(prometheus_api.requests) == 1
    assert now[batch.pk].gpus_reporting == 4
    assert now[batch.pk].mean_util_percent == 50
    assert now[batch.pk].mem_used_mib == 8000
    assert [g.engine_active for g in now[batch.pk].gpus] == [0.8, 0.6, 0.4, 0.2]
    assert [g.key.gpu for g in now[batch.pk].gpus] == ["0", "1", "2", "3"]
    assert now[gang.pk].gpus_reporting == 2 and now[gang.pk].mean_util_percent == 50
    assert now[gang.pk].mem_used_mib is None
    assert now[elsewhere.pk].mean_util_percent == 33
    assert now[quiet.pk] == telemetry.NO_GPUS


def test_a_series_in_another_namespace_with_the_same_pod_name_is_not_the_jobs(team, flavor, prometheus_api):
    job = make_job(team, flavor, name="train")
    prometheus_api.add(99, __name__=telemetry.GPU_UTIL, namespace="team-intruder",
                       pod=f"{object_name(job)}-0-aaaaa", gpu="0", UUID="GPU-x", Hostname="n")
    now = telemetry.utilization_now([job], prometheus=Prometheus(prometheus_api.url))
    assert now[job.pk] == telemetry.NO_GPUS


def test_no_jobs_no_query(prometheus_api):
    assert telemetry.utilization_now([], prometheus=Prometheus(prometheus_api.url)) == {}
    assert prometheus_api.requests == []


def test_unconfigured_prometheus_is_unavailable(team, flavor, settings):
    from cluster.prometheus import prometheus_from_settings

    settings.PROMETHEUS_URL = ""
    prometheus_from_settings.cache_clear()
    with pytest.raises(PrometheusUnavailable, match="not configured"):
        telemetry.utilization_now([make_job(team, flavor)])
    with pytest.raises(PrometheusUnavailable, match="not configured"):
        now = datetime.now(UTC)
        telemetry.utilization_over_time(make_job(team, flavor), now - timedelta(hours=1), now, 60)


def test_an_unreachable_prometheus_raises_through(team, flavor, prometheus_api):
    prometheus_api.answer = (502, b"bad gateway")
    with pytest.raises(PrometheusUnavailable, match="HTTP 502"):
        telemetry.utilization_now([make_job(team, flavor)], prometheus=Prometheus(prometheus_api.url))


# --- over time -----------------------------------------------------------------------
def test_utilization_over_time_gives_each_gpu_its_util_and_memory_series(team, flavor, prometheus_api):
    job = make_job(team, flavor, name="train", gpus_per_worker=2)
    other = make_job(team, flavor, name="train-2")
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    pod = f"{object_name(job)}-0-aaaaa"

    def busy_then_idle(t):
        return 90.0 if t < start.timestamp() + 60 else 5.0

    gpu_series(prometheus_api, job, pod, telemetry.GPU_UTIL, busy_then_idle, gpu="1")
    gpu_series(prometheus_api, job, pod, telemetry.GPU_UTIL, 50, gpu="0")
    gpu_series(prometheus_api, job, pod, telemetry.FB_USED, 4096, gpu="0")
    gpu_series(prometheus_api, job, pod, telemetry.FB_USED, 1024, gpu="1")
    gpu_series(prometheus_api, other, f"{object_name(other)}-0-bbbbb", telemetry.GPU_UTIL, 1, gpu="2")

    series = telemetry.utilization_over_time(job, start, start + timedelta(minutes=2), timedelta(seconds=30),
                                             prometheus=Prometheus(prometheus_api.url))

    assert len(prometheus_api.requests) == 1
    assert [s.key.gpu for s in series] == ["0", "1"]
    first, second = series
    assert first.util_percent == [(start + timedelta(seconds=s), 50.0) for s in (0, 30, 60, 90, 120)]
    assert [v for _, v in second.util_percent] == [90, 90, 5, 5, 5]
    assert {v for _, v in second.mem_used_mib} == {1024}
    assert second.key.label == f"{pod} GPU 1 on node-a"


def mig_series(api, job, pod, metric, value, instance):
    return api.add(value, __name__=metric, namespace=job.team.namespace_name, pod=pod, container="main", gpu="0",
                   UUID="GPU-mig", device="nvidia0", Hostname="mig-0", modelName="NVIDIA A100-SXM4-80GB",
                   GPU_I_PROFILE="1g.10gb", GPU_I_ID=instance)


def test_a_mig_instance_without_gpu_util_is_as_busy_as_its_engine(team, flavor, prometheus_api):
    job = make_job(team, flavor, name="train", gpus_per_worker=2)
    pod = f"{object_name(job)}-0-aaaaa"
    mig_series(prometheus_api, job, pod, telemetry.GR_ENGINE_ACTIVE, 0.25, "1")
    mig_series(prometheus_api, job, pod, telemetry.GR_ENGINE_ACTIVE, 0.75, "2")
    mig_series(prometheus_api, job, pod, telemetry.FB_USED, 1000, "1")
    prometheus = Prometheus(prometheus_api.url)

    now = telemetry.utilization_now([job], prometheus=prometheus)[job.pk]
    assert now.gpus_reporting == 2 and now.mean_util_percent == 50
    assert [g.key.label for g in now.gpus] == [f"{pod} GPU 0/1 on mig-0", f"{pod} GPU 0/2 on mig-0"]

    start = datetime(2026, 3, 1, tzinfo=UTC)
    series = telemetry.utilization_over_time(job, start, start + timedelta(seconds=10), 10, prometheus=prometheus)
    assert [[v for _, v in s.util_percent] for s in series] == [[25, 25], [75, 75]]
