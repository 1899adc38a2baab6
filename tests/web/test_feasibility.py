"""Feasibility before submit and quota usage: the rules the submit page and dashboards show."""

import pytest

from jobs import feasibility
from jobs.feasibility import Feasibility
from jobs.usage import usage_for
from jobs.lifecycle import State
from quotas.models import Cohort, PriorityClass
from tenants.models import Team

from ..builders import build_job, make_flavor, make_job, make_quota, make_team

pytestmark = pytest.mark.django_db


def _in_state(job, *states):
    for state in states:
        job.transition(state, reason=state.label)
    return job


def running(team, flavor, gpus, **fields):
    return _in_state(make_job(team, flavor, gpus_per_worker=gpus, **fields),
                     State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING)


def queued(team, flavor, gpus=1, **fields):
    return _in_state(make_job(team, flavor, gpus_per_worker=gpus, **fields), State.SUBMITTED, State.QUEUED)


def test_a_job_that_fits_the_free_quota_starts_now(team, flavor, quota):
    result = feasibility.assess(build_job(team, flavor, workers=2, gpus_per_worker=4))
    assert result.verdict == Feasibility.NOW
    assert result.message == "Starts now: 8 GPUs fit in the free quota (0 of 8 GPUs in use)."


def test_a_job_behind_others_will_queue_and_says_how_many_are_ahead(team, flavor, quota):
    running(team, flavor, 6)
    queued(team, flavor, 4)
    queued(team, flavor, 4)
    result = feasibility.assess(build_job(team, flavor, gpus_per_worker=1))
    assert result.verdict == Feasibility.QUEUE
    assert result.message == "Will queue: 2 jobs ahead, 6 of 8 GPUs in use."
    assert (result.jobs_ahead, result.in_use, result.capacity) == (2, 6, 8)


def test_a_job_too_big_for_the_free_quota_queues_even_with_nobody_ahead(team, flavor, quota):
    running(team, flavor, 6)
    result = feasibility.assess(build_job(team, flavor, gpus_per_worker=4))
    assert result.message == "Will queue: 0 jobs ahead, 6 of 8 GPUs in use."


def test_more_gpus_per_worker_than_a_node_has_can_never_run(team, quota):
    small = make_flavor("t4", gpus_per_node=4)
    make_quota(team, small, nominal_gpus=16)
    result = feasibility.assess(build_job(team, small, gpus_per_worker=8))
    assert result.verdict == Feasibility.NEVER
    assert result.message == "Can never run: 8 GPUs per worker but nodes of this flavor have 4."


def test_more_gpus_than_the_quota_can_ever_hold_can_never_run(team, flavor, quota):
    result = feasibility.assess(build_job(team, flavor, workers=2, gpus_per_worker=8))
    assert result.verdict == Feasibility.NEVER
    assert "needs 16 GPUs but team vision can use at most 8 on h100" in result.message


def test_no_quota_on_the_flavor_can_never_run(team, flavor):
    result = feasibility.assess(build_job(team, flavor))
    assert result.verdict == Feasibility.NEVER and "has no quota on h100" in result.message


def test_borrowing_from_the_cohort_raises_the_ceiling_and_is_said(team, flavor):
    cohort = Cohort.objects.create(name="research")
    make_quota(team, flavor, nominal_gpus=8, cohort=cohort, borrowing_limit_gpus=8)
    make_quota(make_team("lender"), flavor, nominal_gpus=8, cohort=cohort)
    result = feasibility.assess(build_job(team, flavor, workers=2, gpus_per_worker=6))
    assert result.verdict == Feasibility.NOW
    assert result.message.startswith("Starts now if the cohort has 4 idle GPUs to lend")


def test_higher_priority_jobs_skip_the_lower_priority_queue(team, flavor, quota):
    Team.objects.filter(pk=team.pk).update(max_priority_value=1000)  # a team allowed to preempt
    team.refresh_from_db()
    low = PriorityClass.objects.create(name="low", value=10)
    high = PriorityClass.objects.create(name="high", value=1000)
    running(team, flavor, 8)
    queued(team, flavor, priority=low)
    result = feasibility.assess(build_job(team, flavor, priority=high))
    assert result.jobs_ahead == 0


def test_queue_position_counts_earlier_waiting_jobs_only(team, flavor, quota):
    first, second = queued(team, flavor), queued(team, flavor)
    third = queued(team, flavor)
    assert [feasibility.queue_position(j) for j in (first, second, third)] == [0, 1, 2]
    assert feasibility.queue_position(running(team, flavor, 1)) is None


def test_usage_counts_gpus_of_admitted_and_running_jobs_and_waiting_jobs(team, flavor, quota):
    running(team, flavor, 4, workers=1)
    queued(team, flavor, 2)
    make_job(team, flavor)  # a draft holds nothing
    item = usage_for([team])[(team.pk, flavor.pk)]
    assert (item.in_use, item.running, item.queued, item.nominal, item.free) == (4, 1, 1, 8, 4)
    assert item.bar() == {"used": 50, "nominal": 100, "borrowable": 0}


def test_alone_in_the_queue_nothing_is_ahead_and_the_queue_is_not_read(team, flavor, quota, django_assert_num_queries):
    running(team, flavor, 8)
    waiting = queued(team, flavor, 2)
    queued(make_team("other-team"), flavor, 2)  # another team's queue is not this one's
    with django_assert_num_queries(2):  # the usage and the quota; no queue count
        result = feasibility.assess(waiting)
    assert result.message == "Will queue: 0 jobs ahead, 8 of 8 GPUs in use."
    with django_assert_num_queries(3):  # a new job has the waiting one ahead: the queue is read
        assert feasibility.assess(build_job(team, flavor, gpus_per_worker=1)).jobs_ahead == 1


def test_with_others_waiting_the_queue_is_read_and_priority_still_decides(team, flavor, quota):
    running(team, flavor, 8)
    earlier = queued(team, flavor, 2)
    urgent = PriorityClass.objects.create(name="urgent", value=100)
    team.max_priority_value = 100
    team.save()
    later_but_urgent = queued(team, flavor, 2, priority=urgent)
    assert feasibility.assess(later_but_urgent).jobs_ahead == 0
    assert feasibility.assess(earlier).jobs_ahead == 1
