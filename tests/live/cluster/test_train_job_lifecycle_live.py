"""A TrainJob's life beyond running to its end, on the local cluster's real Trainer, JobSet and
Kueue, as every other kind lives it: cancelled, its TrainJob pruned with its JobSet, Workload
and node pods, and its GPU-hours closed; preempted by a higher priority, its pods deleted, the hours it lost
charged to the preemptor's team, and admitted again once the GPUs are back; idle, warned and
reclaimed by the idle sweep from the exporter's metrics.

Needs the cluster with Trainer and JobSet started, as tests/live/cluster/test_train_job_live.py."""

import time
import uuid
from decimal import Decimal

import pytest
from django.utils import timezone

from jobs import actions
from jobs.lifecycle import State
from jobs.models import IdleWatch, Preemption
from jobs.tasks import sync_job
from jobs.use import reclaim
from quotas.models import PriorityClass
from quotas.tasks import sync_cluster_objects
from workloads import kueue, trainer
from workloads.pods import object_name

from ...builders import make_flavor, make_quota
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, reaches, submit, team_of_its_own, wait_until
from ...support.trainer import a_train_job, ensure_torch_runtime, node_pods

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

RUNS_LONG = "900"  # seconds of the fake kubelet's run: longer than any test here


@pytest.fixture
def trainers(live):
    """A team (slug tl-...) that may preempt, with a 4-GPU H100 quota on Kueue, and its owner."""
    slug = f"tl-{uuid.uuid4().hex[:6]}"
    team, owner = team_of_its_own(slug, max_priority_value=1000)
    h100 = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION)
    make_quota(team, h100, nominal_gpus=4, cpu_cores=64, memory_gib=512)
    ensure_torch_runtime(live)

    def its_classes():
        PriorityClass.objects.filter(name__endswith=slug).delete()

    with on_the_cluster(live, [team], [h100], then=its_classes):
        yield team, h100, owner


def workloads_of(live, job) -> list[dict]:
    return [w for w in live.list(*kueue.WORKLOAD, namespace=job.team.namespace_name)
            if any(r.get("kind") == "TrainJob" and r["name"] == object_name(job)
                   for r in w["metadata"].get("ownerReferences") or [])]


def workload_of(live, job) -> dict:
    [workload] = workloads_of(live, job)
    return workload


def running_pods(live, job) -> list[dict]:
    return [p for p in node_pods(live, job) if not p["metadata"].get("deletionTimestamp")]


def test_a_cancelled_train_job_is_deactivated_its_pods_go_and_its_gpu_hours_close(live, trainers, watcher):
    team, h100, owner = trainers
    job = a_train_job(live, team, h100, seconds=int(RUNS_LONG))
    reaches(job, State.RUNNING, timeout=240)
    wait_until(lambda: job.refresh_from_db() or job.gpus_in_use == 4, timeout=60, message="its 4 GPUs counted")
    assert actions.cancel(job, owner)
    sync_job(live, job)
    reaches(job, State.CANCELLED, timeout=60)
    # Its objects pruned: the TrainJob gone, and with it (garbage-collected) its JobSet, its
    # Workload and its node pods.
    def gone(api_version, kind):
        return not [o for o in live.list(api_version, kind, namespace=team.namespace_name)
                    if o["metadata"]["name"] == object_name(job) and not o["metadata"].get("deletionTimestamp")]
    wait_until(lambda: gone(*trainer.TRAIN_JOB) and gone(*trainer.JOBSET), timeout=60, message="its TrainJob and JobSet gone")
    wait_until(lambda: not workloads_of(live, job), timeout=60, message="its Workload gone")
    wait_until(lambda: not running_pods(live, job), timeout=90, message="the cancelled TrainJob's pods to go")
    # Its GPU-hours stop at the cancel: every interval closed, and a while later no more.
    job.refresh_from_db()
    assert job.gpu_intervals.exists() and not job.gpu_intervals.filter(ended_at__isnull=True).exists()
    hours = job.gpu_hours()
    time.sleep(5)
    assert job.gpu_hours() == hours and job.gpus_in_use == 0


