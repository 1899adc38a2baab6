"""Grant renewals on the local cluster (issue 34, item 3): a grant extended by an approved
renewal keeps its GPUs on the team's real ClusterQueue past its old end and loses them at
the new one. The sweep runs as the platform runs it (its reconcile tasks inline), with the
clock the platform reads set to each moment."""

from datetime import UTC, datetime, timedelta

import pytest

from quotas import actions
from quotas.grants import last_day
from quotas.models import QuotaRequest

from ...builders import make_user
from ...console.test_grant_sweep import DAY, run_sweep

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

MIDNIGHT = datetime(2026, 12, 1, tzinfo=UTC)


def nominal_gpus(live, team, flavor) -> str:
    queue = live.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"{team.namespace_name}-{flavor.name}")
    [resource] = [r for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
                  if r["name"] == "nvidia.com/gpu"]
    return str(resource["nominalQuota"])


def test_an_extended_grant_changes_the_cluster_queue_at_its_new_end_not_the_old_one(
        live, world, clock, inline_tasks, django_capture_on_commit_callbacks):
    team, h100, _ = world
    capture = django_capture_on_commit_callbacks
    owner = team.memberships.get().user
    manager = make_user(f"manager-{team.slug}", quota_manager=True)
    assert nominal_gpus(live, team, h100) == "8"

    clock(MIDNIGHT)
    with capture(execute=True):
        grant = actions.grant(team=team, flavor=h100, gpus=8, cpu_cores=64, memory_gib=512, granted_by=manager,
                              starts_at=MIDNIGHT, ends_at=MIDNIGHT + 2 * DAY, now=MIDNIGHT)
    run_sweep(clock, MIDNIGHT + timedelta(hours=1), capture)
    assert nominal_gpus(live, team, h100) == "16"

    with capture(execute=True):  # the owner asks for three more days, a manager approves as asked
        renewal = QuotaRequest.objects.renew(grant, requested_by=owner, justification="The paper runs on.",
                                             ends_on=last_day(grant.ends_at) + timedelta(days=3))
        extended = actions.approve(renewal, manager, gpus=8, borrowing_limit_gpus=None, cpu_cores=64,
                                   memory_gib=512, starts_on=renewal.starts_on, ends_on=renewal.ends_on)
    assert extended.pk == grant.pk and extended.ends_at == MIDNIGHT + 5 * DAY

    run_sweep(clock, MIDNIGHT + 2 * DAY, capture)  # the old end: nothing changes
    assert nominal_gpus(live, team, h100) == "16"
    run_sweep(clock, MIDNIGHT + 5 * DAY - timedelta(seconds=1), capture)
    assert nominal_gpus(live, team, h100) == "16"
    run_sweep(clock, MIDNIGHT + 5 * DAY, capture)  # the new end
    assert nominal_gpus(live, team, h100) == "8"
