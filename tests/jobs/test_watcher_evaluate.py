"""`StatusWatcher.evaluate` over many jobs: what each job's team may use is read once per batch.

A Volcano job's observation needs the team's GPU ceiling on its flavor (nominal plus what
the cohort lends); the watcher reads the ceilings of every job it evaluates in one query,
before it takes the cache's lock, instead of a query per job under the lock.
"""

import pytest

from jobs.models import Job
from jobs.watch.watcher import Ceilings, StatusWatcher, gpu_ceilings
from quotas.models import Cohort, Scheduler

from ..builders import make_flavor, make_job, make_quota, make_team
from .test_watcher_transform import podgroup, vcjob

pytestmark = pytest.mark.django_db


@pytest.fixture
def flavor_h100():
    return make_flavor("h100")


@pytest.fixture
def a100():
    return make_flavor("a100", scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"})


def queued_jobs(team, flavor, count, **fields):
    jobs = [make_job(team, flavor, **fields) for _ in range(count)]
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(state=Job.State.QUEUED)
    return jobs


def pending_in(watcher, jobs):
    for job in jobs:
        for kind, obj in (vcjob(job, "Pending"), podgroup(job, "Pending")):
            watcher._record(kind, "ADDED", obj)


def test_ceilings_count_what_the_cohort_lends(a100):
    cohort = Cohort.objects.create(name="research")
    vision, nlp, solo = make_team("vision"), make_team("nlp"), make_team("solo")
    make_quota(vision, a100, nominal_gpus=8, cohort=cohort)
    make_quota(nlp, a100, nominal_gpus=16, cohort=cohort, lending_limit_gpus=4)
    make_quota(solo, a100, nominal_gpus=2)
    jobs = [make_job(team, a100) for team in (vision, nlp, solo)]
    assert gpu_ceilings({(j.team_id, j.flavor_id) for j in jobs}) == {
        (vision.pk, a100.pk): 12, (nlp.pk, a100.pk): 24, (solo.pk, a100.pk): 2}
    assert gpu_ceilings(set()) == {}
    assert [Ceilings(jobs).of(job) for job in jobs] == [12, 24, 2]


@pytest.mark.parametrize("count", [3, 12])
def test_evaluating_jobs_costs_the_same_queries_however_many(a100, count, django_assert_num_queries):
    cohort = Cohort.objects.create(name="research")
    vision, nlp = make_team("vision"), make_team("nlp")
    make_quota(vision, a100, nominal_gpus=8, cohort=cohort)
    make_quota(nlp, a100, nominal_gpus=8, cohort=cohort)
    fitting = queued_jobs(vision, a100, count, workers=2, gpus_per_worker=8)  # 16 of 8 + 8 borrowed
    too_big = queued_jobs(vision, a100, 1, workers=3, gpus_per_worker=8)  # 24: never
    watcher = StatusWatcher(cluster=None)
    pending_in(watcher, fitting + too_big)
    watcher.evaluate([j.pk for j in fitting + too_big])  # first pass writes reasons
    with django_assert_num_queries(2):  # the jobs, the ceilings once; nothing changed, nothing written
        assert watcher.evaluate([j.pk for j in fitting + too_big]) == 0
    assert Job.objects.get(pk=too_big[0].pk).message == (
        "Can never start: this job needs 24 a100 GPUs but team vision can use at most 16, borrowing included.")
    assert {j.reason for j in Job.objects.filter(pk__in=[j.pk for j in fitting])} == {"WaitingForResources"}


def test_a_batch_no_observer_asks_a_ceiling_of_reads_none(flavor_h100, django_assert_num_queries):
    team = make_team("vision")
    make_quota(team, flavor_h100)
    jobs = queued_jobs(team, flavor_h100, 3)
    watcher = StatusWatcher(cluster=None)
    watcher.evaluate([j.pk for j in jobs])
    with django_assert_num_queries(1):  # the jobs: a Kueue job's observation needs no ceiling
        watcher.evaluate([j.pk for j in jobs])


@pytest.mark.parametrize("phase", ["Inqueue", "Running"])
def test_a_batch_of_gangs_past_the_queue_reads_no_ceiling(a100, phase, django_assert_num_queries):
    """Only a pending gang's observation depends on the ceiling (can it ever fit?): gangs
    Volcano has let in or started cost the batch no read of the quotas."""
    team = make_team("vision")
    make_quota(team, a100, nominal_gpus=8)
    jobs = queued_jobs(team, a100, 3, workers=1, gpus_per_worker=1)
    watcher = StatusWatcher(cluster=None)
    for job in jobs:
        for kind, obj in (vcjob(job, "Pending"), podgroup(job, phase)):
            watcher._record(kind, "ADDED", obj)
    watcher.evaluate([j.pk for j in jobs])  # first pass moves them on
    assert {j.state for j in Job.objects.filter(pk__in=[j.pk for j in jobs])} == {
        Job.State.ADMITTED if phase == "Inqueue" else Job.State.RUNNING}
    with django_assert_num_queries(1):  # the jobs
        assert watcher.evaluate([j.pk for j in jobs]) == 0
