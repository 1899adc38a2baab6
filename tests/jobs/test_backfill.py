"""The reservation for a team's first waiting job and who may start before it (`jobs.queue.backfill`,
pure): the time it surely fits, the spare GPUs beside it, and each waiting job's decision."""

import pytest

from jobs.queue.backfill import Candidate, Decision, Reservation, reserve, walk

HOUR = 3600.0


def test_the_head_surely_fits_when_enough_of_its_blockers_reach_their_maximum_runtime():
    # 8 GPUs, 2 free; jobs of 2 and 4 GPUs surely end in 1 h and 3 h: the 6-GPU head fits at 3 h
    assert reserve(6, 8, 2, [(HOUR, 2), (3 * HOUR, 4)]) == Reservation(3 * HOUR, 2, 6)
    # two that end at the same moment both free their GPUs then
    assert reserve(4, 8, 0, [(HOUR, 2), (HOUR, 2), (2 * HOUR, 4)]) == Reservation(HOUR, 0, 4)


def test_nothing_is_sure_without_the_maximum_runtime_of_a_blocker_it_needs():
    assert reserve(6, 8, 2, [(HOUR, 2), (None, 4)]) is None
    # one without a limit that the head does not need changes nothing
    assert reserve(4, 8, 2, [(HOUR, 2), (None, 4)]) == Reservation(HOUR, 0, 4)


def test_a_head_bigger_than_the_capacity_gets_no_reservation():
    assert reserve(10, 8, 8, []) is None


@pytest.mark.parametrize(("gpus", "max_runtime", "starts"), [
    (2, 0.5 * HOUR, True),  # ends before the head needs the GPUs
    (2, HOUR, True),  # exactly then
    (2, 2 * HOUR, False),  # would still hold them
    (2, None, False),  # could run for ever
    (1, None, True),  # fits in the spare GPU the head leaves
])
def test_a_later_job_starts_before_the_head_only_if_it_cannot_delay_it(gpus, max_runtime, starts):
    # 8 GPUs, 2 free; 3 held till 1 h, 3 by a job with no limit: the 4-GPU head surely fits at
    # 1 h, with 1 GPU spare beside it
    plan = walk(8, 2, [(HOUR, 3), (None, 3)], [Candidate(4, on_cluster=True), Candidate(gpus, max_runtime)])
    assert plan.head == 0 and (plan.reservation.at, plan.reservation.need) == (HOUR, 4)
    assert plan.decisions[0] is Decision.WAIT
    assert plan.decisions[1] is (Decision.START if starts else Decision.HOLD)


def test_a_job_that_runs_past_the_reservation_takes_from_the_spare():
    # 4 GPUs spare at 1 h beside the 8-GPU head: a 3-GPU job with no limit takes 3 of them, so
    # the next 2-GPU one may not start, though 4 GPUs are still free now
    plan = walk(12, 7, [(HOUR, 5)], [Candidate(8, on_cluster=True), Candidate(3), Candidate(2)])
    assert plan.reservation == Reservation(HOUR, 1, 8)  # what is left spare once it started
    assert plan.decisions == [Decision.WAIT, Decision.START, Decision.HOLD]


def test_a_job_on_the_cluster_starts_whenever_it_fits_and_the_head_goes_to_the_cluster():
    # Kueue admits what it holds whenever it fits: the platform can only keep back the jobs it
    # has not let go yet; the head itself is let go so that Kueue admits it first
    plan = walk(8, 2, [(HOUR, 2), (None, 4)],
                [Candidate(4), Candidate(2, 3 * HOUR, on_cluster=True), Candidate(2, 3 * HOUR)])
    # the job Kueue holds takes 2 of the head's GPUs (it is late by it): the next may not
    assert plan.head == 0 and plan.reservation == Reservation(HOUR, -2, 4)
    assert plan.decisions == [Decision.WAIT, Decision.START, Decision.HOLD]


def test_with_no_reservation_every_job_waits_on_the_cluster_as_before():
    plan = walk(8, 2, [(None, 6)], [Candidate(4), Candidate(6), Candidate(2, None)])
    assert plan.reservation is None
    assert plan.decisions == [Decision.WAIT, Decision.WAIT, Decision.START]


def test_jobs_ahead_of_the_head_that_start_count_among_its_blockers():
    # the 2-GPU job starts first (no limit): the 8-GPU head then can never be sure of its GPUs
    plan = walk(8, 4, [(HOUR, 4)], [Candidate(2), Candidate(8), Candidate(2, 10 * HOUR)])
    assert plan.decisions[0] is Decision.START and plan.reservation is None
    assert plan.decisions[2] is Decision.START  # nothing reserved: BestEffortFIFO
