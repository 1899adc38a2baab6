"""Deciding a quota request shows what it changes: the team's usage on the flavor now, the
cluster's commitment before and after ("24 of 32 promised -> 32 of 32"), and which of the
team's waiting jobs the new quota lets start; the requester hears the decision by default
(and not after opting out); a request's end is written one way everywhere ("until" its last
day, both days included)."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console.decision import effect_of
from jobs.lifecycle import State
from jobs.models import Job
from notifications.models import Kind, Notification, Preference
from quotas import actions
from quotas.models import QuotaRequest
from workloads.base import EXCEEDS_QUOTA

from ..builders import make_job, make_quota, make_team

pytestmark = pytest.mark.django_db


def node(name, gpus):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"gpuplatform.io/pool": "h100"}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def job(team, flavor, name, gpus, state, submitter):
    made = make_job(team, flavor, name=name, submitter=submitter, workers=max(1, gpus // 8), gpus_per_worker=min(gpus, 8))
    for step in {State.SUBMITTED: [State.SUBMITTED],
                 State.RUNNING: [State.SUBMITTED, State.ADMITTED, State.RUNNING]}[state]:
        made.transition(step)
    return made


@pytest.fixture
def world(fake, team, flavor, member, owner):
    """32 GPUs on the cluster; vision holds 8 of 8 and waits with three jobs (4, 16, 2 GPUs
    in that order); another team has 16: 24 promised."""
    for index in range(4):
        fake.put(node(f"gpu-{index}", 8))
    make_quota(team, flavor, nominal_gpus=8)
    make_quota(make_team("speech"), flavor, nominal_gpus=16)
    job(team, flavor, "running-big", 8, State.RUNNING, member)
    job(team, flavor, "wait-four", 4, State.SUBMITTED, member)
    job(team, flavor, "wait-sixteen", 16, State.SUBMITTED, member)
    job(team, flavor, "wait-two", 2, State.SUBMITTED, member)
    today = timezone.localdate()
    return QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=8, starts_on=today,
                                       ends_on=today + timedelta(days=13), justification="Deadline.")


def request_page(client, req):
    return client.get(reverse("console:request", args=[req.pk]))


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_effect_counts_usage_commitment_and_the_jobs_that_would_start(world):
    effect = effect_of(world)
    assert (effect.usage.in_use, effect.usage.nominal, effect.nominal_after) == (8, 8, 16)
    assert (effect.promised_before, effect.promised_after, effect.cluster) == (24, 32, 32)
    # 8 more GPUs: the 4 fits, the 16 does not (it keeps waiting), the 2 behind it fits too.
    assert [j.name for j in effect.runnable] == ["wait-four", "wait-two"]
    assert (effect.already_fit, effect.still_waiting) == (0, 1)


def test_a_job_that_fits_the_quota_already_is_not_credited_to_the_approval(world, team, flavor, member):
    world.team.quotas.update(nominal_gpus=12)  # 4 free: wait-four fits now, nothing behind it does
    effect = effect_of(world)
    # 12 + 8 = 20, 12 free: wait-four (already fitting) and wait-two; the 16 still does not fit.
    assert [j.name for j in effect.runnable] == ["wait-two"]
    assert (effect.already_fit, effect.still_waiting) == (1, 1)


def test_a_job_the_scheduler_called_too_big_for_the_quota_is_one_an_approval_lets_start(world):
    Job.objects.filter(name="wait-sixteen").update(reason=EXCEEDS_QUOTA)
    effect = effect_of(world, {"gpus": 16})  # 24 GPUs, 16 free: wait-four, then the 16 no longer fits
    assert [j.name for j in effect.runnable] == ["wait-four", "wait-two"]
    effect = effect_of(world, {"gpus": 24})  # 32 GPUs, 24 free: all three
    assert [j.name for j in effect.runnable] == ["wait-four", "wait-sixteen", "wait-two"]


def test_an_inference_server_needs_its_minimum_replicas_to_start(world, team, flavor, member):
    server = make_job(team, flavor, name="serve", kind="inference", port=8000, min_replicas=1, max_replicas=3,
                      gpus_per_worker=2, submitter=member)
    server.transition(State.SUBMITTED)
    effect = effect_of(world, {"gpus": 4})  # 4 free: wait-four takes them all
    assert [j.name for j in effect.runnable] == ["wait-four"]
    effect = effect_of(world, {"gpus": 8})  # 8 free: wait-four, wait-two, and the server: one replica (2), not three
    assert [j.name for j in effect.runnable] == ["wait-four", "wait-two", "serve"]
    assert effect.waiting_gpus == 4 + 16 + 2 + 2


def test_the_effect_follows_the_numbers_the_manager_typed(world):
    effect = effect_of(world, {"gpus": 2})
    assert effect.nominal_after == 10 and effect.promised_after == 26
    assert [j.name for j in effect.runnable] == ["wait-two"]


def test_a_quota_given_back_shows_what_stays_in_use_above_it(world):
    effect = effect_of(world, {"gpus": -4})
    assert effect.nominal_after == 4 and effect.above_quota_after == 4 and effect.runnable == []


def test_the_approval_page_shows_usage_commitment_before_and_after_and_the_runnable_jobs(client_for, quota_manager, world):
    response = request_page(client_for(quota_manager), world)
    page = text(response.content.decode())
    assert response.status_code == 200
    assert "8 of 8 GPUs in use; 3 jobs waiting for 22 GPUs" in page
    assert "Quota 8 → 16 GPUs" in page
    assert "24 of 32 promised → 32 of 32" in page
    assert re.search(r"fit only in the new quota and can start: wait-four 4 GPUs wait-two 2 GPUs", page)
    assert "1 still does not fit." in page


def test_an_over_commitment_after_approval_is_said(client_for, quota_manager, world):
    QuotaRequest.objects.filter(pk=world.pk).update(gpus=16)  # filed so (a request's numbers never change)
    world.refresh_from_db()
    page = text(request_page(client_for(quota_manager), world).content.decode())
    assert "24 of 32 promised → 40 of 32" in page and "over-committed by 8" in page


def test_without_a_cluster_the_commitment_says_its_size_is_unknown(client_for, quota_manager, world, monkeypatch):
    from core import reconcile
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: False)
    page = text(request_page(client_for(quota_manager), world).content.decode())
    assert "24 promised → 32 (cluster size unknown" in page


def test_a_refused_approval_shows_the_effect_of_what_was_typed(client_for, quota_manager, world):
    today = timezone.localdate()
    response = client_for(quota_manager).post(reverse("console:approve", args=[world.pk]), {
        "gpus": 2, "cpu_cores": 24, "memory_gib": 240, "starts_on": today.isoformat(),
        "ends_on": (today - timedelta(days=1)).isoformat(), "reason": ""})
    page = text(response.content.decode())
    assert response.status_code == 400 and "If approved as typed (+2 GPUs)" in page and "Quota 8 → 10 GPUs" in page


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "outsider"])
def test_only_quota_managers_see_the_effect(request, client_for, world, who):
    assert request_page(client_for(request.getfixturevalue(who)), world).status_code == 403


def test_a_decided_request_shows_no_effect(client_for, quota_manager, world):
    world.deny(quota_manager, "Not this month.")
    html = request_page(client_for(quota_manager), world).content.decode()
    assert "If approved" not in html and "Not this month." in html


# --- the requester hears it ------------------------------------------------------------------
def approve(req, manager):
    today = timezone.localdate()
    return actions.approve(req, manager, gpus=req.gpus, borrowing_limit_gpus=None, starts_on=today,
                           ends_on=req.ends_on, cpu_cores=96, memory_gib=960)


def told(person):
    return list(Notification.objects.filter(user=person, event__kind=Kind.QUOTA_REQUEST_DECIDED))


def test_the_requester_is_told_of_an_approval_without_choosing_anything(world, owner, quota_manager, reconciles):
    owner.email = "olivia@example.com"
    owner.save()
    approve(world, quota_manager)
    assert len(told(owner)) == 1


def test_the_requester_is_told_of_a_denial_by_default(world, owner, quota_manager):
    owner.email = "olivia@example.com"
    owner.save()
    world.deny(quota_manager, "Not this month.")
    assert len(told(owner)) == 1


def test_a_requester_who_opted_out_is_not_told(world, owner, quota_manager, reconciles):
    owner.email = "olivia@example.com"
    owner.save()
    Preference.objects.choose(owner, Kind.QUOTA_REQUEST_DECIDED, False)
    approve(world, quota_manager)
    assert told(owner) == []


def test_members_who_did_not_ask_are_not_told(world, member, quota_manager, reconciles):
    member.email = "max@example.com"
    member.save()
    approve(world, quota_manager)
    assert told(member) == []


# --- one date convention ---------------------------------------------------------------------
def test_a_period_reads_until_its_last_day_on_every_page(client_for, quota_manager, owner, world, reconciles):
    last = world.ends_on.isoformat()
    first = world.starts_on.isoformat()
    manager = client_for(quota_manager)
    assert f"{first} until {last}" in text(request_page(manager, world).content.decode())
    assert f"{first} until {last}" in text(manager.get(reverse("console:requests")).content.decode())
    assert f"{first} until {last}" in text(client_for(owner).get(reverse("console:team", args=["vision"])).content.decode())
    approve(world, quota_manager)
    # The grant ends at midnight after the last day; every page says the last day.
    day_after = (world.ends_on + timedelta(days=1)).isoformat()
    grants = manager.get(reverse("console:grants")).content.decode()
    assert "Until (last day)" in grants and f">{last}</td>" in grants and day_after not in grants
    for html in (request_page(manager, world).content.decode(),
                 client_for(owner).get(reverse("console:team", args=["vision"])).content.decode()):
        assert f"until {last}" in text(html) and day_after not in html


def test_a_grant_ended_early_shows_when_it_ended(client_for, quota_manager, world, reconciles):
    grant = approve(world, quota_manager)
    actions.end_grant(grant, quota_manager)
    grant.refresh_from_db()
    ended = timezone.localtime(grant.ends_at)
    page = text(client_for(quota_manager).get(reverse("console:grants")).content.decode())
    assert f"{ended:%Y-%m-%d %H:%M}" in page
