"""A cancel ends once nothing of the job is seen left on the cluster (`jobs.tasks.end_when_gone`,
the one observation, writing through `Job.end_cancel`, the one writer): the reconcile deletes
the objects and returns; the garbage collector deletes the pods after them (here, the test:
the fake collects nothing); the watcher gives the GPUs back as the pods go and ends the cancel
when the last one went, or, where no watcher runs, the sweep's reconcile ends it when it finds
nothing left. So GPU-hours run exactly as long as pods hold GPUs, a pod placed after the cancel
included, and never before every watch has listed."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import GpuInterval, Job
from jobs.tasks import reconcile_job, reconcile_jobs
from jobs.watch.watcher import StatusWatcher
from quotas.models import Scheduler

from ..builders import make_flavor, make_job, make_quota, make_team
from .test_watcher_transform import deployment, pod

pytestmark = pytest.mark.django_db

SERVER = dict(kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=2, gpus_per_worker=2)
T0 = datetime(2026, 11, 2, 8, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


@pytest.fixture
def clock():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


def submitted_server(team, flavor) -> Job:
    """A server applied to the cluster (its Deployment, Service, ...)."""
    make_quota(team, flavor)
    job = make_job(team, flavor, name="serve", **SERVER)
    job.submit()
    reconcile_job(job.pk)
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def server(fake, team, flavor, clock):
    """A server of two replicas on two nodes, running with their 4 GPUs since T0."""
    job = submitted_server(team, flavor)
    assert job.observe(State.RUNNING, reason="Serving", message="", gpus=4)
    for index in range(2):
        fake.put(pod(job, index, node=f"n{index}")[1])
    return job


def look(watcher: StatusWatcher) -> int:
    """One turn of the watcher's loop: what the cluster says since, then the marked jobs and
    the jobs being cancelled (`StatusWatcher.run`)."""
    for informer in watcher._informers.values():
        informer.pump()
    with watcher._lock:
        dirty, watcher._dirty = watcher._dirty, set()
    return watcher.evaluate(dirty | watcher._cancelling())


def remove_pods(fake, *names: str) -> None:
    for stored in fake.stored("v1", "Pod"):
        if not names or stored["metadata"]["name"] in names:
            fake.remove("v1", "Pod", stored["metadata"]["name"], stored["metadata"]["namespace"])


def state(job) -> tuple:
    job = Job.objects.get(pk=job.pk)
    return job.state, job.finished_at


def intervals(job) -> list[tuple]:
    return list(GpuInterval.objects.filter(job=job).order_by("started_at", "id")
                .values_list("gpus", "started_at", "ended_at"))


def gpu_hours(job, until: datetime) -> float:
    return sum(gpus * ((ended or until) - started).total_seconds() / 3600 for gpus, started, ended in intervals(job))


def test_a_pod_that_outlives_several_sweeps_keeps_the_job_cancelling_and_its_gpu_hours_running(
        fake, server, clock, owner):
    clock.move_to(at(1))
    assert server.request_cancel(owner)
    reconcile_job(server.pk)  # deletes the Deployment and returns: the pods go after it
    assert fake.stored("apps/v1", "Deployment") == []
    assert state(server) == (State.CANCELLING, None)
    for hours in (2, 3):  # sweeps, no watcher: the pods are still there
        clock.move_to(at(hours))
        reconcile_jobs([server.pk])
        assert state(server) == (State.CANCELLING, None)
        assert gpu_hours(server, timezone.now()) == 4 * hours
    clock.move_to(at(4))
    remove_pods(fake)
    reconcile_jobs([server.pk])  # the sweep finds nothing left: the end is now
    assert state(server) == (State.CANCELLED, at(4))
    assert gpu_hours(server, at(10)) == 16


def test_the_watcher_ends_the_cancel_when_the_last_pod_goes_and_charges_each_pod_until_it_went(
        fake, server, clock, owner):
    watcher = StatusWatcher(fake)
    look(watcher)
    clock.move_to(at(1))
    assert server.request_cancel(owner)
    reconcile_job(server.pk)
    assert look(watcher) == 0  # the workload is gone, both pods still hold theirs
    assert state(server) == (State.CANCELLING, None)
    clock.move_to(at(2))
    remove_pods(fake, pod(server, 0)[1]["metadata"]["name"])
    look(watcher)
    assert state(server) == (State.CANCELLING, None)
    clock.move_to(at(3))
    remove_pods(fake)
    look(watcher)
    assert state(server) == (State.CANCELLED, at(3))
    assert intervals(server) == [(4, T0, at(2)), (2, at(2), at(3))]
    clock.move_to(at(5))
    reconcile_jobs([server.pk])  # a later sweep changes nothing
    assert state(server) == (State.CANCELLED, at(3))
    assert Job.objects.get(pk=server.pk).events.latest("created_at").created_at == at(3)


def test_a_job_cancelled_while_queued_whose_pod_starts_after_the_cancel_is_billed_until_the_pod_goes(
        fake, team, owner, clock):
    """The soak's find: a Volcano server cancelled while queued, its pod placed after the
    cancel (before the garbage collector deleted it), ran after the end it was given."""
    job = submitted_server(team, make_flavor("mig", scheduler=Scheduler.VOLCANO))
    assert Job.objects.get(pk=job.pk).state == State.QUEUED
    fake.put(pod(job, 0)[1])  # waiting for a node
    watcher = StatusWatcher(fake)
    look(watcher)
    clock.move_to(at(1))
    assert job.request_cancel(owner)
    reconcile_job(job.pk)
    look(watcher)
    assert state(job) == (State.CANCELLING, None)  # a waiting pod may still start
    clock.move_to(at(2))
    fake.put(pod(job, 0, node="n1")[1])  # it does
    look(watcher)
    reconcile_jobs([job.pk])
    assert state(job) == (State.CANCELLING, None)
    assert intervals(job) == [(2, at(2), None)]
    clock.move_to(at(4))
    remove_pods(fake)
    look(watcher)
    assert state(job) == (State.CANCELLED, at(4))
    assert intervals(job) == [(2, at(2), at(4))]


def test_an_object_the_watch_has_not_brought_yet_keeps_the_job_cancelling(fake, team, flavor, owner):
    """A cancel that waited for its job's first apply (`jobs.tasks._still_applied`): the
    watcher's cache may not hold the object just applied, so its end is listed first."""
    watcher = StatusWatcher(fake)
    look(watcher)
    job = submitted_server(team, flavor)  # applied; the watcher has not heard of it yet
    assert job.request_cancel(owner)
    assert watcher.evaluate(watcher._cancelling()) == 0
    assert state(job) == (State.CANCELLING, None)
    reconcile_job(job.pk)  # its own reconcile deletes it
    look(watcher)
    assert Job.objects.get(pk=job.pk).state == State.CANCELLED


def test_nothing_is_given_back_or_ended_before_every_watch_has_listed(fake, server, owner):
    assert server.request_cancel(owner)
    fake.remove(*deployment(server)[0], object_name(server), server.team.namespace_name)
    remove_pods(fake)
    watcher = StatusWatcher(fake)  # after a restart: the caches are still empty
    assert watcher._cancelling() == set()
    assert watcher.evaluate([server.pk]) == 0
    assert Job.objects.get(pk=server.pk).gpus_in_use == 4
    assert look(watcher) == 2  # listed: nothing of it is left, its GPUs are given back, it ends
    assert [(gpus, ended is None) for gpus, _, ended in intervals(server)] == [(4, False)]
    assert Job.objects.get(pk=server.pk).state == State.CANCELLED


def test_a_job_not_being_cancelled_keeps_its_gpus_when_its_workload_is_unseen(fake):
    job = make_job(make_team("vision"), make_flavor("h100"), name="serve", **SERVER)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, gpus_in_use=2)
    GpuInterval.objects.create(job=job, team=job.team, flavor=job.flavor, gpus=2, started_at=timezone.now())
    assert look(StatusWatcher(fake)) == 0
    assert [(gpus, ended) for gpus, _, ended in intervals(job)] == [(2, None)]
