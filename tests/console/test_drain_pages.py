"""The console's drain pages and /api/v1/drains (docs/drain.md): quota managers drain, end and
read; owners, members and outsiders may not drain (and read without the jobs of others)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Job
from quotas.models import Drain

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def reconciles(monkeypatch):
    sent = []
    monkeypatch.setattr("quotas.actions.quotas_changed", lambda team: sent.append(team.slug))
    return sent


def local(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def form(flavor, **fields) -> dict:
    now = timezone.now()
    return {"flavor": flavor.pk, "nodes": "", "deadline": local(now + timedelta(hours=2)),
            "reopens_at": local(now + timedelta(hours=3)), "reason": "firmware", **fields}


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def test_a_quota_manager_drains_a_pool_from_the_console_and_sees_what_still_runs(
        client_for, quota_manager, team, flavor, member, reconciles):
    make_quota(team, flavor)
    job = make_job(team, flavor, name="long-train", max_runtime_seconds=4 * 3600, submitter=member)
    admitted = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=admitted, started_at=admitted)
    client = client_for(quota_manager)
    response = client.post("/quotas/console/drains/", form(flavor, nodes="gpu-a, gpu-b"))
    drain = Drain.objects.get()
    assert response.status_code == 302 and response.url == f"/quotas/console/drains/{drain.pk}/"
    assert drain.nodes == ["gpu-a", "gpu-b"] and drain.created_by == quota_manager
    assert reconciles == [team.slug]
    page = client.get(response.url).content.decode()
    assert "long-train" in page and "after the deadline" in page
    empty_at = timezone.localtime(admitted + timedelta(hours=4))
    assert f'{empty_at:%Y-%m-%d %H:%M:%S}' in page, "empty at: the last job's maximum runtime's end"
    assert "kubectl cordon gpu-a gpu-b" in page and "kubectl drain gpu-a gpu-b" in page
    assert client.get("/quotas/console/history/", {"kind": "drain"}).status_code == 200
    assert client.post(f"/quotas/console/drains/{drain.pk}/end/").status_code == 302
    drain.refresh_from_db()
    assert drain.ended_by == quota_manager and drain.phase() == "ended"


def test_the_drain_form_keeps_what_was_typed_and_says_what_is_wrong(client_for, quota_manager, flavor):
    typed = form(flavor, reopens_at=local(timezone.now() + timedelta(hours=1)), reason="keep me")
    response = client_for(quota_manager).post("/quotas/console/drains/", typed)
    assert response.status_code == 400
    assert "The pool reopens after the deadline." in response.content.decode()
    assert "keep me" in response.content.decode() and not Drain.objects.exists()


@pytest.mark.parametrize("who", ["owner", "member", "outsider"])
def test_only_quota_managers_reach_the_drain_pages(client_for, request, who, flavor, quota_manager):
    drain = Drain(flavor=flavor, deadline=timezone.now() + timedelta(hours=1),
                  reopens_at=timezone.now() + timedelta(hours=2), reason="x")
    drain.declare_by(quota_manager)
    client = client_for(request.getfixturevalue(who))
    assert client.get("/quotas/console/drains/").status_code == 403
    assert client.post("/quotas/console/drains/", form(flavor)).status_code == 403
    assert client.get(f"/quotas/console/drains/{drain.pk}/").status_code == 403
    assert client.post(f"/quotas/console/drains/{drain.pk}/end/").status_code == 403
    assert Drain.objects.get().ended_at is None


def api_body(**fields) -> dict:
    now = timezone.now()
    return {"flavor": "h100", "deadline": (now + timedelta(hours=2)).isoformat(),
            "reopens_at": (now + timedelta(hours=3)).isoformat(), "reason": "firmware", **fields}


def test_a_quota_manager_drains_and_ends_through_the_api(quota_manager, team, flavor, member, reconciles):
    make_quota(team, flavor)
    job = make_job(team, flavor, max_runtime_seconds=3600, submitter=member)
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=timezone.now(), started_at=timezone.now())
    api = api_as(quota_manager)
    created = api.post("/api/v1/drains", api_body(), format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["phase"] == "draining" and body["holds_queues"] is True and body["created_by"] == "quinn"
    assert [row["id"] for row in body["still_running"]] == [job.pk]
    assert body["empty_at"] == body["still_running"][0]["ends_at"]
    ended = api.post(f"/api/v1/drains/{body['id']}/end")
    assert ended.status_code == 200 and ended.json()["phase"] == "ended"
    assert api.post(f"/api/v1/drains/{body['id']}/end").status_code == 409


def test_the_api_refuses_a_bad_drain_field_by_field(quota_manager, flavor):
    api = api_as(quota_manager)
    nodes = api.post("/api/v1/drains", api_body(nodes=["Not A Node"]), format="json")
    assert nodes.status_code == 400 and list(nodes.json()["fields"]) == ["nodes"]
    order = api.post("/api/v1/drains", api_body(reopens_at="2000-01-01T00:00:00Z"), format="json")
    assert order.status_code == 400 and "reopens_at" in order.json()["fields"]
    unknown = api.post("/api/v1/drains", api_body(flavor="nope"), format="json")
    assert unknown.status_code == 400 and "flavor" in unknown.json()["fields"]
    assert not Drain.objects.exists()


@pytest.mark.parametrize("who", ["owner", "member", "outsider"])
def test_people_read_drains_but_only_quota_managers_drain(request, who, quota_manager, team, flavor, member):
    job = make_job(team, flavor, max_runtime_seconds=3600, submitter=member, name="secret-job")
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=timezone.now(), started_at=timezone.now())
    drain = Drain(flavor=flavor, deadline=timezone.now() + timedelta(hours=1),
                  reopens_at=timezone.now() + timedelta(hours=2), reason="x")
    drain.declare_by(quota_manager)
    api = api_as(request.getfixturevalue(who))
    assert api.post("/api/v1/drains", api_body(), format="json").status_code == 403
    assert api.post(f"/api/v1/drains/{drain.pk}/end").status_code == 403
    seen = api.get(f"/api/v1/drains/{drain.pk}")
    assert seen.status_code == 200 and seen.json()["phase"] == "draining"
    assert seen.json()["still_running"] is None and "secret-job" not in seen.content.decode()
    assert api.get("/api/v1/drains").json()["results"][0]["id"] == drain.pk
    assert Drain.objects.get().ended_at is None


def test_a_submission_to_a_drained_pool_says_it_waits_in_the_api(client_for, quota_manager, team, flavor, member):
    make_quota(team, flavor)
    Drain(flavor=flavor, deadline=timezone.now() + timedelta(hours=1), reopens_at=timezone.now() + timedelta(hours=2),
          reason="firmware").declare_by(quota_manager)
    response = api_as(member).post("/api/v1/jobs", {
        "team": "vision", "name": "train", "kind": "training", "flavor": "h100", "image": "ghcr.io/example/train:1",
        "command": ["python"], "workers": 1, "gpus_per_worker": 1, "max_runtime_seconds": 7200}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["feasibility"]["verdict"] == "queue"
    assert "draining for maintenance" in response.json()["feasibility"]["message"]
