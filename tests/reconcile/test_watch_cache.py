"""The reconciler's watch cache on the in-memory cluster: a warm no-op resync costs no
request, and a cache that is behind the cluster (edits, creates and deletes made behind its
back, which `threaded=False` leaves unseen until `catch_up()`) never prunes a live object,
never applies blind over a controller's fields, and never loses a needed write. The same
is proven on the local cluster in tests/live/cluster/test_watch_cache_live.py."""

import pytest

from core.ownership import selector, team_selector
from gpuplatform.heal import owner_of
from jobs.manifests import object_name
from jobs.tasks import reconcile_job
from quotas.tasks import sync_team_quotas
from tenants.manifests import TEAM_KINDS
from tenants.tasks import sync_team

from ..builders import make_job, make_quota, make_team

pytestmark = pytest.mark.django_db


def onboard(cluster, team):
    return (sync_team(cluster, team) + sync_team_quotas(cluster, team)).writes


def network_policy(fake, team) -> dict:
    return next(o for o in fake.stored("networking.k8s.io/v1", "NetworkPolicy")
                if o["metadata"]["namespace"] == team.namespace_name)


def test_a_warm_no_op_resync_of_many_teams_costs_no_request(cached, flavor):
    teams = [make_team(f"t{n}") for n in range(5)]
    for team in teams:
        make_quota(team, flavor)
        onboard(cached, team)
    kinds_listed = cached.requests["LIST"]
    assert kinds_listed <= 12  # one LIST per kind for all five teams, not per team

    cached.reset_counts()
    assert sum(onboard(cached, team) for team in teams) == 0
    assert dict(cached.requests) == {}


def test_the_first_fill_lists_each_kind_once_for_all_teams(cached, flavor):
    for n in range(3):
        make_quota(make_team(f"t{n}"), flavor)
    for team in [make_team("a"), make_team("b"), make_team("c")]:
        onboard(cached, team)
    assert cached.requests["LIST"] == len({*TEAM_KINDS, ("v1", "Namespace")} | set(_quota_kinds()))
    assert cached.requests["GET"] == 0


def _quota_kinds():
    from quotas.manifests import QUOTA_KINDS

    return QUOTA_KINDS


def test_a_selector_outside_our_label_is_listed_not_read_from_the_cache(cached):
    cached.reset_counts()
    cached.snapshot("somebody=else", [("v1", "ConfigMap")])
    assert cached.requests["LIST"] == 1


# --- prune: a stale cache never deletes a live object ----------------------------------------
def test_an_object_taken_over_behind_the_cache_is_not_pruned(cached, team, changes):
    onboard(cached, team)
    policy = network_policy(cached, team)
    policy["metadata"]["labels"] = {"owner": "somebody-else"}  # no longer ours
    cached.put(policy)

    deleted = cached.prune(team_selector(team.slug), [], [("networking.k8s.io/v1", "NetworkPolicy")])

    # The cache still said "ours"; the delete's precondition and a fresh read said otherwise.
    assert policy["metadata"]["name"] not in {ref.name for ref in deleted}
    assert network_policy(cached, team)["metadata"]["labels"] == {"owner": "somebody-else"}


def test_an_object_moved_to_another_team_behind_the_cache_is_not_pruned(cached, team):
    onboard(cached, team)
    policy = network_policy(cached, team)
    policy["metadata"]["labels"]["gpuplatform.io/team"] = "another"
    cached.put(policy)

    deleted = cached.prune(team_selector(team.slug), [], [("networking.k8s.io/v1", "NetworkPolicy")])

    assert policy["metadata"]["name"] not in {ref.name for ref in deleted}
    assert network_policy(cached, team)["metadata"]["labels"]["gpuplatform.io/team"] == "another"


def test_an_object_still_ours_but_changed_since_the_cache_read_is_pruned_after_a_fresh_read(cached, team):
    onboard(cached, team)
    policy = network_policy(cached, team)
    policy["metadata"].setdefault("annotations", {})["note"] = "edited"
    cached.put(policy)
    kinds = [("networking.k8s.io/v1", "NetworkPolicy")]

    cached.reset_counts()
    deleted = cached.prune(team_selector(team.slug), [], kinds)

    assert len(deleted) == 3  # all three policies, the edited one after a GET
    assert cached.requests["GET"] == 1
    assert cached.stored("networking.k8s.io/v1", "NetworkPolicy") == []


