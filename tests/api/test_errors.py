"""Every error has one shape: {"code", "message", "fields"}, with the right status."""

import pytest

from ..support.api import JOB_BODY, issue_token

pytestmark = pytest.mark.django_db


def test_invalid_fields_are_a_400_with_field_messages(client_as, member, team, flavor):
    response = client_as(member).post(
        "/api/v1/jobs", {**JOB_BODY, "gpus_per_worker": 9, "image": "", "flavor": "nope"}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and body["message"] == "Some fields are invalid."
    assert set(body["fields"]) == {"image", "flavor"}  # serializer errors come first
    assert all(isinstance(m, str) for messages in body["fields"].values() for m in messages)


def test_model_rules_reach_the_caller_as_field_errors(client_as, member, team, flavor):
    response = client_as(member).post(
        "/api/v1/jobs", {**JOB_BODY, "gpus_per_worker": 9, "env": {"WORLD_SIZE": "2"}}, format="json"
    )
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert fields["gpus_per_worker"] == ["9 GPUs per worker, but nodes of flavor h100 have 8."]
    assert "WORLD_SIZE" in fields["env"][0]


def test_a_second_live_job_of_the_same_name_is_refused(client_as, member, team, flavor):
    client = client_as(member)
    assert client.post("/api/v1/jobs", JOB_BODY, format="json").status_code == 201
    response = client.post("/api/v1/jobs", JOB_BODY, format="json")
    assert response.status_code == 400
    # On the field the pipeline can change, like every other rule a submission breaks.
    assert response.json() == {
        "code": "invalid", "message": "Some fields are invalid.",
        "fields": {"name": ["The team already has a live job with this name."]},
    }


def test_malformed_json_is_a_400_in_the_same_shape(client_as, member):
    response = client_as(member).generic("POST", "/api/v1/jobs", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


def test_missing_credentials_are_a_401_that_asks_for_a_bearer_token(client_as):
    response = client_as().get("/api/v1/jobs")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json() == {"code": "not_authenticated", "message": "Authentication credentials were not provided.", "fields": {}}


def test_a_viewer_submitting_gets_a_403_that_says_why(client_as, viewer, team, flavor):
    response = client_as(viewer).post("/api/v1/jobs", JOB_BODY, format="json")
    assert response.status_code == 403
    assert response.json() == {"code": "permission_denied", "message": "Only owners and members of vision can submit jobs.", "fields": {}}


def test_a_token_without_the_scope_gets_a_403_naming_it(client_as, member, team, job):
    response = client_as(token=issue_token(member, scopes=["read"])).post(f"/api/v1/jobs/{job.pk}/cancel")
    assert response.status_code == 403
    assert response.json()["message"] == "This token lacks the 'cancel' scope for this request."


def test_objects_of_other_teams_are_a_404_not_a_403(client_as, outsider, job):
    response = client_as(outsider).post(f"/api/v1/jobs/{job.pk}/cancel")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_unknown_api_paths_are_a_404_in_the_same_shape(client_as, member):
    response = client_as(member).get("/api/v2/whatever")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "No API endpoint at /api/v2/whatever.", "fields": {}}


def test_cancelling_a_finished_job_is_a_409(client_as, member, job):
    job.observe("succeeded", reason="Finished", message="")
    response = client_as(member).post(f"/api/v1/jobs/{job.pk}/cancel")
    assert response.status_code == 409
    assert response.json() == {"code": "conflict", "message": "The job is already succeeded.", "fields": {}}


def test_a_token_over_its_rate_gets_a_429_with_retry_after_and_others_are_not_slowed(
    client_as, member, owner, team, settings, monkeypatch
):
    from tenants.auth import TokenRateThrottle

    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "3/hour"})  # an hour: no window edge within the test
    busy = client_as(token=issue_token(member))
    assert [busy.get("/api/v1/flavors").status_code for _ in range(3)] == [200, 200, 200]
    response = busy.get("/api/v1/flavors")
    assert response.status_code == 429
    assert response.json()["code"] == "throttled" and int(response["Retry-After"]) > 0
    # Another token of the same person has its own bucket.
    assert client_as(token=issue_token(member)).get("/api/v1/flavors").status_code == 200


def test_logs_say_clearly_when_no_cluster_is_configured(client_as, member, job, monkeypatch):
    from core import reconcile

    monkeypatch.setattr(reconcile, "cluster_configured", lambda: False)
    response = client_as(member).get(f"/api/v1/jobs/{job.pk}/logs")
    assert response.status_code == 503
    assert response.json() == {
        "code": "logs_unavailable", "message": "Logs are unavailable: this platform has no cluster configured.", "fields": {}
    }


def test_logs_say_in_words_when_the_cluster_does_not_answer(client_as, member, job, monkeypatch):
    from cluster import FakeCluster, TransientError
    from core import reconcile

    cluster = FakeCluster()
    cluster.fail_next("LIST", TransientError("dial tcp :10250: connect: connection refused"))
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    response = client_as(member).get(f"/api/v1/jobs/{job.pk}/logs")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "logs_unavailable" and "did not answer just now" in body["message"]
    assert "10250" not in body["message"] and "dial tcp" not in body["message"]


def test_null_characters_are_refused_before_they_reach_the_database(client_as, member, team, flavor):
    client = client_as(member)
    response = client.post("/api/v1/jobs", {**JOB_BODY, "flavor": "h1\x0000"}, format="json")
    assert response.status_code == 400 and "flavor" in response.json()["fields"]
    assert client.get("/api/v1/jobs", {"q": "a\x00"}).status_code == 400
    assert client.get("/api/v1/jobs", {"team": "vi\x00sion"}).status_code == 400
    assert client.get("/api/v1/teams/vi%00sion").status_code == 404
    assert client.get("/api/v1/flavors/h%00100").status_code == 404
