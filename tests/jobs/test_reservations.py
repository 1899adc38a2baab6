"""A flavor's reservation for a team's first waiting job (issue 33 item 4, docs/eta.md "Start
sooner"): a later job that fits the free GPUs but would delay it is kept back by the platform
(created behind the platform's admission gate: tests/jobs/test_admission_gates.py), and told which maximum runtime would let it start now; one that ends in time
goes; they are let go by the on-commit trigger and the sweep; the advice's clone does start
now. Flavors that do not reserve behave as Kueue's BestEffortFIFO alone."""

import re
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from jobs import actions
from jobs.lifecycle import BEHIND_RESERVATION, State
from jobs.models import Job
from jobs.outlook import estimates, feasibility, reservations
from jobs.outlook.reservations import RELEASED
from jobs.tasks import reconcile_job, release_reserved
from quotas.models.flavors import Scheduler
from tests.builders import build_job, make_flavor, make_quota
from workloads import gates

from .test_eta_pages import queued, running

pytestmark = pytest.mark.django_db

HOUR = 3600


def submit(team, flavor, who, name, gpus=2, **fields) -> Job:
    return actions.submit(team=team, submitter=who, flavor=flavor, name=name, image="ghcr.io/x/train:1",
                          workers=1, gpus_per_worker=gpus, **fields)


@pytest.fixture
def reserving(team, flavor):
    """A flavor that reserves; the team's 8 GPUs: 6 held by a job with 1 h left of its maximum
    runtime, 2 free; an 8-GPU job waits for them all (the head, on the cluster)."""
    flavor.backfill = True
    flavor.save()
    make_quota(team, flavor, nominal_gpus=8)
    blocker = running(team, flavor, timedelta(hours=1), gpus_per_worker=6, max_runtime_seconds=2 * HOUR, name="blocker")
    head = queued(team, flavor, gpus_per_worker=8, max_runtime_seconds=HOUR, name="head")
    return blocker, head


@pytest.fixture
def tasks_here(monkeypatch):
    """Celery's messages run here: the release at once, the reconciles it sends recorded."""
    sent = []
    monkeypatch.setattr("jobs.tasks.reconcile_job.delay", lambda pk: sent.append(pk))
    monkeypatch.setattr("jobs.tasks.release_reserved.delay", lambda *args: release_reserved(*args))
    return sent


def test_a_job_that_would_delay_the_head_is_kept_back_and_told_the_runtime_that_starts_it_now(
        reserving, team, flavor, member):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    assert (kept.state, kept.reason) == (State.SUBMITTED, BEHIND_RESERVATION)
    assert kept.behind_reservation
    assert kept.message.startswith("8 GPUs are reserved for job head, which waits ahead of it and starts in "
                                   "1 h 00 min at the latest. 2 GPUs are free now")
    assert "2 GPUs are free now, but this job could still hold them then." in kept.message
    assert "With a maximum runtime of 59 min or less it would start now." in kept.message
    assert kept.queue_position() == 1  # still in the team's queue, behind the head
    assert list(kept.events.values_list("reason", flat=True)) == [BEHIND_RESERVATION]


@pytest.mark.parametrize(("limit", "kept"), [(30 * 60, False), (55 * 60, False), (2 * HOUR, True), (None, True)])
def test_only_a_job_that_surely_ends_before_the_head_needs_the_gpus_goes(reserving, team, flavor, member, limit, kept):
    job = submit(team, flavor, member, "next", max_runtime_seconds=limit)
    assert job.behind_reservation is kept
    assert job.reason == (BEHIND_RESERVATION if kept else "Submitted")


def test_a_job_bigger_than_the_free_gpus_waits_with_the_platform_behind_the_head(reserving, team, flavor, member):
    job = submit(team, flavor, member, "big", gpus=4, max_runtime_seconds=10 * 60)
    assert job.behind_reservation
    assert job.message.endswith("It is sent to the cluster when it can start without delaying that job.")
    assert "would start now" not in job.message


def test_the_gpus_the_head_leaves_spare_may_go_to_any_job(team, flavor, member):
    # 10 GPUs: 4 held till 1 h, 4 by a job with no limit, 2 free; the 4-GPU head fits at 1 h
    # with 2 spare beside it, so a 2-GPU job with no limit cannot delay it
    flavor.backfill = True
    flavor.save()
    make_quota(team, flavor, nominal_gpus=10)
    running(team, flavor, timedelta(hours=1), gpus_per_worker=4, max_runtime_seconds=2 * HOUR)
    running(team, flavor, timedelta(hours=1), gpus_per_worker=4, max_runtime_seconds=None)
    queued(team, flavor, gpus_per_worker=4, max_runtime_seconds=HOUR)
    assert not submit(team, flavor, member, "spare", max_runtime_seconds=None).behind_reservation


