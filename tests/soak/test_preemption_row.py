"""The soak's row "preemptions charged to the preemptor" (bench/soak/checks.py) without a
cluster: N of N when every Kueue eviction has its `jobs.Preemption` with a preemptor, BROKEN
when one is missing or charged to no team."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from bench.soak import checks
from bench.soak.timeline import Account
from jobs.models import Preemption

from ..builders import make_flavor, make_job, make_team

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
    row = checks.preemptions_charged({victim.pk, other.pk}, accounts)
    assert (row.result, row.ok) == (f"1 of 2 (not: #{other.pk})", False)
    Preemption.objects.filter(job=other).update(by_job=by, by_team=b)
    row = checks.preemptions_charged({victim.pk, other.pk}, accounts)
    assert (row.check, row.result, row.ok) == ("preemptions charged to the preemptor", "2 of 2", True)