def test_a_low_priority_train_job_is_preempted_charged_to_the_preemptor_and_runs_again(
        live, trainers, watcher, eager_tasks, keep_classes):
    team, h100, _ = trainers
    low = PriorityClass.objects.create(name=f"low-{team.slug}", value=10)
    high = PriorityClass.objects.create(name=f"high-{team.slug}", value=1000)
    keep_classes += [low, high]
    sync_cluster_objects(live)
    victim = a_train_job(live, team, h100, seconds=int(RUNS_LONG), priority=low)
    reaches(victim, State.RUNNING, timeout=240)
    victim.refresh_from_db()
    first_pods = {p["metadata"]["uid"] for p in running_pods(live, victim)}
    assert len(first_pods) == 2
    # A minute of 4 GPUs (0.07 GPU-hours) to lose: the charge is counted in hundredths.
    time.sleep(max(0.0, 60 - (timezone.now() - victim.run_admitted_at).total_seconds()))

    # A batch Job of a higher priority needs the team's 4 GPUs: Kueue evicts the TrainJob.
    urgent = submit(live, team, h100, workers=1, gpus_per_worker=4, priority=high,
                    env={"GPUPLATFORM_FAKE_DURATION": "40s"})
    reaches(urgent, State.RUNNING, timeout=180)
    wait_until(lambda: Preemption.objects.filter(job=victim).exists(), timeout=60, message="the preemption's record")
    wait_until(lambda: not (first_pods & {p["metadata"]["uid"] for p in running_pods(live, victim)}), timeout=90,
               message="the preempted TrainJob's pods to go")
    preemption = Preemption.objects.get(job=victim)
    assert (preemption.by_job_id, preemption.by_team_id, preemption.by_priority) == (urgent.pk, team.pk, high.name)
    held = Decimal(4 * (preemption.preempted_at - victim.run_admitted_at).total_seconds() / 3600)
    assert preemption.lost_gpu_hours > 0 and abs(preemption.lost_gpu_hours - held) <= Decimal("0.05")
    victim.refresh_from_db()
    assert victim.state in (State.QUEUED, State.PREEMPTED), victim.state

    # The urgent job ends; Kueue admits the TrainJob again and new node pods run.
    reaches(urgent, State.SUCCEEDED, timeout=180)
    reaches(victim, State.RUNNING, timeout=240)
    again = {p["metadata"]["uid"] for p in running_pods(live, victim)}
    assert len(again) == 2 and not again & first_pods
    assert Preemption.objects.filter(job=victim).count() == 1


def test_an_idle_train_job_is_warned_and_reclaimed(live, trainers, watcher, live_prometheus, short_idle_policy):
    team, h100, _ = trainers
    job = a_train_job(live, team, h100, seconds=int(RUNS_LONG), workers=2, gpus_per_worker=1,
                      env={"GPUPLATFORM_FAKE_DURATION": f"{RUNS_LONG}s", "GPU_SIM_UTIL": "1"})
    reaches(job, State.RUNNING, timeout=240)

    def swept_until(state_reached):
        def once():
            reclaim.sweep_idle_jobs(live, live_prometheus)
            job.refresh_from_db()
            return state_reached()
        return once

    watch = lambda: IdleWatch.objects.filter(job=job).first()  # noqa: E731
    wait_until(swept_until(lambda: (w := watch()) is not None and w.is_warned), timeout=180, interval=3,
               message="the idle TrainJob to be warned")
    wait_until(swept_until(lambda: job.state == State.RECLAIMED), timeout=180, interval=3,
               message="the idle TrainJob to be reclaimed")
    assert watch().reclaimed_idle_gpu_hours is not None
    assert workload_of(live, job)["spec"]["active"] is False
    wait_until(lambda: not running_pods(live, job), timeout=90, message="the reclaimed TrainJob's pods to go")
    assert any(e.reason == "IdleGpus" for e in job.events.all())
