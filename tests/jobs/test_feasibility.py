"""Feasibility before submit, and a waiting job's place in its queue: the rules the submit page,
the job page and the API show. The queues are BestEffortFIFO, as Kueue's ClusterQueues are: a
job that does not fit blocks no one behind it, and a job that can never start is nobody's
"ahead"."""

import pytest

from jobs.lifecycle import State
from jobs.models import Job
from jobs.outlook import feasibility
from jobs.outlook.feasibility import Feasibility
from quotas.models import Cohort, PriorityClass
from tenants.models import Team
from workloads import EXCEEDS_QUOTA

from ..builders import build_job, make_flavor, make_job, make_quota, make_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


def _in_state(job, *states, reason=None, message=""):
    for state in states:
        job.transition(state, reason=reason or state.label, message=message)
    return job


def running(team, flavor, gpus, **fields):
    return _in_state(make_job(team, flavor, gpus_per_worker=gpus, **fields),
                     State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING)


def queued(team, flavor, gpus=1, **fields):
    return _in_state(make_job(team, flavor, gpus_per_worker=gpus, **fields), State.SUBMITTED, State.QUEUED)


def never_starting(team, flavor, workers, gpus, **fields):
    """A waiting job the scheduler said can never start (Kueue: more than the maximum capacity)."""
    job = make_job(team, flavor, workers=workers, gpus_per_worker=gpus, **fields)
    job.transition(State.SUBMITTED)
    return _in_state(job, State.QUEUED, reason=EXCEEDS_QUOTA,
                     message=f"Can never start: this job needs {workers * gpus} h100 GPUs but team vision "
                             "can use at most 24, borrowing included.")


# --- the verdict -------------------------------------------------------------------------------
def test_a_job_that_fits_the_free_quota_starts_now(team, flavor, quota):
    result = feasibility.assess(build_job(team, flavor, workers=2, gpus_per_worker=4))
    assert result.verdict == Feasibility.NOW
    assert result.message == "Starts now: 8 GPUs fit in the free quota (0 of 8 GPUs in use)."


def test_a_job_that_fits_what_is_free_starts_now_past_bigger_jobs_waiting_ahead(team, flavor, quota):
    running(team, flavor, 6)
    queued(team, flavor, 4)  # neither fits the 2 free GPUs: set aside, they block no one
    queued(team, flavor, 4)
    result = feasibility.assess(build_job(team, flavor, gpus_per_worker=1))
    assert result.verdict == Feasibility.NOW
    assert result.message == "Starts now: 1 GPUs fit in the free quota (6 of 8 GPUs in use)."


def test_a_job_that_does_not_fit_queues_and_says_how_many_may_start_before_it(team, flavor, quota):
    running(team, flavor, 6)
    queued(team, flavor, 4)
    queued(team, flavor, 4)
    result = feasibility.assess(build_job(team, flavor, gpus_per_worker=3))
    assert result.verdict == Feasibility.QUEUE
    assert result.message == "Will queue: 2 jobs ahead, 6 of 8 GPUs in use."
    assert (result.jobs_ahead, result.in_use, result.capacity) == (2, 6, 8)


def test_jobs_ahead_that_fit_take_the_free_gpus_first(team, flavor, quota):
    running(team, flavor, 4)
    queued(team, flavor, 3)  # fits the 4 free GPUs: the scheduler gives them to it first
    assert feasibility.assess(build_job(team, flavor, gpus_per_worker=1)).verdict == Feasibility.NOW
    result = feasibility.assess(build_job(team, flavor, gpus_per_worker=2))
    assert (result.verdict, result.jobs_ahead) == (Feasibility.QUEUE, 1)


def test_a_job_that_can_never_start_is_not_ahead_and_the_next_one_starts_now(team, flavor):
    """The reported case: a 1-GPU job was told "Will queue: 1 job ahead" behind a 32-GPU job
    of a team that can use at most 24, and ran 3 s later."""
    make_quota(team, flavor, nominal_gpus=24)
    running(team, flavor, 8)
    big = never_starting(team, flavor, 4, 8)
    result = feasibility.assess(build_job(team, flavor, gpus_per_worker=1))
    assert (result.verdict, result.jobs_ahead) == (Feasibility.NOW, 0)
    assert result.message == "Starts now: 1 GPUs fit in the free quota (8 of 24 GPUs in use)."
    assert feasibility.queue_position(big) is None


