"""A kind the platform's identity may not list or watch (403) in the watch cache: said once,
with the kind and the verb refused, tried again rarely with a growing wait, read with a
LIST by reconciles meanwhile, and counted by the door (`forbidden`)."""

import logging

import pytest

from cluster import PermanentError
from cluster.cache import (
    FORBIDDEN_RETRY_MAX_SECONDS,
    FORBIDDEN_RETRY_SECONDS,
    WatchCache,
)
from cluster.objects import Snapshot
from core.ownership import team_selector
from tenants.tasks import sync_team

from ..waits import CountedWaits

pytestmark = pytest.mark.django_db

NAMESPACE = ("v1", "Namespace")


def forbidden(verb: str, resource: str = "namespaces") -> PermanentError:
    """As the API server words it."""
    return PermanentError(
        f'{resource} is forbidden: User "system:serviceaccount:gp:gp-gpuplatform" cannot {verb} resource '
        f'"{resource}" in API group "" at the cluster scope', status=403, reason="Forbidden")


def refusals(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "cluster.cache" and r.levelno >= logging.WARNING]


def namespaces(cluster, team) -> list[tuple[str, str]]:
    """What a reconcile asks of the cache about the team's Namespace: the kinds it must LIST."""
    return cluster.cache.fill(Snapshot(), team_selector(team.slug), [NAMESPACE])


def test_a_kind_the_platform_may_not_watch_is_said_once_and_listed_meanwhile(cached, team, caplog):
    caplog.set_level(logging.DEBUG, logger="cluster.cache")
    cached.fail_next("WATCH", forbidden("watch"), times=3)
    assert namespaces(cached, team) == [NAMESPACE]  # not in step: the caller LISTs it
    assert cached.cache.states()[NAMESPACE] == "forbidden: watch"
    cached.cache.catch_up()
    cached.cache.catch_up()  # refused twice more: not said again
    [said] = refusals(caplog)
    assert said.levelno == logging.ERROR
    assert "may not watch Namespace (v1)" in said.getMessage() and "grant watch" in said.getMessage()
    assert cached.forbidden["WATCH"] == 3
    assert namespaces(cached, team) == [NAMESPACE]  # and so on, while the watch is refused
    sync_team(cached, team)  # a reconcile goes through meanwhile: the namespace is read, then applied
    assert [o["metadata"]["name"] for o in cached.stored(kind="Namespace")] == [team.namespace_name]


def test_a_kind_allowed_again_is_watched_and_the_refusal_is_over(cached, team, caplog):
    cached.fail_next("WATCH", forbidden("watch"))
    namespaces(cached, team)
    assert cached.cache.states()[NAMESPACE] == "forbidden: watch"
    cached.cache.catch_up()  # the next try is allowed
    assert cached.cache.states()[NAMESPACE] == "watching"
    assert any("may watch Namespace" in r.getMessage() for r in caplog.records)


def test_a_kind_the_platform_may_not_list_keeps_no_reconcile_waiting(fake, team):
    fake.cache = WatchCache(fake, threaded=False)
    fake.fail_next("LIST", forbidden("list"))
    assert namespaces(fake, team) == [NAMESPACE]
    assert fake.cache.states()[NAMESPACE] == "forbidden: list"
    assert fake.forbidden["LIST"] == 1


def test_a_forbidden_watch_is_tried_again_with_a_growing_wait_not_every_second(fake, team, caplog):
    fake.fail_next("WATCH", forbidden("watch"), times=20)
    cache = WatchCache(fake, threaded=True, sync_timeout=10)
    cache._stopping = stop = CountedWaits(limit=6)
    cache.fill(Snapshot(), team_selector(team.slug), [NAMESPACE])
    informer_thread = cache._kinds[("", "Namespace")].thread
    informer_thread.join(10)
    assert not informer_thread.is_alive()
    assert stop.waits[0] == FORBIDDEN_RETRY_SECONDS
    assert stop.waits == sorted(stop.waits) and stop.waits[-1] == FORBIDDEN_RETRY_MAX_SECONDS
    assert len(refusals(caplog)) == 1
    assert fake.forbidden["WATCH"] == len(stop.waits)
