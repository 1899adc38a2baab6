"""``POST /api/v1/jobs/dry-run``: a submission checked as ``POST /jobs`` checks it, with the
objects it would apply and its verdict, and nothing created; only where one may submit."""

import pytest

from jobs.models import Job, JobEvent
from jobs.models.idempotency import IdempotencyKey

from ..builders import make_quota
from ..support.api import JOB_BODY, issue_token

pytestmark = pytest.mark.django_db


def test_a_dry_run_answers_the_job_its_objects_and_verdict_and_creates_nothing(client_as, member, team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    response = client_as(token=issue_token(member, team=team)).post("/api/v1/jobs/dry-run", JOB_BODY, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["job"]["name"] == "train" and body["job"]["total_gpus"] == 8 and "id" not in body["job"]
    assert body["job"]["cpu_per_worker"] == "4.00"  # the defaults filled in, as stored
    assert body["feasibility"]["verdict"] == "now"
    assert any(obj["kind"] == "Namespace" or obj["metadata"]["name"].startswith("train") for obj in body["objects"])
    assert (Job.objects.count(), JobEvent.objects.count(), IdempotencyKey.objects.count()) == (0, 0, 0)


def test_a_dry_run_says_never_for_a_job_that_can_never_run(client_as, member, team, flavor):
    body = client_as(member).post("/api/v1/jobs/dry-run", JOB_BODY, format="json").json()
    assert body["feasibility"]["verdict"] == "never" and "no quota on h100" in body["feasibility"]["message"]
    assert not Job.objects.exists()


def test_a_dry_run_gives_the_field_errors_a_submit_would(client_as, member, team, flavor):
    bad = {**JOB_BODY, "gpus_per_worker": 9}
    client = client_as(member)
    dry = client.post("/api/v1/jobs/dry-run", bad, format="json")
    real = client.post("/api/v1/jobs", bad, format="json")
    assert dry.status_code == real.status_code == 400
    assert dry.json()["fields"] == real.json()["fields"] and "gpus_per_worker" in dry.json()["fields"]


def test_a_dry_run_refuses_a_live_name_as_a_submit_would(client_as, member, team, flavor):
    client = client_as(member)
    assert client.post("/api/v1/jobs", JOB_BODY, format="json").status_code == 201
    response = client.post("/api/v1/jobs/dry-run", JOB_BODY, format="json")
    assert response.status_code == 400 and "name" in response.json()["fields"]


def test_a_viewer_cannot_dry_run(client_as, viewer, team, flavor):
    response = client_as(viewer).post("/api/v1/jobs/dry-run", JOB_BODY, format="json")
    assert response.status_code == 403 and not Job.objects.exists()


def test_an_outsider_cannot_name_the_team(client_as, outsider, team, flavor):
    response = client_as(outsider).post("/api/v1/jobs/dry-run", JOB_BODY, format="json")
    assert response.status_code == 400 and "team" in response.json()["fields"]


def test_a_dry_run_needs_the_submit_scope(client_as, member, team, flavor):
    token = issue_token(member, team=team, scopes=["read"])
    response = client_as(token=token).post("/api/v1/jobs/dry-run", JOB_BODY, format="json")
    assert response.status_code == 403 and "'submit' scope" in response.json()["message"]


def test_the_schema_declares_the_dry_run_and_its_statuses(client_as, member):
    schema = client_as(member).get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/jobs/dry-run"]["post"]
    assert {"200", "400", "403"} <= set(operation["responses"])
    plan = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][plan]["properties"]) == {"job", "feasibility", "eta", "objects"}
