"""The fair-share sentence follows Kueue's own numbers when a quota manager changes a weight
(issue 33, item 5), on the local cluster, whose Kueue runs with fair sharing on
(deploy/local-cluster/config/kueue-config.yaml).

Two teams of one cohort each borrow one GPU beyond their quota of two (a third team lends four
it does not use). With equal weights Kueue gives both the same weighted share; once one team's
weight is 2 its share halves, and the sentence says its jobs go first.
"""

import uuid

import pytest

from quotas.fairshare import fair_shares
from quotas.models import Cohort, Quota
from quotas.tasks import sync_team_quotas
from tenants.models import Team
from workloads import queue_name
from workloads.kueue import API

from ...builders import make_flavor, make_quota
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

LONG_RUN = {"GPUPLATFORM_FAKE_DURATION": "600s"}  # read by the local cluster's fake kubelet (kwok)


@pytest.fixture
def cohort_of_three(live):
    tag = uuid.uuid4().hex[:6]
    cohort = Cohort.objects.create(name=f"fs-{tag}")
    h100 = make_flavor(f"h100-fs-{tag}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION)
    teams = [Team.objects.create(slug=f"fs{name}-{tag}", display_name=name) for name in ("a", "b", "lend")]
    for team in teams:
        nominal = 4 if team.slug.startswith("fslend") else 2
        make_quota(team, h100, cohort=cohort, nominal_gpus=nominal, cpu_cores=64, memory_gib=512)
    with on_the_cluster(live, teams, [h100], cohort=cohort):
        yield teams, h100


def weighted_share(live, team, flavor) -> int | None:
    queue = live.get(API, "ClusterQueue", queue_name(team.namespace_name, flavor))
    fair = (queue.get("status") or {}).get("fairSharing")
    return None if fair is None else fair.get("weightedShare")


def test_the_fair_share_sentence_changes_when_a_weight_changes(live, cohort_of_three):
    (a, b, lender), h100 = cohort_of_three
    # Kueue writes a new ClusterQueue's status a moment after it exists; none at all means it
    # runs without fair sharing (cluster.sh up restarts it when kueue-config.yaml changed)
    wait_until(lambda: weighted_share(live, a, h100) is not None, timeout=60,
               message="Kueue's fair-sharing status on the ClusterQueue (is fair sharing on?)")
    # each team holds 3 GPUs: 1 beyond its quota of 2
    for team in (a, b):
        for gpus in (2, 1):
            submit(live, team, h100, workers=1, gpus_per_worker=gpus, env=LONG_RUN)
    wait_until(lambda: weighted_share(live, a, h100) and weighted_share(live, a, h100) == weighted_share(live, b, h100),
               timeout=120, message="both teams borrowing with equal weighted shares")
    equal = weighted_share(live, a, h100)
    (before,), problem = fair_shares([a], cluster=live)
    assert problem == ""
    assert f"Kueue's weighted share {equal}" in before.text
    assert f"the same as team {b.slug}'s {equal} (weight 1)" in before.text
    assert f"before team {b.slug}'s" not in before.text  # the lender (share 0) goes first, a and b tie

    # a quota manager gives team a weight 2 (what the admin's save reconciles)
    Quota.objects.filter(team=a, flavor=h100).update(weight=2)
    sync_team_quotas(live, a)
    wait_until(lambda: weighted_share(live, a, h100) < equal, timeout=120, message="team a's weighted share to drop")
    halved = weighted_share(live, a, h100)
    assert abs(halved - equal / 2) <= 1  # Kueue rounds up
    (after,), _ = fair_shares([a], cluster=live)
    assert after.text != before.text
    assert after.text.startswith(f"Team {a.slug} has weight 2 and borrows 1 GPU of {h100.name} beyond its quota of 2")
    assert f"% less than team {b.slug}'s {equal} (weight 1)" in after.text
    assert f"its jobs go after team {lender.slug}'s and before team {b.slug}'s" in after.text
