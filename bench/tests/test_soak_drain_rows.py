"""The soak's drain rows (bench/soak/checks.py) without a cluster: a job evicted after the
pool's queues were held is "killed by a drain" (BROKEN); one evicted before the hold reached
the cluster, or cancelled, is not; an admission while held breaks the next row."""

from bench.soak import checks
from bench.soak.timeline import Account

START, DEADLINE, REOPEN = 100.0, 130.0, 160.0
HELD = 110.0


def account(job, edges, preemptions=(), verdict="live", finished=None):
    return Account(job=job, label="kueue-training", edges=list(edges), preemptions=list(preemptions),
                   verdict=verdict, finished=finished)


def rows(accounts, cancels=None, held=HELD):
    return {row.check: row for row in checks.drain_rows(set(accounts), accounts, (START, DEADLINE, REOPEN),
                                                        cancels or {}, held)}


def test_running_jobs_that_run_through_the_drain_make_it_zero_killed():
    found = rows({1: account(1, [(50, True)]), 2: account(2, [(60, True), (120, False)], verdict="succeeded",
                                                            finished=120)})
    assert (found["jobs killed by a drain"].ok, found["jobs killed by a drain"].result.split(" (")[0]) == (
        True, "0 of 2 on the pool when its queues held")
    assert found["jobs admitted to a drained pool before it reopened"].ok


def test_an_eviction_while_held_is_a_kill_and_one_before_the_hold_or_a_cancel_is_not():
    evicted = account(1, [(50, True), (120, False)], preemptions=[120])
    before = account(2, [(50, True), (105, False)], preemptions=[105])  # an admission before the hold
    cancelled = account(3, [(50, True), (125, False)], verdict="failed", finished=125)
    found = rows({1: evicted, 2: before, 3: cancelled}, cancels={3: 124})
    killed = found["jobs killed by a drain"]
    assert killed.ok is False and killed.result.startswith("1 of 2") and "#1" in killed.result


def test_an_admission_while_held_breaks_the_row_and_one_after_reopening_is_counted():
    found = rows({1: account(1, [(120, True)]), 2: account(2, [(170, True)]), 3: account(3, [(50, True)])})
    assert found["jobs admitted to a drained pool before it reopened"].ok is False
    assert found["jobs admitted after the pool reopened"].result == "1"


def test_an_admission_stamped_in_the_second_the_pool_reopened_is_after_it():
    # The pool reopened at 160: an admission stamped 160 came after it, one stamped 159 before.
    found = rows({1: account(1, [(160.0, True)]), 2: account(2, [(159.0, True)])}, held=HELD)
    inside = found["jobs admitted to a drained pool before it reopened"]
    assert (inside.ok, inside.result) == (False, "1 (#2)")
    assert found["jobs admitted after the pool reopened"].result == "1"


def test_queues_never_seen_held_break_the_row():
    assert checks.drain_rows({1}, {1: account(1, [(50, True)])}, (START, DEADLINE, REOPEN), {}, None)[0].ok is False
    assert checks.held_from({"team-a-h100": [(0, "None"), (112, "Hold")], "team-b-h100": [(1, "None"), (114, "Hold")],
                             "team-a-a100": [(0, "None")]}, "-h100", START) == 114
