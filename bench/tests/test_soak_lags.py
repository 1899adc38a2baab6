"""The soak's status-lag row (bench/soak/checks.lags) compares a step the platform wrote with the
cluster's time of the same step of the same run."""

from bench.soak import checks
from bench.soak.timeline import Account


def job(**recorded) -> dict:
    return {"state": "running", "recorded": recorded}


def test_a_running_written_late_is_its_lag():
    found = checks.lags({7: job(admitted=[902.0], running=[911.5])},
                        {7: Account(job=7, label="kueue-training", admitted=901.0, running=908.0)})
    assert found["admitted"] == [1.0] and found["running"] == [3.5]


def test_a_run_preempted_before_its_running_was_written_lends_no_lag_to_the_next_run():
    # Running at 908, preempted at 909, admitted again: the running written at 938.7 is the
    # second run's; 30.7 s would be no lag of the first.
    account = Account(job=7, label="kueue-training", admitted=901.0, running=908.0, preemptions=[909.0])
    found = checks.lags({7: job(admitted=[907.0], running=[938.7], preempted=[910.1])}, {7: account})
    assert "running" not in found
    assert found["admitted"] == [6.0] and [round(v, 1) for v in found["preempted"]] == [1.1]
