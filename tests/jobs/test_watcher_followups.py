"""A job being cancelled whose workload is gone gives its GPUs back as its pods go, so its
GPU-hours end with its pods and not when the cancel's reconcile (a retried task, seconds later)
records the end; never before every watch has listed. The cancel's reconcile records the end
only once the pods are gone (`jobs.tasks._record_the_end`)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster import FakeCluster, ObjectRef
from core.reconcile import Outcome
from jobs import tasks
from jobs.lifecycle import State
from jobs.models import GpuInterval, Job
from jobs.tasks import _record
from jobs.watch.watcher import POD, StatusWatcher

from ..builders import make_flavor, make_job, make_team
from .test_watcher_transform import deployment, pod

pytestmark = pytest.mark.django_db

SERVER = dict(kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=2, gpus_per_worker=2)


def listed(watcher: StatusWatcher) -> StatusWatcher:
    for informer in watcher._informers.values():
        informer.synced.set()
    return watcher


@pytest.fixture
def cancelling_server():
    """A server of two replicas on two nodes (4 GPUs held since an hour ago), being cancelled."""
    job = make_job(make_team("vision"), make_flavor("h100"), name="serve", **SERVER)
    started = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(state=State.CANCELLING, gpus_in_use=4, updated_at=started)
    GpuInterval.objects.create(job=job, team=job.team, flavor=job.flavor, gpus=4, started_at=started)
    return Job.objects.get(pk=job.pk)


def gone_but_pods(job, watcher):
    """The Deployment deleted; its two pods still on their nodes, for the garbage collector."""
    pods = [pod(job, index, node=f"n{index}") for index in range(2)]
    for kind, obj in [deployment(job, ready=2), *pods]:
        watcher._record(kind, "ADDED", obj)
    watcher._record(*deployment(job)[:1], "DELETED", deployment(job)[1])
    return pods


def held(job) -> list[tuple[int, bool]]:
    return [(i.gpus, i.ended_at is None) for i in GpuInterval.objects.filter(job=job)]


def test_a_cancelled_servers_gpus_end_with_its_pods_not_with_the_recorded_end(cancelling_server):
    watcher = listed(StatusWatcher(cluster=None))
    pods = gone_but_pods(cancelling_server, watcher)
    watcher.evaluate([cancelling_server.pk])
    assert held(cancelling_server) == [(4, True)]  # both pods still hold theirs
    watcher._record(POD, "DELETED", pods[0][1])
    watcher.evaluate([cancelling_server.pk])
    assert held(cancelling_server) == [(4, False), (2, True)]
    watcher._record(POD, "DELETED", pods[1][1])
    before = timezone.now()
    watcher.evaluate([cancelling_server.pk])
    assert held(cancelling_server) == [(4, False), (2, False)]
    assert GpuInterval.objects.filter(job=cancelling_server).latest("started_at").ended_at >= before
    gone = GpuInterval.objects.filter(job=cancelling_server).latest("started_at").ended_at
    job = Job.objects.get(pk=cancelling_server.pk)
    assert (job.state, job.gpus_in_use) == (State.CANCELLING, 0)  # the end is the cancel's to record
    # The cancel's reconcile, retried seconds later, records the end when the pods went, and
    # charges nothing more.
    _record(FakeCluster(), job, Outcome())
    job = Job.objects.get(pk=cancelling_server.pk)
    assert (job.state, job.finished_at) == (State.CANCELLED, gone)
    assert job.events.latest("created_at").created_at == gone
    assert held(cancelling_server) == [(4, False), (2, False)]


def test_nothing_is_given_back_before_every_watch_has_listed(cancelling_server):
    watcher = StatusWatcher(cluster=None)  # after a restart: the caches are still empty
    assert watcher.evaluate([cancelling_server.pk]) == 0
    assert held(cancelling_server) == [(4, True)]
    assert listed(watcher).evaluate([cancelling_server.pk]) == 1  # listed: nothing of it is left
    assert held(cancelling_server) == [(4, False)]


def test_a_job_not_being_cancelled_keeps_its_gpus_when_its_workload_is_unseen():
    job = make_job(make_team("vision"), make_flavor("h100"), name="serve", **SERVER)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, gpus_in_use=2)
    GpuInterval.objects.create(job=job, team=job.team, flavor=job.flavor, gpus=2, started_at=timezone.now())
    assert listed(StatusWatcher(cluster=None)).evaluate([job.pk]) == 0
    assert held(job) == [(2, True)]


def _on_a_node(fake: FakeCluster, job, index: int) -> None:
    fake.put(pod(job, index, node=f"n{index}")[1])


def test_the_end_waits_for_pods_the_garbage_collector_has_not_deleted_yet(cancelling_server, monkeypatch):
    """After an API-server restart the garbage collector catches up late: the server's
    Deployment is gone but its pods run on, so the cancel's reconcile leaves the end (and the
    GPU-hours) open, and the next one, once the pods are gone, records it."""
    monkeypatch.setattr(tasks, "END_WAIT_SECONDS", 0.2)
    fake = FakeCluster()
    for index in range(2):
        _on_a_node(fake, cancelling_server, index)
    deleted = Outcome(pruned=[ObjectRef("apps/v1", "Deployment", cancelling_server.team.namespace_name, "serve")])
    _record(fake, cancelling_server, deleted)  # the reconcile that deleted its Deployment waits a while
    job = Job.objects.get(pk=cancelling_server.pk)
    assert (job.state, job.finished_at) == (State.CANCELLING, None)
    assert fake.requests["LIST"] > 1
    assert held(job) == [(4, True)]
    for stored in fake.stored("v1", "Pod"):
        fake.remove("v1", "Pod", stored["metadata"]["name"], stored["metadata"]["namespace"])
    before = timezone.now()
    _record(fake, job, Outcome())  # the sweep's, later: one look
    job = Job.objects.get(pk=cancelling_server.pk)
    assert job.state == State.CANCELLED and job.finished_at >= before
    assert held(job) == [(4, False)]


def test_without_pods_the_end_is_recorded_at_once(cancelling_server):
    fake = FakeCluster()
    _record(fake, cancelling_server, Outcome())
    assert Job.objects.get(pk=cancelling_server.pk).state == State.CANCELLED
    assert fake.requests["LIST"] == 1  # one look at its pods
