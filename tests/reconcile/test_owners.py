"""The registry of reconciled owners (gpuplatform/owners.py): one list, and everything that
goes over every owner reads it, so a new owner is one declaration (and one line in the list)."""

import pytest
import yaml
from django.core.management import call_command

from cluster.cache import WatchCache
from core.owners import Owner, Scope, install, labelled_kinds, registered
from core.ownership import owned
from gpuplatform import heal
from gpuplatform.owners import OWNERS, send_everything
from gpuplatform.rbac import APPLY, group, required, resource
from jobs.tasks import JOB_WORKLOADS, TEAM_VOLUMES, reconcile_jobs
from quotas.tasks import CLUSTER_OBJECTS, TEAM_QUOTAS
from tenants.models import Team
from tenants.tasks import NAMESPACE, TEAM_ITEMS, TEAM_OBJECTS, reconcile_team

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db

SECRET = ("v1", "Secret")


class Sent:
    """A stand-in for an owner's Celery task: what was sent to it."""

    name = "tests.scratch"

    def __init__(self):
        self.sent = []

    def apply_async(self, args=(), **options):
        self.sent.append(args)

    def delay(self, *args):
        self.sent.append(args)


def scratch_secret(team: Team) -> list[dict]:
    return [owned({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": "scratch", "namespace": team.namespace_name}, "data": {}},
                  team=team.slug)]


@pytest.fixture
def scratch():
    """A sixth owner, declared here and nowhere else: a scratch Secret in every team's namespace."""
    owner = Owner(name="team scratch", scope=Scope.TEAM, kinds=(SECRET,), render=scratch_secret,
                  record=lambda cluster, team, outcome: None, task=Sent(), **TEAM_ITEMS)
    previous = install([*OWNERS, owner])
    yield owner
    install(previous)


@pytest.fixture
def no_broker(monkeypatch):
    """The platform's own tasks keep what they are sent instead of reaching a broker."""
    sent = []
    for task in {*(owner.task for owner in OWNERS), reconcile_jobs}:
        monkeypatch.setattr(task, "apply_async", lambda args=(), _t=task, **o: sent.append((_t.name, args)))
        monkeypatch.setattr(task, "delay", lambda *args, _t=task: sent.append((_t.name, args)))
    return sent


def test_the_one_list_names_every_owner_and_is_what_everything_reads():
    assert OWNERS == [CLUSTER_OBJECTS, TEAM_OBJECTS, TEAM_QUOTAS, TEAM_VOLUMES, JOB_WORKLOADS]
    assert registered() == OWNERS  # installed when Django started (gpuplatform.apps)
    order = [list(Scope).index(owner.scope) for owner in OWNERS]
    assert order == sorted(order)  # wider scopes first: a team's namespace before its jobs


def test_the_cluster_role_covers_every_owners_kinds_for_apply_and_the_watch_cache():
    needs = required()
    for owner in registered():
        for api_version, kind in (*owner.kinds, *owner.also_applies):
            granted = needs[(group(api_version), resource(kind))]
            assert APPLY | set(WatchCache.VERBS) <= granted, (owner.name, kind, granted)


def test_every_kind_the_watch_cache_started_during_a_reconcile_is_granted_list_and_watch(fake, team, flavor, capsys):
    """What the code actually asks for, not what a list says: reconcile everything with a
    watch cache, offboard, prune orphans, and check every kind the cache started."""
    from gpuplatform.owners import prune_orphans

    fake.cache = WatchCache(fake, threaded=False)
    make_quota(team, flavor)
    make_job(team, flavor).submit()
    call_command("reconcile", "--all", "--parallel", "1")
    prune_orphans(fake)
    Team.objects.filter(pk=team.pk).update(status=Team.Status.DELETING)
    reconcile_team(team.pk)
    started = fake.cache.states()
    assert set(started) >= {k for o in registered() for k in (*o.kinds, *o.also_applies)}
    needs = required()
    for api_version, kind in started:
        assert {"list", "watch"} <= needs[(group(api_version), resource(kind))], kind


def test_a_new_owner_is_granted_by_the_cluster_role(scratch):
    assert APPLY | {"watch"} <= required()[("", "secrets")]


def test_a_new_owner_is_sent_by_the_sweep_for_every_item_of_its_scope(scratch, team, no_broker):
    counts = send_everything(expires=60)
    assert scratch.task.sent == [(pk,) for pk in Team.objects.values_list("pk", flat=True)]
    assert counts[Scope.TEAM] == Team.objects.count()


def test_a_new_owner_is_healed_when_its_objects_change_behind_our_back(scratch, team, no_broker):
    heal.reconcile_owner(heal.owner_of(scratch_secret(team)[0]["metadata"]["labels"]))
    assert scratch.task.sent == [(team.pk,)]
    assert sorted(name.rsplit(".", 1)[-1] for name, _ in no_broker) == ["reconcile_team", "reconcile_team_quotas", "reconcile_team_volumes"]


def test_a_new_owner_is_rendered_by_the_render_command(scratch, team, capsys):
    call_command("render", "team", team.slug)
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed[-1] == scratch_secret(team)[0]
    assert {o["kind"] for o in printed} >= {"Namespace", "ResourceQuota", "Secret"}


def test_a_new_owner_is_reconciled_by_the_reconcile_command_and_removed_by_offboarding(scratch, fake, team, flavor,
                                                                                     capsys):
    make_quota(team, flavor)
    call_command("reconcile", "--team", team.slug, "--parallel", "1")
    assert "created   Secret team-vision/scratch" in capsys.readouterr().out
    assert [o["metadata"]["name"] for o in fake.stored(kind="Secret")] == ["scratch"]
    Team.objects.filter(pk=team.pk).update(status=Team.Status.DELETING)
    reconcile_team(team.pk)
    assert fake.stored() == []


def test_offboarding_reaches_every_kind_a_teams_label_can_be_on_namespace_last():
    kinds = labelled_kinds(registered(), Scope.TEAM)
    for owner in registered():
        if owner.scope is not Scope.CLUSTER:
            assert set(owner.kinds) <= set(kinds), owner.name
    assert not set(CLUSTER_OBJECTS.kinds) & set(kinds)
    assert kinds[-1] == NAMESPACE and kinds.count(NAMESPACE) == 1


@pytest.mark.parametrize("labels, scope, label", [
    ({"gpuplatform.io/team": "vision", "gpuplatform.io/job": "12"}, Scope.JOB, "12"),
    ({"gpuplatform.io/team": "vision"}, Scope.TEAM, "vision"),
    ({"gpuplatform.io/team": "vision", "gpuplatform.io/job": "not-a-number"}, Scope.TEAM, "vision"),
    ({"app.kubernetes.io/managed-by": "gpuplatform"}, Scope.CLUSTER, ""),
])
def test_an_objects_labels_name_the_narrowest_scope_that_owns_it(labels, scope, label):
    assert Scope.of(labels) == (scope, label)
