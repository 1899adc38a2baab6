"""One idle definition (jobs.use.idle): the quota console's "idle GPUs now" and the reclaim read
the same threshold (`idle.threshold_percent`) and the same windows' rule
(`idle.activity_promql`), so changing IDLE_GPU_THRESHOLD_PERCENT moves both. Against the
Prometheus stand-in (cluster/prometheus_standin.py, a real HTTP server evaluating the PromQL
sent), the sweep on the in-memory cluster."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cluster.prometheus import prometheus_from_settings
from jobs.lifecycle import State
from jobs.models import Job
from jobs.use import gpu_use, idle, reclaim
from quotas.models import IdlePolicy
from tests.builders import make_job
from tests.standin import training_pod

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def policy(settings, tmp_path):
    settings.IDLE_GPU_AFTER_SECONDS = 30
    settings.IDLE_GPU_GRACE_SECONDS = 30
    settings.IDLE_GPU_WINDOW_SECONDS = 10
    settings.KUBECONFIG = str(tmp_path / "missing")


def running(team, flavor, name="train") -> Job:
    job = make_job(team, flavor, name=name, workers=1, gpus_per_worker=1)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, gpus_in_use=1,
                                         started_at=timezone.now() - timedelta(minutes=10))
    job.refresh_from_db()
    return job


def idle_now_and_swept(client_for, quota_manager, standin, fake, team) -> tuple[dict, dict, str]:
    prometheus = prometheus_from_settings()
    return (gpu_use.idle_gpus_now([team], prometheus=prometheus), reclaim.sweep_idle_jobs(fake, prometheus),
            client_for(quota_manager).get(reverse("console:capacity")).content.decode())


@pytest.mark.parametrize(("threshold", "is_idle"), [(5, False), (10, True)], ids=["8 % is busy at 5", "8 % is idle at 10"])
@pytest.mark.parametrize("metric", ["profiling", "utilization"])
def test_the_threshold_setting_moves_idle_gpus_now_and_the_reclaim_together(
        settings, client_for, quota_manager, standin, fake, team, flavor, threshold, is_idle, metric):
    settings.IDLE_GPU_THRESHOLD_PERCENT = threshold
    job = running(team, flavor)
    if metric == "profiling":  # the engine's activity counts where a GPU has it, not its utilization
        standin.gpu(team.namespace_name, training_pod(job), 0, util=60, active=0.08)
    else:
        standin.gpu(team.namespace_name, training_pod(job), 0, util=8)
    assert gpu_use.idle_threshold() == idle.threshold_percent() == threshold
    now, swept, page = idle_now_and_swept(client_for, quota_manager, standin, fake, team)
    assert now == ({team.slug: 1} if is_idle else {})
    assert swept["watched"] == 1 and swept["warned"] == (1 if is_idle else 0)
    assert (f"{team.slug}</a>: 1 idle GPU<" in page) is is_idle


def test_a_bursty_gpu_is_idle_neither_now_nor_for_the_reclaim(settings, client_for, quota_manager, standin, fake,
                                                             team, flavor):
    settings.IDLE_GPU_THRESHOLD_PERCENT = 5
    job = running(team, flavor)
    # 90 % one second in six, 0 % between: every window holds a burst, though it averages 15 %.
    standin.gpu(team.namespace_name, training_pod(job), 0, util=60,
                active=lambda t: 0.9 if int(t) % 6 == 0 else 0.0)
    now, swept, _ = idle_now_and_swept(client_for, quota_manager, standin, fake, team)
    assert now == {} and swept["warned"] == 0


def test_without_a_policy_the_pages_count_idle_below_the_default_threshold(settings, standin, team, flavor):
    settings.IDLE_GPU_THRESHOLD_PERCENT = settings.IDLE_GPU_AFTER_SECONDS = settings.IDLE_GPU_GRACE_SECONDS = None
    job = running(team, flavor)
    standin.gpu(team.namespace_name, training_pod(job), 0, util=4)
    assert idle.threshold_percent() == idle.DEFAULT_THRESHOLD_PERCENT == 5
    assert gpu_use.idle_gpus_now([team], prometheus=prometheus_from_settings()) == {team.slug: 1}


def test_a_flavor_policy_sets_the_threshold_the_sweep_judges_by(settings, standin, fake, team, flavor):
    settings.IDLE_GPU_THRESHOLD_PERCENT = 5
    IdlePolicy.objects.create(flavor=flavor, threshold_percent=10)
    job = running(team, flavor)
    standin.gpu(team.namespace_name, training_pod(job), 0, util=8)
    rules = IdlePolicy.objects.rules(team, flavor)
    assert idle.threshold_percent(rules) == 10
    assert reclaim.sweep_idle_jobs(fake, prometheus_from_settings())["warned"] == 1
