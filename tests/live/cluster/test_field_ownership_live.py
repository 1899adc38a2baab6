"""Workloads outlive sweeps on the real cluster: a long Kueue training job, a Volcano gang
and an HPA-scaled Deployment keep their pods (same UIDs), their replica count and their
generation across several reconciles, and each of those reconciles writes nothing.

Before field ownership (DESIGN.md section 8), each reconcile forced `suspend: true` back
onto the admitted Job, and its pods were deleted and started again from scratch."""

import pytest

from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Job
from jobs.tasks import sync_job

from ...support.cluster import reaches, stays_true, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

SWEEPS = 3
# Longer than the test: the fake kubelet (kwok) ends a pod after this.
OUTLIVES_THE_TEST = {"GPUPLATFORM_FAKE_DURATION": "900s"}
# Long enough between sweeps for the Job controller to act on a wrongly re-suspended Job.
BETWEEN_SWEEPS_SECONDS = 3


def pod_uids(live, job) -> dict[str, str]:
    pods = live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def running_pods(live, job, count: int) -> dict[str, str]:
    return wait_until(lambda: (uids := pod_uids(live, job)) and len(uids) == count and uids,
                      timeout=120, message=f"{count} running pods of job {job.name}")


def sweeps_change_nothing(live, job, *, workload: tuple[str, str], pods: dict[str, str]) -> None:
    """Reconcile `job` SWEEPS times: no write, the workload's generation stays, the pods stay."""
    api_version, kind = workload
    name, namespace = object_name(job), job.team.namespace_name
    generation = live.get(api_version, kind, name, namespace)["metadata"]["generation"]
    for sweep in range(SWEEPS):
        live.reset_counts()
        job.refresh_from_db()
        outcome = sync_job(live, job)
        assert live.writes == 0, f"sweep {sweep + 1} wrote: {outcome.lines()} {dict(live.requests)}"
        stays_true(lambda: pod_uids(live, job) == pods, BETWEEN_SWEEPS_SECONDS,
                   message=f"the pods of {job.name} after sweep {sweep + 1}")
    assert live.get(api_version, kind, name, namespace)["metadata"]["generation"] == generation
    job.refresh_from_db()
    assert job.state == State.RUNNING, job.message
    assert not job.events.filter(to_state=State.PREEMPTED).exists()


def test_a_long_kueue_training_job_keeps_running_across_sweeps(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, workers=2, gpus_per_worker=2, env=OUTLIVES_THE_TEST)
    reaches(job, State.RUNNING)
    pods = running_pods(live, job, 2)
    batch = live.get("batch/v1", "Job", object_name(job), team.namespace_name)
    assert batch["spec"]["suspend"] is False  # Kueue admitted and unsuspended it

    sweeps_change_nothing(live, job, workload=("batch/v1", "Job"), pods=pods)
    assert live.get("batch/v1", "Job", object_name(job), team.namespace_name)["spec"]["suspend"] is False


def test_a_queued_kueue_job_stays_suspended_and_costs_no_write(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, workers=3, gpus_per_worker=8, env=OUTLIVES_THE_TEST)  # beyond the quota
    wait_until(lambda: (job.refresh_from_db(), job.reason == "ExceedsQuota")[1], timeout=90,
               message="a quota reason")
    for _sweep in range(SWEEPS):
        live.reset_counts()
        sync_job(live, job)
        assert live.writes == 0, dict(live.requests)
    assert live.get("batch/v1", "Job", object_name(job), team.namespace_name)["spec"]["suspend"] is True


def test_a_volcano_gang_keeps_running_across_sweeps(live, world, watcher):
    team, _, a100 = world
    job = submit(live, team, a100, workers=3, gpus_per_worker=2, env=OUTLIVES_THE_TEST)
    reaches(job, State.RUNNING)
    pods = running_pods(live, job, 3)
    sweeps_change_nothing(live, job, workload=("batch.volcano.sh/v1alpha1", "Job"), pods=pods)


def test_a_deployment_scaled_by_an_autoscaler_keeps_its_replicas_across_sweeps(live, world, watcher, api_client):
    from kubernetes import client

    team, h100, _ = world
    job = submit(live, team, h100, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=4,
                 gpus_per_worker=1, readiness_path="/healthz", readiness_initial_delay_seconds=0)
    reaches(job, State.RUNNING)
    name, namespace = object_name(job), team.namespace_name
    # What the HPA does: write replicas through the scale subresource, as its own field manager.
    client.AppsV1Api(api_client).patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": 3}}, field_manager="horizontal-pod-autoscaler")
    pods = running_pods(live, job, 3)

    sweeps_change_nothing(live, job, workload=("apps/v1", "Deployment"), pods=pods)
    assert live.get("apps/v1", "Deployment", name, namespace)["spec"]["replicas"] == 3


def test_a_second_reconcile_all_writes_nothing_while_workloads_run(live, world, watcher):
    """What the beat sweep does, over every kind of workload at once, by the command."""
    from io import StringIO

    from django.core.management import call_command

    team, h100, a100 = world
    jobs = [
        submit(live, team, h100, workers=1, gpus_per_worker=2, env=OUTLIVES_THE_TEST),
        submit(live, team, a100, workers=2, gpus_per_worker=2, env=OUTLIVES_THE_TEST),
        submit(live, team, h100, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=2,
               gpus_per_worker=1, readiness_path="/healthz", readiness_initial_delay_seconds=0),
    ]
    for job in jobs:
        reaches(job, State.RUNNING)
    pods = {job.pk: running_pods(live, job, job.workers) for job in jobs}

    out = StringIO()
    call_command("reconcile", "--all", stdout=out)
    assert "\n0 writes (" in out.getvalue(), out.getvalue()
    assert {job.pk: pod_uids(live, job) for job in jobs} == pods
