"""On the local cluster, on a flavor that does not reserve (the default): what Kueue does when a
smaller job fits while a bigger one waits, the fact the platform's reservations rest on
(docs/eta.md, "A shorter maximum runtime").

Kueue (v0.17 to v0.19) keeps no backfill reservation and never reads a workload's maximum execution time
when it admits: in our BestEffortFIFO ClusterQueues a bigger job that does not fit is set aside,
and a smaller one behind it that fits what is free is admitted at once, however long it may
run (the bigger one is delayed by it). So without the platform's reservation a shorter maximum
runtime starts no job sooner, and the platform does not advise one: the test pins both halves.
With it, `test_reservations_live` shows the other side.
"""

import pytest

from jobs.lifecycle import State
from jobs.outlook import estimates

from ...support.cluster import OUTLIVES_THE_TEST, reaches, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def test_a_small_job_without_a_max_runtime_takes_the_gap_ahead_of_a_bigger_waiting_one(live, world, watcher,
                                                                                       submit):
    team, h100, _ = world
    holder = submit(live, team, h100, workers=1, gpus_per_worker=6, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    reaches(holder, State.RUNNING)
    bigger = submit(live, team, h100, workers=1, gpus_per_worker=4, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    wait_until(lambda: (bigger.refresh_from_db(), bigger.state == State.QUEUED)[1], timeout=60,
               message="the 4-GPU job to queue behind the running one")
    # The bigger job is not told that a shorter maximum runtime would help: it would not.
    bigger_estimate = estimates.estimate(bigger)
    assert bigger_estimate.eta.known and bigger_estimate.eta.p50 > 0, bigger_estimate.sentence
    assert all(advice.change in ("fewer_gpus", "other_flavor") for advice in bigger_estimate.sooner)
    # A smaller job with the longest runtime there is (none at all), submitted after it: 2 GPUs
    # are free, and Kueue admits it now, ahead of the bigger one, which keeps waiting.
    small = submit(live, team, h100, workers=1, gpus_per_worker=2, max_runtime_seconds=None, env=OUTLIVES_THE_TEST)
    small.refresh_from_db()
    assert small.max_runtime_seconds is None
    reaches(small, State.RUNNING, timeout=120)
    bigger.refresh_from_db()
    assert bigger.state == State.QUEUED, bigger.message
