"""The sweep hands live jobs to the worker a hundred to a message (`jobs.tasks.reconcile_jobs`):
one read per batch instead of one per job, each job synced as its own reconcile syncs it, and
one job's fault neither stops the batch nor hides from the log."""

import logging

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster import NotFound, TransientError
from gpuplatform import tasks as sweep_tasks
from jobs import tasks as job_tasks
from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Job
from jobs.tasks import reconcile_jobs
from quotas.tasks import sync_team_quotas
from tenants.tasks import sync_team

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db


def submitted(team, flavor, **fields) -> Job:
    job = make_job(team, flavor, **fields)
    job.submit()
    return job


@pytest.fixture
def onboarded(cached, team, flavor):
    make_quota(team, flavor, nominal_gpus=64)
    sync_team(cached, team)
    sync_team_quotas(cached, team)
    return cached


def batch_job(cluster, job) -> dict | None:
    try:
        return cluster.get("batch/v1", "Job", object_name(job), job.team.namespace_name)
    except NotFound:
        return None


def test_the_sweep_sends_every_live_job_once_in_batches(fake, team, flavor, monkeypatch):
    monkeypatch.setattr(sweep_tasks, "SWEEP_BATCH", 2)
    sent, others = [], []
    monkeypatch.setattr(reconcile_jobs, "apply_async", lambda args, **options: sent.append((args[0], options)))
    for task in (sweep_tasks.reconcile_team, sweep_tasks.reconcile_team_quotas, sweep_tasks.reconcile_cluster_objects):
        # Kept here, not sent to the suite's broker.
        monkeypatch.setattr(task, "apply_async", lambda args=(), _task=task, **options: others.append((_task.name, args)))
    live = [submitted(team, flavor, name=f"live-{i}").pk for i in range(5)]
    make_job(team, flavor, name="draft")  # not submitted: nothing on the cluster yet
    make_job(team, flavor, name="done", state=State.SUCCEEDED)

    sweep_tasks.sweep()

    assert [ids for ids, _ in sent] == [live[0:2], live[2:4], live[4:5]]
    assert all(options.get("expires") for _, options in sent), "a sweep's message must expire"
    assert sorted(name.rsplit(".", 1)[1] for name, _ in others) == [
        "reconcile_cluster_objects", "reconcile_team", "reconcile_team_quotas"]


def test_a_batch_creates_what_is_missing_and_then_costs_one_read(onboarded, team, flavor):
    jobs = [submitted(team, flavor, name=f"batch-{i}") for i in range(3)]

    assert reconcile_jobs([job.pk for job in jobs]) == 3
    for job in jobs:
        job.refresh_from_db()
        assert job.state == State.QUEUED
        assert batch_job(onboarded, job)["spec"]["suspend"] is True

    onboarded.reset_counts()
    with CaptureQueriesContext(connection) as queries:
        assert reconcile_jobs([job.pk for job in jobs]) == 0
    assert onboarded.writes == 0 and dict(onboarded.requests) == {}  # the warm cache answers
    assert len(queries) == 1, [q["sql"] for q in queries]  # the jobs, their teams, flavors, priorities


def test_a_batch_heals_a_job_deleted_behind_our_back(onboarded, team, flavor):
    jobs = [submitted(team, flavor, name=f"heal-{i}") for i in range(3)]
    reconcile_jobs([job.pk for job in jobs])
    victim = jobs[1]
    onboarded.delete("batch/v1", "Job", object_name(victim), team.namespace_name)
    onboarded.cache.catch_up()

    assert reconcile_jobs([job.pk for job in jobs]) == 1
    assert batch_job(onboarded, victim) is not None


def test_one_failing_job_is_logged_and_the_rest_are_reconciled(onboarded, team, flavor, monkeypatch, caplog):
    jobs = [submitted(team, flavor, name=f"fault-{i}") for i in range(3)]
    real = job_tasks.sync_job

    def sync_job(cluster, job):
        if job.pk == jobs[0].pk:
            raise ValueError("a bug in one job's rendering")
        return real(cluster, job)

    monkeypatch.setattr(job_tasks, "sync_job", sync_job)
    with caplog.at_level(logging.ERROR, logger="jobs.tasks"):
        assert reconcile_jobs([job.pk for job in jobs]) == 2
    assert f"reconciling job {jobs[0].pk} failed" in caplog.text
    assert batch_job(onboarded, jobs[0]) is None
    assert all(batch_job(onboarded, job) for job in jobs[1:])


def test_an_unreachable_cluster_retries_the_whole_batch(onboarded, team, flavor, monkeypatch):
    jobs = [submitted(team, flavor, name=f"down-{i}") for i in range(2)]

    def unreachable(cluster, job):
        raise TransientError("connection refused")

    monkeypatch.setattr(job_tasks, "sync_job", unreachable)
    retried = []
    monkeypatch.setattr(reconcile_jobs, "retry", lambda *args, **kwargs: retried.append(kwargs) or RuntimeError("retry"))
    with pytest.raises(RuntimeError, match="retry"):
        reconcile_jobs.apply(args=([job.pk for job in jobs],), throw=True)
    assert retried and isinstance(retried[0]["exc"], TransientError)
