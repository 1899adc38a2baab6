"""The start-time simulation (`jobs.queue.eta`), fed plain data: no database, no cluster."""

import pytest

from jobs.queue import eta
from jobs.queue.eta import Calibration, Eta, Queue, Runner, Waiter

HOUR = 3600.0


def queue(capacity=8, running=(), waiting=(), ceiling=None) -> Queue:
    return Queue(capacity=capacity, ceiling=capacity if ceiling is None else ceiling,
                 running=tuple(running), waiting=tuple(waiting))


@pytest.mark.parametrize("case, q, expected", [
    ("a job that fits the free GPUs starts now",
     queue(8, [Runner(4, 0, HOUR)], [Waiter(4, target=True)]), (0, 0, 0)),
    ("a job behind one running job starts when its maximum runtime ends, without history",
     queue(8, [Runner(8, 600, HOUR)], [Waiter(8, target=True)]), (3000, 3000, 3000)),
    ("history longer than the cap is capped by the maximum runtime",
     queue(8, [Runner(8, 0, HOUR, (5 * HOUR,) * 10)], [Waiter(8, target=True)]), (HOUR, HOUR, HOUR)),
    ("the job ahead runs first, then the target starts when it ends",
     queue(8, [Runner(8, 0, HOUR)], [Waiter(8, 2 * HOUR), Waiter(8, target=True)]),
     (3 * HOUR, 3 * HOUR, 3 * HOUR)),
    ("a small job passes a big one ahead that does not fit (BestEffortFIFO)",
     queue(8, [Runner(6, 0, HOUR)], [Waiter(8, HOUR), Waiter(2, target=True)]), (0, 0, 0)),
])
def test_simulation_cases(case, q, expected):
    got = eta.estimate(q)
    assert (got.p10, got.p50, got.p90) == pytest.approx(expected), case


def test_the_range_comes_from_the_history_of_similar_jobs():
    history = tuple(float(m * 60) for m in range(10, 110, 10))  # 10 .. 100 minutes
    got = eta.estimate(queue(8, [Runner(8, 0, 2 * HOUR, history)], [Waiter(8, target=True)]))
    assert 600 <= got.p10 < got.p50 < got.p90 <= 6000
    assert got.p50 == pytest.approx(3300, rel=0.25)


def test_history_shorter_than_what_ran_is_ignored_for_the_running_job():
    # It has run 50 minutes: of the past runs only the longer ones say when it ends.
    history = (600.0, 1200.0, 3600.0, 4200.0)
    got = eta.estimate(queue(8, [Runner(8, 3000, None, history)], [Waiter(8, target=True)]))
    assert 600 <= got.p10 and got.p90 <= 1200


def test_same_input_same_answer():
    q = queue(8, [Runner(4, 100, HOUR, (500.0, 4000.0)), Runner(4, 0, None, (900.0, 2000.0))],
              [Waiter(8, None, (1000.0,)), Waiter(6, target=True)])
    assert eta.estimate(q) == eta.estimate(q)


def test_unknown_when_a_job_ahead_has_no_end_to_draw():
    got = eta.estimate(queue(8, [Runner(8, 0, None)], [Waiter(8, target=True)]))
    assert not got.known and "no maximum runtime and no similar past run" in got.reason
    assert eta.sentence(got).startswith("Start time unknown: 1 job has")


def test_unknown_when_the_job_needs_more_than_the_ceiling():
    got = eta.estimate(queue(8, [], [Waiter(16, target=True)]))
    assert not got.known and "more than the team can ever use (8)" in got.reason


def test_fewer_gpus_changes_only_the_target():
    q = queue(8, [Runner(6, 0, HOUR)], [Waiter(4, HOUR), Waiter(4, target=True)])
    smaller = eta.with_target(q, gpus=2)
    assert [w.gpus for w in smaller.waiting] == [4, 2]
    assert eta.estimate(smaller).p50 == 0 < eta.estimate(q).p50


def test_calibration_stays_identity_until_enough_outcomes():
    few = [(600.0, 300.0, 900.0, 1200.0)] * (Calibration.MIN_SAMPLES - 1)
    assert Calibration.fit(few) == Calibration()


def test_calibration_learns_that_estimates_ran_short():
    pairs = [(600.0, 500.0, 700.0, 600.0 * ratio) for ratio in [1.5, 2.0, 2.5] * 10]
    calibration = Calibration.fit(pairs)
    fixed = eta.calibrate(Eta(500.0, 600.0, 700.0), calibration)
    assert fixed.p50 == pytest.approx(1200.0)
    assert fixed.p10 <= 900.0 and fixed.p90 >= 1500.0


def test_accuracy_counts_only_long_waits_and_compares_the_naive_estimate():
    outcomes = [
        (500.0, 600.0, 700.0, 600.0, 1200.0),  # exact, naive 100 % off
        (100.0, 200.0, 300.0, 400.0, 400.0),  # 50 % off, outside the range, naive exact
        (0.0, 10.0, 20.0, 30.0, None),  # a short wait: not counted
    ]
    acc = eta.accuracy(outcomes)
    assert acc.jobs == 2
    assert acc.median_rel_error == pytest.approx(0.25)
    assert acc.coverage == pytest.approx(0.5)
    assert acc.naive_median_rel_error == pytest.approx(0.5)


def test_naive_is_position_over_admission_rate():
    assert eta.naive(3, 4 / HOUR) == pytest.approx(HOUR)
    assert eta.naive(3, 0) is None


def test_sentence_in_plain_words():
    assert eta.sentence(Eta(600, 1500, 3900)) == "Starts in about 25 min (likely 10 min to 1 h 05 min)."
    assert eta.sentence(Eta(0, 0, 0)) == "Starts within a minute."