def test_without_a_maximum_runtime_on_the_blockers_nothing_is_reserved(team, flavor, member):
    flavor.backfill = True
    flavor.save()
    make_quota(team, flavor, nominal_gpus=8)
    running(team, flavor, timedelta(hours=1), gpus_per_worker=6, max_runtime_seconds=None)
    queued(team, flavor, gpus_per_worker=4, max_runtime_seconds=HOUR)
    assert not submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR).behind_reservation


def test_a_server_kept_back_is_not_told_of_a_maximum_runtime_it_cannot_have(reserving, team, flavor, member):
    server = actions.submit(team=team, submitter=member, flavor=flavor, name="serve", kind=Job.Kind.INFERENCE,
                            image="ghcr.io/x/serve:1", gpus_per_worker=2, min_replicas=1, max_replicas=1, port=8080)
    assert server.behind_reservation
    assert "maximum runtime" not in server.message
    assert "shorter_max_runtime" not in {a.change for a in estimates.estimate(server).sooner}


def test_a_flavor_that_does_not_reserve_lets_every_job_go(reserving, team, flavor, member):
    flavor.backfill = False
    flavor.save()
    assert submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR).reason == "Submitted"


def test_a_volcano_flavor_cannot_reserve():
    pool = make_flavor("v100", scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "v100"})
    pool.backfill = True
    with pytest.raises(ValidationError) as refused:
        pool.full_clean()
    assert "Volcano keeps its own queue order" in str(refused.value.message_dict["backfill"])


def test_a_kept_back_job_is_created_behind_the_platforms_reservation_gate(fake, reserving, team, flavor, member):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    reconcile_job(kept.pk)
    kept.refresh_from_db()
    assert kept.behind_reservation
    [created] = [o for o in fake.list("batch/v1", "Job", namespace=team.namespace_name)
                 if o["metadata"]["name"].startswith("long")]
    assert created["metadata"]["annotations"] == {gates.ANNOTATION: gates.RESERVATION}


def test_when_the_blocker_ends_the_kept_back_job_goes_once_kueue_admitted_the_head(
        reserving, team, flavor, member, tasks_here, django_capture_on_commit_callbacks):
    blocker, head = reserving
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    tasks_here.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert blocker.transition(State.SUCCEEDED, reason="Succeeded")
    kept.refresh_from_db()
    # 8 GPUs free: the head fits them, but Kueue may not have seen them freed yet, and would
    # admit this 2-GPU job in the GPUs it does see free: it waits for the head's admission
    assert kept.behind_reservation
    assert kept.message == ("Job head, which waits ahead of it, fits the GPUs freed now: this job is sent to the "
                            "cluster once Kueue has admitted that one.")
    assert tasks_here == []
    with django_capture_on_commit_callbacks(execute=True):
        assert head.transition(State.ADMITTED, reason="Admitted")
    kept.refresh_from_db()
    # the head holds the 8 GPUs: this one, the first that does not fit, is let onto the
    # cluster to wait there (the new head)
    assert (kept.state, kept.reason, kept.message) == (State.SUBMITTED, RELEASED["reason"], RELEASED["message"])
    assert tasks_here == [kept.pk]
    assert kept.events.filter(reason="ReservationAllows").exists()


def test_a_job_ending_on_another_flavor_or_team_sends_nothing(reserving, team, flavor, member,
                                                             django_capture_on_commit_callbacks):
    submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    other = make_flavor("a100", node_labels={"gpuplatform.io/pool": "a100"})
    make_quota(team, other, nominal_gpus=8)
    elsewhere = running(team, other, timedelta(minutes=5), gpus_per_worker=2)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert elsewhere.transition(State.SUCCEEDED, reason="Succeeded")
    assert callbacks == []


def test_when_the_head_is_admitted_the_next_big_job_becomes_the_head_and_goes_to_the_cluster(
        reserving, team, flavor, member, tasks_here, django_capture_on_commit_callbacks):
    blocker, head = reserving
    second = submit(team, flavor, member, "second", gpus=6, max_runtime_seconds=HOUR)
    assert second.behind_reservation  # behind the head, which needs every GPU
    Job.objects.filter(pk=blocker.pk).update(state=State.SUCCEEDED, finished_at=timezone.now())
    tasks_here.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert head.transition(State.ADMITTED, reason="Admitted")
    second.refresh_from_db()
    assert second.reason == RELEASED["reason"]  # the head holds the GPUs: this one is the head now
    assert tasks_here == [second.pk]


