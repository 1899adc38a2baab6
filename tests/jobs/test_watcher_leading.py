"""The heal (`gpuplatform.heal`) runs once for the platform: in the status watcher that leads
(`jobs.watch.watcher.leading`, sent by `manage.py watch_cluster`), not in every worker process."""

import threading

import pytest
from celery.signals import worker_process_init
from django.core.management import call_command

from cluster.cache import WatchCache
from gpuplatform import heal
from jobs.management.commands import watch_cluster
from jobs.watch.watcher import StatusWatcher, leading
from tenants.tasks import sync_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch):
    """The owners the heal enqueues a reconcile of, with an event set at each."""
    owners, heard = [], threading.Event()

    def apply_async(args=(), **options):
        owners.append(args[0])
        heard.set()

    monkeypatch.setattr(heal.reconcile_owner, "apply_async", apply_async)
    heal._recent.clear()
    return owners, heard


@pytest.fixture
def heard_leading():
    watchers = []

    def listen(watcher, **_):
        watchers.append(watcher)

    leading.connect(listen, sender=StatusWatcher, dispatch_uid="test-leading")
    yield watchers
    leading.disconnect(sender=StatusWatcher, dispatch_uid="test-leading")


def test_a_worker_process_no_longer_hooks_the_heal_onto_its_watch_cache(fake, monkeypatch):
    fake.cache = WatchCache(fake, threaded=False)
    # however heal might reach the worker's cluster, it does not
    monkeypatch.setattr(heal, "get_cluster", lambda: fake, raising=False)
    monkeypatch.setattr(heal, "cluster_configured", lambda: True, raising=False)
    worker_process_init.send(sender=None)  # each forked worker process, as it starts
    assert fake.cache.on_change is None


def test_the_watch_command_tells_that_it_leads_once_it_watches(fake, heard_leading, monkeypatch):
    monkeypatch.setattr(StatusWatcher, "run", lambda self: None)
    call_command("watch_cluster", leader_elect=False, metrics_port=0)
    [watcher] = heard_leading
    assert watcher.cluster is fake


def test_the_watcher_that_gets_the_lease_tells_that_it_leads(fake, heard_leading, monkeypatch):
    monkeypatch.setattr(StatusWatcher, "run", lambda self: None)
    monkeypatch.setattr(watch_cluster.LeaderElector, "acquire", lambda self, stop: True)
    monkeypatch.setattr(watch_cluster.LeaderElector, "keep_renewing", lambda self, stop, on_lost: None)
    monkeypatch.setattr(watch_cluster.LeaderElector, "release", lambda self: None)
    call_command("watch_cluster", leader_elect=True, metrics_port=0)
    assert len(heard_leading) == 1


def test_a_standby_that_never_gets_the_lease_does_not_heal(fake, heard_leading, monkeypatch):
    monkeypatch.setattr(StatusWatcher, "run", lambda self: None)
    monkeypatch.setattr(watch_cluster.LeaderElector, "acquire", lambda self, stop: False)
    call_command("watch_cluster", leader_elect=True, metrics_port=0)
    assert heard_leading == []


def test_the_leader_heals_an_object_deleted_behind_our_back_and_stops_with_its_watcher(fake, team, enqueued):
    owners, heard = enqueued
    sync_team(fake, team)
    watcher = StatusWatcher(fake, resync_seconds=3600, retry_seconds=0.05)
    [(_, cache)] = [(r, result) for r, result in leading.send_robust(sender=StatusWatcher, watcher=watcher)
                    if r is heal.start]
    assert cache.on_change is heal.on_cluster_change
    assert set(cache.states()) == set(heal.healed_kinds())  # started at once, asked by no reconcile
    account = ("v1", "ServiceAccount")
    assert cache._kinds[("", "ServiceAccount")].synced.wait(10)
    [stored] = [o for o in fake.stored(*account) if o["metadata"]["namespace"] == team.namespace_name]
    fake.delete(*account, stored["metadata"]["name"], team.namespace_name)  # not through the leader's cache
    assert heard.wait(10)
    assert owners == [f"team:{team.slug}"]
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    watcher.stop()
    thread.join(10)
    assert not any(i.thread.is_alive() for i in cache._kinds.values() if i.thread is not None)