# --- what the estimate learns besides runtimes --------------------------------------------------
def test_a_running_job_ends_at_the_share_of_its_maximum_that_similar_jobs_used():
    # Similar jobs used 40-60 % of their maximum: this one, allowed 10 h, ends in 4 to 6 h,
    # though their runtimes (an hour or less) would say within the hour.
    used = (0.4, 0.45, 0.5, 0.55, 0.6)
    got = eta.estimate(queue(8, [Runner(8, 0, 10 * HOUR, (HOUR,) * 5, used)], [Waiter(8, target=True)]))
    assert 4 * HOUR <= got.p10 <= got.p50 <= got.p90 <= 6 * HOUR


def test_the_used_share_is_conditioned_on_what_the_job_has_run():
    # It has run 5 h of its 10: only the shares above a half can still be its end.
    used = (0.2, 0.3, 0.4, 0.7, 0.8)
    got = eta.estimate(queue(8, [Runner(8, 5 * HOUR, 10 * HOUR, (), used)], [Waiter(8, target=True)]))
    assert 2 * HOUR <= got.p10 and got.p90 <= 3 * HOUR


def test_too_few_used_shares_fall_back_to_runtimes():
    got = eta.estimate(queue(8, [Runner(8, 0, 10 * HOUR, (HOUR,) * 5, (0.5,) * (eta.MIN_USED - 1))],
                             [Waiter(8, target=True)]))
    assert got.p50 == pytest.approx(HOUR)


# --- a shorter maximum runtime (backfill) -------------------------------------------------------
@pytest.mark.parametrize("case, q", [
    ("two GPUs free while a bigger job ahead waits for the running one: the small target takes them now",
     queue(8, [Runner(6, 0, HOUR)], [Waiter(8, HOUR), Waiter(2, target=True)])),
    ("a target bigger than the gap waits for the running job to end, however short it would run",
     queue(8, [Runner(6, 0, HOUR)], [Waiter(8, HOUR), Waiter(4, target=True)])),
    ("behind jobs ahead with a history, the same",
     queue(8, [Runner(4, 600, 2 * HOUR, (1800.0, 3600.0, 5400.0))], [Waiter(6, HOUR, (900.0,)), Waiter(4, target=True)])),
])
def test_without_reservations_the_targets_own_max_runtime_never_changes_when_it_starts(case, q):
    # Kueue (v0.17 to v0.19) never reads a workload's maximum execution time when it admits, and keeps no
    # reservation (docs/eta.md): on a flavor that does not reserve, the simulation gives one
    # start whatever the target's limit, and no "shorter max runtime" advice can be true.
    starts = {eta.estimate(eta.with_target(q, max_runtime=limit)) for limit in (60.0, HOUR, 30 * HOUR, None)}
    assert len(starts) == 1, case


def reserving(running, waiting, capacity=8) -> Queue:
    return Queue(capacity=capacity, ceiling=capacity, running=tuple(running), waiting=tuple(waiting), reserves=True)


@pytest.mark.parametrize(("limit", "starts_now"), [(30 * 60.0, True), (HOUR, True), (2 * HOUR, False), (None, False)])
def test_where_the_flavor_reserves_a_limit_that_ends_before_the_head_needs_the_gpus_starts_now(limit, starts_now):
    # 6 of 8 GPUs held till 1 h; the 8-GPU head is reserved for from then: a 2-GPU target starts
    # now only if it surely ends by then, else after the head
    q = reserving([Runner(6, 0, HOUR)], [Waiter(8, 2 * HOUR, on_cluster=True), Waiter(2, target=True)])
    got = eta.estimate(eta.with_target(q, max_runtime=limit))
    if starts_now:
        assert (got.p10, got.p50, got.p90) == (0, 0, 0)
    else:  # after the head, which starts at 1 h and runs its 2 h
        assert got.p10 == pytest.approx(3 * HOUR)


def test_a_job_the_platform_let_go_before_the_reservation_starts_whenever_it_fits():
    # Kueue holds it already: it takes the free GPUs now, limit or not
    q = reserving([Runner(6, 0, HOUR)], [Waiter(8, 2 * HOUR, on_cluster=True), Waiter(2, target=True, on_cluster=True)])
    assert eta.estimate(q).p50 == 0


def test_a_reserved_head_is_not_passed_by_a_job_that_would_delay_it():
    # without the reservation the 2-GPU job behind takes the 2 GPUs freed at 30 min and keeps
    # them for 10 h; with it, the 6-GPU head starts at 1 h when the rest ends
    running = [Runner(2, 0, 0.5 * HOUR), Runner(4, 0, HOUR)]
    waiting = [Waiter(6, target=True, on_cluster=True), Waiter(2, 10 * HOUR)]
    assert eta.estimate(reserving(running, waiting, capacity=6)).p50 == pytest.approx(HOUR)
    assert eta.estimate(queue(6, running, waiting)).p50 == pytest.approx(10.5 * HOUR)


def test_the_estimate_runs_the_draw_it_is_given():
    # The hook `make bench-eta`'s reference estimators use (bench/eta.py, told more than the
    # platform knows): the draw replaces the shipped one, and nothing else changes.
    q = queue(8, [Runner(8, 0.0, 10 * HOUR)], [Waiter(8, target=True)])
    told = eta.estimate(q, draw=lambda rng, history, elapsed, cap, used=(): 2 * HOUR)
    assert (told.p10, told.p50, told.p90) == (2 * HOUR, 2 * HOUR, 2 * HOUR)
    assert eta.estimate(q).p50 == 10 * HOUR  # no history: the shipped draw ends it at its cap