def test_the_sweeps_reconcile_lets_a_kept_back_job_go_and_creates_it(fake, reserving, team, flavor, member):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    blocker, head = reserving
    # the blocker ended and the head was admitted behind the triggers' backs
    Job.objects.filter(pk=blocker.pk).update(state=State.SUCCEEDED)
    Job.objects.filter(pk=head.pk).update(state=State.ADMITTED, admitted_at=timezone.now(), gpus_in_use=8)
    reconcile_job(kept.pk)
    kept.refresh_from_db()
    assert kept.state == State.QUEUED
    assert any(o["metadata"]["name"].startswith("long")
               for o in fake.list("batch/v1", "Job", namespace=team.namespace_name))


def test_the_verdict_before_submitting_says_it_would_queue_behind_the_reservation(reserving, team, flavor, member):
    long = build_job(team, flavor, submitter=member, gpus_per_worker=2, max_runtime_seconds=3 * HOUR)
    short = build_job(team, flavor, submitter=member, gpus_per_worker=2, max_runtime_seconds=30 * 60)
    said = feasibility.assess(long)
    assert said.verdict == feasibility.Feasibility.QUEUE and "8 GPUs are reserved for job head" in said.message
    assert feasibility.assess(short).verdict == feasibility.Feasibility.NOW


def test_the_estimate_advises_the_shorter_runtime_and_its_clone_starts_now(reserving, team, flavor, member):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    got = estimates.estimate(kept)
    assert got.eta.p50 >= HOUR - 120  # after the head, which starts when the blocker is done
    advice = {a.change: a for a in got.sooner}["shorter_max_runtime"]
    assert advice.message == "With a maximum runtime of 59 min instead of 3 h 00 min: starts within a minute."
    limit = int(re.search(r"max_runtime_seconds=(\d+)", advice.clone_url).group(1))
    assert advice.clone_url.startswith(f"/jobs/new/?clone={kept.pk}&max_runtime_seconds=") and limit == 59 * 60
    clone = submit(team, flavor, member, "long-copy", max_runtime_seconds=limit)
    assert clone.reason == "Submitted"  # what the advice said: it goes to the cluster now


def test_no_runtime_advice_where_the_flavor_does_not_reserve(reserving, team, flavor, member):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    flavor.backfill = False
    flavor.save()
    Job.objects.filter(pk=kept.pk).update(reason="Submitted")
    kept.refresh_from_db()
    assert "shorter_max_runtime" not in {a.change for a in estimates.estimate(kept).sooner}


def test_the_clone_link_fills_the_shorter_runtime_in(reserving, team, flavor, member, client_for):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    page = client_for(member).get(f"/jobs/new/?clone={kept.pk}&max_runtime_seconds=3540").content.decode()
    assert 'name="max_runtime_seconds" value="3540"' in page


def test_who_sees_the_reason_and_the_advice(reserving, team, flavor, member, owner, viewer, outsider, client_for):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    for person in (owner, member):
        page = client_for(person).get(f"/jobs/{kept.pk}/").content.decode()
        assert "8 GPUs are reserved for job head" in page
        assert f"/jobs/new/?clone={kept.pk}&amp;max_runtime_seconds=3540" in page
    page = client_for(viewer).get(f"/jobs/{kept.pk}/").content.decode()
    assert "8 GPUs are reserved for job head" in page and "max_runtime_seconds=3540" not in page
    assert client_for(outsider).get(f"/jobs/{kept.pk}/").status_code == 404
    api = APIClient()
    api.force_login(member)
    body = api.get(f"/api/v1/jobs/{kept.pk}").json()
    assert body["reason"] == BEHIND_RESERVATION
    assert body["eta"]["sooner"][0]["change"] == "shorter_max_runtime"
    api.force_login(outsider)
    assert api.get(f"/api/v1/jobs/{kept.pk}").status_code == 404


def test_a_kept_back_jobs_page_walks_the_queue_once(reserving, team, flavor, member, client_for, monkeypatch):
    kept = submit(team, flavor, member, "long", max_runtime_seconds=3 * HOUR)
    walks = []
    walk = reservations._walk
    monkeypatch.setattr(reservations, "_walk", lambda *args: walks.append(args) or walk(*args))
    page = client_for(member).get(f"/jobs/{kept.pk}/").content.decode()
    # its verdict (why it is kept back) and its advice (which runtime starts it now): one walk
    assert "8 GPUs are reserved for job head" in page and "max_runtime_seconds=3540" in page
    assert len(walks) == 1
    reservations.holds(kept)
    reservations.holds(kept)  # outside a page every question walks afresh
    assert len(walks) == 3