def test_a_job_bigger_than_the_ceiling_is_not_ahead_before_the_scheduler_says_so(team, flavor, quota):
    running(team, flavor, 8)
    queued(team, flavor, 8, workers=2)  # 16 > 8: never, by the quota, even while the reason is not in yet
    later = queued(team, flavor, 2)
    assert feasibility.queue_position(later) == 0
    assert feasibility.assess(build_job(team, flavor, gpus_per_worker=2)).jobs_ahead == 1


def test_a_too_big_job_queues_even_with_nobody_ahead(team, flavor, quota):
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


def test_an_inference_server_needs_its_minimum_replicas_to_start_not_its_maximum(team, flavor, quota):
    server = build_job(team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=6,
                       gpus_per_worker=2)
    result = feasibility.assess(server)
    assert result.verdict == Feasibility.NOW
    assert result.message == "Starts now: 2 GPUs fit in the free quota (0 of 8 GPUs in use)."


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
    assert (result.verdict, result.jobs_ahead) == (Feasibility.QUEUE, 0)


# --- the place in the queue --------------------------------------------------------------------
def test_queue_position_counts_earlier_waiting_jobs_only(team, flavor, quota):
    first, second = queued(team, flavor), queued(team, flavor)
    third = queued(team, flavor)
    assert [feasibility.queue_position(j) for j in (first, second, third)] == [0, 1, 2]
    assert feasibility.queue_position(running(team, flavor, 1)) is None


def test_a_job_that_can_never_start_has_no_place_and_is_not_next_in_line(team, flavor):
    make_quota(team, flavor, nominal_gpus=24)
    big = never_starting(team, flavor, 4, 8)
    small = queued(team, flavor, 1)
    assert (big.queue_position(), small.queue_position()) == (None, 0)
    assert (big.get_state_display(), small.get_state_display()) == ("Cannot start", "Queued")


def test_a_worker_bigger_than_a_node_cannot_start_whatever_the_cluster_said(team):
    small = make_flavor("t4", gpus_per_node=4)
    make_quota(team, small, nominal_gpus=16)
    job = queued(team, small, 4)
    Job.objects.filter(pk=job.pk).update(gpus_per_worker=8)  # bounds are checked on submit; rows can lag
    job.refresh_from_db()
    assert (job.never_starts, job.queue_position(), job.get_state_display()) == (True, None, "Cannot start")


def test_a_job_that_starts_again_says_its_state_again(team, flavor):
    make_quota(team, flavor, nominal_gpus=24)
    big = never_starting(team, flavor, 4, 8)
    big.transition(State.ADMITTED, reason="Admitted")  # a grant raised the ceiling
    assert (big.never_starts, big.get_state_display()) == (False, "Admitted")


def test_another_teams_queue_is_not_this_ones(team, flavor, quota):
    other = make_team("other-team")
    make_quota(other, flavor)
    queued(other, flavor)
    assert feasibility.queue_position(queued(team, flavor)) == 0


# --- what it costs -----------------------------------------------------------------------------
def test_alone_in_the_queue_nothing_is_ahead_and_the_queue_is_not_read(team, flavor, quota, django_assert_num_queries):
    running(team, flavor, 8)
    waiting = queued(team, flavor, 2)
    queued(make_team("other-team"), flavor, 2)  # another team's queue is not this one's
    with django_assert_num_queries(3):  # the usage, the quota, the flavor's drain (docs/drain.md); no queue count
        result = feasibility.assess(waiting)
    assert result.message == "Will queue: 0 jobs ahead, 8 of 8 GPUs in use."
    with django_assert_num_queries(4):  # a new job has the waiting one ahead: the queue is read
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
