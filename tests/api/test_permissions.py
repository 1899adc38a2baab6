"""The permission matrix: every endpoint, asked by every kind of caller.

People: anonymous, an outsider (owner of another team), the team's viewer, member and
owner, a quota manager (in no team). Tokens: the member's, for the team, with one scope
each, plus an expired and a revoked one with every scope.
"""

import pytest

from jobs.lifecycle import State
from jobs.models import Job
from tenants.tokens import ApiToken

from ..support.api import JOB_BODY, add_pod, caller_clients, issue_token

pytestmark = pytest.mark.django_db

CALLERS = [
    "anonymous", "outsider", "viewer", "member", "owner", "quota_manager",
    "token_read", "token_submit", "token_cancel", "token_expired", "token_revoked",
]
#            anon outsider viewer member owner qm   read submit cancel expired revoked
READ_TEAM = [401, 404,     200,   200,   200,  200, 200, 403,   403,   401,    401]
READ_ANY = [401, 200,     200,   200,   200,  200, 200, 403,   403,   401,    401]
SESSION = [401, 200,     200,   200,   200,  200, 403, 403,   403,   401,    401]
ENDPOINTS = {
    "list teams": ("get", "/api/v1/teams", READ_ANY),
    "retrieve the team with its quotas": ("get", "/api/v1/teams/vision", READ_TEAM),
    "list flavors": ("get", "/api/v1/flavors", READ_ANY),
    "retrieve a flavor": ("get", "/api/v1/flavors/h100", READ_ANY),
    "list jobs": ("get", "/api/v1/jobs", READ_ANY),
    "retrieve a job": ("get", "/api/v1/jobs/{job}", READ_TEAM),
    "read a job's events": ("get", "/api/v1/jobs/{job}/events", READ_TEAM),
    "read a job's manifests": ("get", "/api/v1/jobs/{job}/manifests", READ_TEAM),
    "read a job's logs": ("get", "/api/v1/jobs/{job}/logs", READ_TEAM),
    # An outsider cannot name the team (400, the same answer as for a team that does not
    # exist); a quota manager is in no team, so cannot submit.
    "submit a job": ("post", "/api/v1/jobs", [401, 400, 403, 201, 201, 403, 403, 201, 403, 401, 401]),
    # Quota managers see every job but cancel none (docs/console.md, the permission map).
    "cancel a job": ("post", "/api/v1/jobs/{job}/cancel", [401, 404, 403, 202, 202, 403, 403, 403, 202, 401, 401]),
    "list own tokens": ("get", "/api/v1/tokens", SESSION),
    "create a token": ("post", "/api/v1/tokens", [401, 201, 201, 201, 201, 201, 403, 403, 403, 401, 401]),
    "revoke the member's token": ("delete", "/api/v1/tokens/{token}", [401, 404, 404, 204, 404, 404, 403, 403, 403, 401, 401]),
}
CASES = [
    pytest.param(endpoint, caller, expected[i], id=f"{endpoint} as {caller} is {expected[i]}")
    for endpoint, (_m, _u, expected) in ENDPOINTS.items()
    for i, caller in enumerate(CALLERS)
]


@pytest.fixture
def as_caller(request, client_as, team, member):
    return caller_clients(request, client_as, team, member)


@pytest.mark.parametrize("endpoint, caller, expected", CASES)
def test_each_caller_gets_the_expected_answer_on_every_endpoint(
    endpoint, caller, expected, as_caller, job, member, fake
):
    add_pod(fake, job, "existing-1-0", "epoch 1\n")
    members_token = ApiToken.objects.issue(user=member, name="mine")[0]
    method, url, _ = ENDPOINTS[endpoint]
    url = url.format(job=job.pk, token=members_token.pk)
    body = {"submit a job": JOB_BODY, "create a token": {"name": "ci"}}.get(endpoint)
    client = as_caller(caller)
    jobs_before = Job.objects.count()

    response = getattr(client, method)(url, body, format="json") if body else getattr(client, method)(url)

    assert response.status_code == expected, response.content
    if expected >= 400:
        assert set(response.json()) == {"code", "message", "fields"}
    job.refresh_from_db()
    members_token.refresh_from_db()
    # What was refused changed nothing; what was allowed did its one thing.
    assert Job.objects.count() == jobs_before + (endpoint == "submit a job" and expected == 201)
    assert (job.state == State.CANCELLING) == (endpoint == "cancel a job" and expected == 202)
    assert members_token.is_revoked == (endpoint == "revoke the member's token" and expected == 204)


def test_outsiders_see_no_jobs_of_other_teams(client_as, outsider, job):
    assert client_as(outsider).get("/api/v1/jobs").json()["results"] == []


def test_quota_managers_see_every_team(client_as, quota_manager, team, outsider):
    slugs = [t["slug"] for t in client_as(quota_manager).get("/api/v1/teams").json()["results"]]
    assert slugs == ["other-team", "vision"]


def test_a_team_token_sees_only_its_team_even_when_its_user_is_in_others(client_as, member, team, flavor, job):
    from tenants.models import Membership
    from tests.builders import make_job, make_team

    other = make_team("nlp", members={member: Membership.Role.OWNER})
    theirs = make_job(other, flavor, name="nlp-job")
    client = client_as(token=issue_token(member, team=team))
    assert [t["slug"] for t in client.get("/api/v1/teams").json()["results"]] == ["vision"]
    assert [j["id"] for j in client.get("/api/v1/jobs").json()["results"]] == [job.pk]
    assert client.get(f"/api/v1/jobs/{theirs.pk}").status_code == 404
    assert client.post("/api/v1/jobs", {**JOB_BODY, "team": "nlp"}, format="json").status_code == 400
    # The same person's all-teams token sees both.
    everything = client_as(token=issue_token(member))
    assert {j["id"] for j in everything.get("/api/v1/jobs").json()["results"]} == {job.pk, theirs.pk}


def test_browser_sessions_need_a_csrf_token_to_write(member, team, flavor):
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(member)
    response = client.post("/api/v1/jobs", JOB_BODY, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["message"]
    assert not Job.objects.exists()


def test_browser_sessions_write_with_their_csrf_token(member, team, flavor):
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(member)
    secret = "a" * 32
    client.cookies["csrftoken"] = secret
    response = client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_X_CSRFTOKEN=secret)
    assert response.status_code == 201
    assert Job.objects.get().submitter == member
