"""The soak's row "preemptions charged to the preemptor" (bench/soak/checks.py) without a
cluster: N of N when every Kueue eviction has its `jobs.Preemption` with a preemptor, BROKEN
when one is missing or charged to no team."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from bench.soak import checks, timeline
from bench.soak.observer import TRAIN_JOB, WORKLOAD, ObjectInfo
from bench.soak.timeline import Account
from jobs.models import Preemption
from tests.builders import make_flavor, make_job, make_team

pytestmark = pytest.mark.django_db

EVICTED = datetime(2026, 11, 3, 14, 10, 0, tzinfo=UTC)


def test_every_eviction_charged_is_n_of_n_and_one_uncharged_breaks_it():
    flavor, a, b = make_flavor("h100"), make_team("a"), make_team("b")
    victim, other, by = make_job(a, flavor), make_job(a, flavor), make_job(b, flavor)
    accounts = {victim.pk: Account(job=victim.pk, label="kueue-training", preemptions=[EVICTED.timestamp() + 0.3]),
                other.pk: Account(job=other.pk, label="kueue-training", preemptions=[EVICTED.timestamp()])}
    Preemption.objects.create(job=victim, preempted_at=EVICTED, reason="InClusterQueue", by_job=by, by_team=b,
                              lost_gpu_hours=Decimal("1.00"))
    Preemption.objects.create(job=other, preempted_at=EVICTED, reason="InCohortReclamation")  # charged to nobody
    row = checks.preemptions_charged({victim.pk, other.pk}, accounts, {})
    assert (row.result, row.ok) == (f"1 of 2 (not: #{other.pk})", False)
    # Preempted after its owner cancelled it: its GPUs were given back already, nobody is charged.
    row = checks.preemptions_charged({victim.pk, other.pk}, accounts, {other.pk: EVICTED.timestamp() - 1})
    assert (row.result, row.ok) == ("1 of 1", True)
    # Cancelled after it: still owed.
    row = checks.preemptions_charged({victim.pk, other.pk}, accounts, {other.pk: EVICTED.timestamp() + 1})
    assert (row.result, row.ok) == (f"1 of 2 (not: #{other.pk})", False)
    Preemption.objects.filter(job=other).update(by_job=by, by_team=b)
    row = checks.preemptions_charged({victim.pk, other.pk}, accounts, {})
    assert (row.check, row.result, row.ok) == ("preemptions charged to the preemptor", "2 of 2", True)


def _workload(*readings):
    """A Workload as the observer keeps it: each reading its conditions (type -> status, reason, time)."""
    info = ObjectInfo(kind=WORKLOAD, name="wl", namespace="team-a", job=7, first_seen=0.0)
    info.history = [(at, (tuple(sorted(conds.items())),)) for at, conds in readings]
    return info


ADMITTED, EVICTED_AT = 1000.0, 1000.0


@pytest.mark.parametrize("label", ["kueue-training", "kueue-rayjob"])
def test_a_workload_evicted_for_another_is_a_preemption_whatever_kueue_queues(label):
    # Kueue preempts a Ray job in the second it admitted it (a cohort reclaims what it lent),
    # and admits it again later: the cluster made that preemption, and the row that checks the
    # database's preemptions against the cluster's must see it.
    workload = _workload((1.0, {"Admitted": ("True", "Admitted", ADMITTED)}),
                         (2.0, {"Admitted": ("False", "NoReservation", EVICTED_AT),
                                "Evicted": ("True", "InCohortReclamation", EVICTED_AT)}),
                         (9.0, {"Admitted": ("True", "Admitted", 1008.0),
                                "Evicted": ("False", "QuotaReserved", 1008.0)}))
    account = Account(job=7, label=label)
    job = {"workers": 1}
    if label == "kueue-training":
        timeline.kueue_training(account, job, [workload], [], [])
    else:
        timeline.kueue_long_lived(account, job, [workload], [], per_run=2)
    assert (account.preemptions, account.evictions, account.verdict) == ([EVICTED_AT], 1, "absent")
    recorded = {7: {"events": [(datetime.fromtimestamp(EVICTED_AT, UTC), "preempted")]}}
    assert checks.phantom_preemptions(recorded, {7: account}, budget=30).ok
    assert not checks.phantom_preemptions(recorded, {7: Account(job=7, label=label)}, budget=30).ok


def test_a_workload_deactivated_past_its_max_runtime_failed_and_was_not_preempted():
    workload = _workload((1.0, {"Admitted": ("True", "Admitted", ADMITTED)}),
                         (2.0, {"Evicted": ("True", "DeactivatedDueToMaximumExecutionTimeExceeded", 1060.0)}))
    account = Account(job=7, label="kueue-rayjob")
    timeline.kueue_long_lived(account, {"workers": 1}, [workload], [], per_run=2)
    assert (account.preemptions, account.finished, account.verdict) == ([], 1060.0, "failed")


def _train_job(*readings):
    """A TrainJob as the observer keeps it: each reading its conditions and spec.suspend."""
    info = ObjectInfo(kind=TRAIN_JOB, name="tj", namespace="team-a", job=7, first_seen=0.0)
    info.history = [(at, (tuple(sorted(conds.items())), suspend)) for at, conds, suspend in readings]
    return info


def test_a_train_job_is_read_like_a_batch_job_its_end_from_its_own_conditions():
    workload = _workload((1.0, {"Admitted": ("True", "Admitted", ADMITTED)}),
                         (2.0, {"Admitted": ("False", "NoReservation", 1010.0),
                                "Evicted": ("True", "InCohortReclamation", 1010.0)}),
                         (9.0, {"Admitted": ("True", "Admitted", 1020.0), "Evicted": ("False", "QuotaReserved", 1020.0)}),
                         (40.0, {"Admitted": ("True", "Admitted", 1020.0), "Finished": ("True", "Succeeded", 1050.0)}))
    train_job = _train_job((1.0, {}, True), (2.0, {}, False),
                           (40.0, {"Complete": ("True", "JobSetCompleted", 1049.0)}, False))
    account = Account(job=7, label="kueue-trainjob")
    timeline.kueue_training(account, {"workers": 2}, [workload], [train_job], [], kind=TRAIN_JOB)
    assert (account.verdict, account.finished, account.preemptions) == ("succeeded", 1049.0, [1010.0])
    # Held its GPUs from each admission to the eviction and to its end.
    assert account.held_seconds(until=2000.0) == (10.0 + 29.0, 2)
    # A batch Job's conditions mean nothing on a TrainJob: no end read from them.
    failed = _train_job((1.0, {"FailureTarget": ("True", "BackoffLimitExceeded", 1030.0)}, False))
    other = Account(job=7, label="kueue-trainjob")
    timeline.kueue_training(other, {"workers": 2}, [], [failed], [], kind=TRAIN_JOB)
    assert other.verdict == "absent" and other.finished is None