# --- apply: a miss is unknown, a conflict is re-read, a skipped write is healed --------------
def test_a_cache_miss_on_a_kind_controllers_share_is_read_before_it_is_applied(cached, team, flavor):
    make_quota(team, flavor)
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    [batch] = [o for o in cached.stored("batch/v1", "Job") if o["metadata"]["name"] == object_name(job)]
    cached.cache.forget(cached_ref(batch))  # the cache lost it (as if never seen)
    batch["spec"]["suspend"] = False  # admitted by Kueue meanwhile
    cached.put(batch)

    cached.reset_counts()
    reconcile_job(job.pk)

    assert cached.requests["GET"] >= 1
    [batch] = [o for o in cached.stored("batch/v1", "Job") if o["metadata"]["name"] == object_name(job)]
    assert batch["spec"]["suspend"] is False  # not taken back by a blind apply


def cached_ref(obj):
    from cluster import ObjectRef

    return ObjectRef.of(obj)


def test_a_conflict_from_a_stale_cache_is_read_again_and_applied_once(cached, team, flavor):
    make_quota(team, flavor)
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    [batch] = [o for o in cached.stored("batch/v1", "Job") if o["metadata"]["name"] == object_name(job)]
    del batch["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]  # a hand edit the cache has not seen...
    cached.put(batch)
    cached.cache.catch_up()
    batch["spec"]["suspend"] = False  # ...then Kueue admits it, also unseen
    cached.put(batch)

    reconcile_job(job.pk)

    [batch] = [o for o in cached.stored("batch/v1", "Job") if o["metadata"]["name"] == object_name(job)]
    assert "kueue.x-k8s.io/queue-name" in batch["metadata"]["labels"]
    assert batch["spec"]["suspend"] is False


def test_an_object_deleted_behind_the_cache_is_recreated_once_the_watch_tells(cached, team, changes):
    onboard(cached, team)
    policy = network_policy(cached, team)
    cached.remove("networking.k8s.io/v1", "NetworkPolicy", policy["metadata"]["name"], team.namespace_name)

    cached.cache.catch_up()

    [(event, obj)] = changes
    assert event == "DELETED" and owner_of(obj["metadata"]["labels"]) == f"team:{team.slug}"
    assert onboard(cached, team) == 1  # the reconcile the change asked for writes it back


def test_an_edit_behind_the_cache_is_told_and_written_back(cached, team, changes):
    onboard(cached, team)
    policy = network_policy(cached, team)
    policy["spec"]["ingress"] = []
    cached.put(policy)

    cached.cache.catch_up()

    assert [event for event, _ in changes] == ["MODIFIED"]
    assert onboard(cached, team) == 1


def test_our_own_writes_and_controller_fields_are_not_told_as_changes(cached, team, flavor, changes):
    make_quota(team, flavor)
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    [batch] = [o for o in cached.stored("batch/v1", "Job") if o["metadata"]["name"] == object_name(job)]
    batch["spec"]["suspend"] = False  # Kueue admits: its field, not ours
    batch["status"] = {"active": 1}
    cached.put(batch)

    cached.cache.catch_up()

    assert changes == []


def test_after_410_gone_the_cache_relists_and_drops_what_vanished(cached, team, changes):
    onboard(cached, team)
    policy = network_policy(cached, team)
    cached.remove("networking.k8s.io/v1", "NetworkPolicy", policy["metadata"]["name"], team.namespace_name)
    cached.compact()

    cached.cache.catch_up()

    assert [event for event, _ in changes] == ["DELETED"]
    names = {o["metadata"]["name"] for o in cached.snapshot(selector(team=team.slug), TEAM_KINDS).items()
             if o["kind"] == "NetworkPolicy"}
    assert policy["metadata"]["name"] not in names
