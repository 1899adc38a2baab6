"""Draining a pool by a deadline (docs/drain.md): the window, the hold on Kueue's queues, the
refusal on Volcano, what still runs and when the pool is empty, the sweep's reopening, the
owners told, the commands for the cluster admin."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from jobs.models import Job
from jobs.outlook import drains, feasibility
from notifications.actions import notice_drains
from notifications.models import Event, Kind
from quotas import actions
from quotas.models import Drain
from quotas.models.flavors import Scheduler
from workloads.kueue import render_cluster_queue
from workloads.kueue_words import quota_message

from ..builders import build_job, make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def reconciles(monkeypatch):
    sent = []
    monkeypatch.setattr("quotas.actions.quotas_changed", lambda team: sent.append(team.slug))
    return sent


def drain_of(flavor, *, hours=2, window=1, by=None, starts=None, **fields):
    now = timezone.now()
    drain = Drain(flavor=flavor, deadline=now + timedelta(hours=hours), reopens_at=now + timedelta(hours=hours + window),
                  reason="firmware upgrade", starts_at=starts or now, **fields)
    return actions.declare_drain(drain, by)


def running(team, flavor, *, admitted_ago, max_runtime, submitter=None, name=None):
    job = make_job(team, flavor, max_runtime_seconds=max_runtime, submitter=submitter, **({"name": name} if name else {}))
    at = timezone.now() - timedelta(seconds=admitted_ago)
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=at, started_at=at)
    job.refresh_from_db()
    return job


def test_a_drained_kueue_flavor_holds_its_cluster_queues_and_reopens_after_the_window(team, flavor, quota_manager,
                                                                                       reconciles):
    quota = make_quota(team, flavor)
    assert render_cluster_queue(quota, team.namespace_name, team.slug)["spec"]["stopPolicy"] == "None"
    drain = drain_of(flavor, by=quota_manager)
    assert reconciles == [team.slug], "the team's queues follow at once"
    quota.refresh_from_db()
    assert render_cluster_queue(quota, team.namespace_name, team.slug)["spec"]["stopPolicy"] == "Hold"
    # After the window the sweep notes it and the queues render open again.
    reconciles.clear()
    later = drain.reopens_at + timedelta(seconds=1)
    assert actions.drain_windows(later) == {"held": 0, "reopened": 1}
    assert reconciles == [team.slug]
    assert actions.drain_windows(later + timedelta(seconds=5)) == {"held": 0, "reopened": 0}, "once"
    assert flavor.open_drain(later) is None
    Drain.objects.filter(pk=drain.pk).update(reopens_at=timezone.now() - timedelta(seconds=1),
                                             deadline=timezone.now() - timedelta(seconds=2),
                                             starts_at=timezone.now() - timedelta(seconds=3))
    assert render_cluster_queue(quota, team.namespace_name, team.slug)["spec"]["stopPolicy"] == "None"


def test_a_drain_announced_ahead_holds_only_from_its_start(team, flavor, quota_manager, reconciles):
    quota = make_quota(team, flavor)
    drain = drain_of(flavor, by=quota_manager, hours=3, starts=timezone.now() + timedelta(hours=1))
    assert drain.phase() == "scheduled" and drain.held_at is None
    assert render_cluster_queue(quota, team.namespace_name, team.slug)["spec"]["stopPolicy"] == "None"
    assert actions.drain_windows(drain.starts_at + timedelta(seconds=1))["held"] == 1


def test_the_form_verdict_says_a_job_waits_until_the_pool_reopens(team, flavor, quota_manager, reconciles):
    make_quota(team, flavor)
    drain_of(flavor, by=quota_manager)
    verdict = feasibility.assess(build_job(team, flavor, max_runtime_seconds=600))
    assert verdict.verdict == "queue"
    assert "draining for maintenance" in verdict.message and "reopens at" in verdict.message
    # Kueue holds the queue: nothing is refused, the job waits.
    build_job(team, flavor, max_runtime_seconds=24 * 3600).full_clean()


def test_volcano_refuses_a_job_that_would_outlive_the_deadline_and_takes_one_that_ends_before(team, quota_manager,
                                                                                             reconciles):
    a100 = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    make_quota(team, a100)
    drain_of(a100, by=quota_manager, hours=2)
    with pytest.raises(ValidationError) as refused:
        build_job(team, a100, max_runtime_seconds=3 * 3600).full_clean()
    assert "drains by" in refused.value.message_dict["max_runtime_seconds"][0]
    build_job(team, a100, max_runtime_seconds=3600).full_clean()  # ends before the deadline
    with pytest.raises(ValidationError) as server:
        build_job(team, a100, kind="inference", port=8080, min_replicas=1, max_replicas=1,
                  command=[], args=[]).full_clean()
    assert "no maximum runtime" in server.value.message_dict["flavor"][0]


def test_what_still_runs_and_when_the_pool_is_empty(team, flavor, quota_manager, member, reconciles):
    drain = drain_of(flavor, by=quota_manager, hours=2)
    assert drains.on_pool(drain).empty, "nothing runs: empty now"
    short = running(team, flavor, admitted_ago=600, max_runtime=3600, submitter=member)  # ends in 50 min
    long = running(team, flavor, admitted_ago=60, max_runtime=4 * 3600, submitter=member)  # after the deadline
    Job.objects.create(team=team, flavor=flavor, name="waits", image="ghcr.io/example/train:1", state="queued")
    pool = drains.on_pool(drain)
    assert [row.job.pk for row in pool.running] == [short.pk, long.pk]
    assert pool.empty_at == long.admitted_at + timedelta(hours=4)
    assert pool.waiting == 1
    assert [row.job.pk for row in pool.overdue(drain.deadline)] == [long.pk]
    Job.objects.filter(pk=long.pk).update(max_runtime_seconds=None)
    assert drains.on_pool(drain).empty_at is None, "a job without an end: unknown"


def test_owners_and_submitters_hear_once_when_their_pool_is_drained(team, flavor, quota_manager, member, owner,
                                                                     reconciles):
    for person in (member, owner):
        person.email = f"{person.username}@example.org"
        person.save()
    job = running(team, flavor, admitted_ago=60, max_runtime=4 * 3600, submitter=member)
    drain_of(flavor, by=quota_manager, hours=2)
    now = timezone.now()
    assert notice_drains(now) == 1
    assert notice_drains(now) == 0, "once per drain and job"
    event = Event.objects.get(kind=Kind.JOB_DRAIN)
    assert event.job_id == job.pk and "after the deadline" in event.message
    assert {n.user for n in event.notifications.all()} == {member, owner}


def test_drain_rules(team, flavor, quota_manager, reconciles):
    now = timezone.now()
    with pytest.raises(ValidationError) as past:
        Drain(flavor=flavor, deadline=now - timedelta(hours=1), reopens_at=now + timedelta(hours=1),
              reason="x").declare_by(quota_manager)
    assert "deadline" in past.value.message_dict
    with pytest.raises(ValidationError) as order:
        Drain(flavor=flavor, deadline=now + timedelta(hours=2), reopens_at=now + timedelta(hours=1),
              reason="x").declare_by(quota_manager)
    assert "reopens_at" in order.value.message_dict
    with pytest.raises(ValidationError) as nodes:
        Drain(flavor=flavor, deadline=now + timedelta(hours=1), reopens_at=now + timedelta(hours=2), reason="x",
              nodes=["Bad_Node"]).declare_by(quota_manager)
    assert "nodes" in nodes.value.message_dict
    drain_of(flavor, by=quota_manager)
    with pytest.raises(ValidationError) as twice:
        drain_of(flavor, by=quota_manager)
    assert "flavor" in twice.value.message_dict


def test_the_commands_find_the_flavor_s_nodes_by_label_or_name_them(flavor, quota_manager, reconciles):
    drain = drain_of(flavor, by=quota_manager)
    assert [c for _, c in drain.commands()] == [
        "kubectl cordon -l gpuplatform.io/pool=h100",
        "kubectl drain -l gpuplatform.io/pool=h100 --ignore-daemonsets --delete-emptydir-data --timeout=10m",
        "kubectl uncordon -l gpuplatform.io/pool=h100"]
    actions.end_drain(drain, quota_manager)
    some = drain_of(flavor, by=quota_manager, nodes=["gpu-node-1", "gpu-node-2"])
    assert some.commands()[0][1] == "kubectl cordon gpu-node-1 gpu-node-2"


def test_ending_a_drain_early_reopens_at_once_and_is_in_the_audit_trail(team, flavor, quota_manager, reconciles):
    make_quota(team, flavor)
    drain = drain_of(flavor, by=quota_manager)
    reconciles.clear()
    assert actions.end_drain(drain, quota_manager)
    assert not actions.end_drain(drain, quota_manager), "already over"
    assert reconciles == [team.slug] and flavor.open_drain() is None and not flavor.admission_held
    drain.refresh_from_db()
    assert drain.phase() == "ended" and drain.reopened_at is not None
    history = list(drain.history.order_by("history_date"))
    assert [h.history_user for h in history] == [quota_manager, quota_manager]


def test_a_job_waiting_in_a_held_queue_is_told_in_plain_words(team, flavor):
    job = build_job(team, flavor)
    said = quota_message(job, f"ClusterQueue {team.namespace_name}-h100 is inactive")
    assert said == "Waiting: the h100 pool admits nothing new now (drained for maintenance); this job starts when it reopens."
