"""The sweep hands live jobs to the worker a hundred to a message (`jobs.tasks.reconcile_jobs`):
one read per batch instead of one per job, each job synced as its own reconcile syncs it, and
one job's fault neither stops the batch nor hides from the log."""

import logging
import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from cluster import NotFound, TransientError
from gpuplatform import tasks as sweep_tasks
from jobs import tasks as job_tasks
from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Job
from jobs.tasks import reconcile_jobs
from quotas.tasks import reconcile_cluster_objects, reconcile_team_quotas, sync_team_quotas
from tenants.tasks import reconcile_team, sync_team

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
    monkeypatch.setattr(job_tasks, "SWEEP_BATCH", 2)
    sent, others = [], []
    monkeypatch.setattr(reconcile_jobs, "apply_async", lambda args, **options: sent.append((args[0], options)))
    for task in (reconcile_team, reconcile_team_quotas, reconcile_cluster_objects):
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


# --- a job that moves on between the batch's read and its apply ---------------------------
def test_a_job_cancelled_after_the_batch_read_it_is_not_written_back(onboarded, team, flavor, owner):
    """The soak's find: a sweep's batch read a job as running, the job was cancelled and its
    reconcile removed its objects, then the batch applied them again from what it had read."""
    job = submitted(team, flavor, name="late-cancel")
    reconcile_jobs([job.pk])
    read_by_the_batch = job_tasks._with_related().get(pk=job.pk)

    assert Job.objects.get(pk=job.pk).request_cancel(owner)
    job_tasks.sync_job(onboarded, job_tasks._with_related().get(pk=job.pk))  # the cancel's own reconcile
    onboarded.cache.catch_up()
    assert batch_job(onboarded, job) is None

    onboarded.reset_counts()
    assert job_tasks.sync_job(onboarded, read_by_the_batch).writes == 0
    assert batch_job(onboarded, job) is None and onboarded.writes == 0
    assert Job.objects.get(pk=job.pk).state == State.CANCELLING  # its end is the next look's
    reconcile_jobs([job.pk])  # the next sweep's: nothing of it is left
    assert Job.objects.get(pk=job.pk).state == State.CANCELLED


def test_a_job_that_moved_on_but_still_runs_is_applied(onboarded, team, flavor):
    """Only a job that no longer wants its objects is left alone: queued -> admitted meanwhile
    still needs them (here its batch Job, deleted behind our back)."""
    job = submitted(team, flavor, name="moved-on")
    reconcile_jobs([job.pk])
    read_by_the_batch = job_tasks._with_related().get(pk=job.pk)
    Job.objects.get(pk=job.pk).transition(State.ADMITTED, reason="Admitted")
    onboarded.delete("batch/v1", "Job", object_name(job), team.namespace_name)
    onboarded.cache.catch_up()

    assert job_tasks.sync_job(onboarded, read_by_the_batch).writes == 1
    assert batch_job(onboarded, job) is not None


@pytest.mark.django_db(transaction=True)
def test_a_cancel_waits_for_an_apply_in_flight_whose_objects_its_reconcile_then_removes(
        onboarded, team, flavor, owner):
    """The other order: the apply holds the job's row from its first write to its end, so a
    cancel committing meanwhile waits, and the cancel's reconcile runs after the apply."""
    if connection.vendor != "postgresql":
        pytest.skip("needs a database with row locks and real concurrency")
    job = submitted(team, flavor, name="in-flight")
    reconcile_jobs([job.pk])
    onboarded.delete("batch/v1", "Job", object_name(job), team.namespace_name)
    onboarded.cache.catch_up()
    stale = job_tasks._with_related().get(pk=job.pk)

    in_patch, release = threading.Event(), threading.Event()
    request = onboarded._request

    def slow_patch(verb):
        if verb == "PATCH" and threading.current_thread().name == "apply":
            in_patch.set()
            assert release.wait(30)
        return request(verb)

    onboarded._request = slow_patch
    results = {}

    def run(name, work):
        try:
            results[name] = work()
        finally:
            connections.close_all()

    def cancel():
        with transaction.atomic():
            return Job.objects.get(pk=job.pk).request_cancel(owner)

    apply = threading.Thread(target=run, args=("apply", lambda: job_tasks.sync_job(onboarded, stale).writes), name="apply")
    apply.start()
    assert in_patch.wait(30)
    canceller = threading.Thread(target=run, args=("cancel", cancel))
    canceller.start()
    try:
        waiting = _wait_for_a_lock_wait('UPDATE "jobs_job"')
    finally:
        release.set()
        apply.join(30)
        canceller.join(30)
    assert waiting, "the cancel's update did not wait for the apply's lock"
    assert results == {"apply": 1, "cancel": True}
    assert batch_job(onboarded, job) is not None  # written before the cancel: its reconcile's to remove

    onboarded.cache.catch_up()
    job_tasks.sync_job(onboarded, job_tasks._with_related().get(pk=job.pk))
    assert batch_job(onboarded, job) is None
    assert Job.objects.get(pk=job.pk).state == State.CANCELLING  # deleted: its pods go after it
    reconcile_jobs([job.pk])  # the next sweep's: nothing of it is left
    assert Job.objects.get(pk=job.pk).state == State.CANCELLED


def _wait_for_a_lock_wait(query_start: str, timeout: float = 15.0) -> bool:
    """Whether another session waits on a row lock in a statement starting `query_start`."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND pid <> pg_backend_pid() AND query LIKE %s", [query_start + "%"])
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.05)
    return False
