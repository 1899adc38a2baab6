"""A job being cancelled whose workload is gone gives its GPUs back as its pods go, so its
GPU-hours end with its pods and not when the cancel's reconcile (a retried task, seconds later)
records the end; never before every watch has listed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.reconcile import Outcome
from jobs.lifecycle import State
from jobs.models import GpuInterval, Job
from jobs.tasks import _record
from jobs.watcher import POD, StatusWatcher

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
    _record(job, Outcome())
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
