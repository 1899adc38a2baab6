"""Quota requests over the API (issue 8): owners ask, everyone in the team reads them and
the decision; quota managers read every team's but decide only in the console.

The permission matrix has the callers of ``test_permissions.py``; its tokens are the
owner's (the one person who may ask), for the team, with one scope each, plus an expired
and a revoked one with every scope.
"""

from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, settings

from quotas import actions
from quotas.models import QuotaRequest
from tenants.models import Membership

from ..builders import make_flavor, make_team
from ..support.api import caller_clients, issue_token

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests"


def body(**overrides):
    today = timezone.localdate()
    data = {
        "team": "vision", "flavor": "h100", "gpus": 8, "borrowing_limit_gpus": None,
        "starts_on": today.isoformat(), "ends_on": (today + timedelta(days=30)).isoformat(),
        "justification": "Paper deadline: ViT-L runs.",
    }
    data.update(overrides)
    return data


def file_request(team, user, flavor, **fields):
    today = timezone.localdate()
    defaults = dict(gpus=8, starts_on=today, ends_on=today + timedelta(days=30), justification="Deadline.")
    defaults.update(fields)
    return QuotaRequest.objects.submit(team=team, requested_by=user, flavor=flavor, **defaults)


@pytest.fixture
def pending(team, flavor, owner):
    """A pending request of the vision team, filed by its owner."""
    return file_request(team, owner, flavor)


@pytest.fixture
def as_caller(request, client_as, team, owner):
    return caller_clients(request, client_as, team, owner)


# --- the permission matrix -------------------------------------------------------------------
CALLERS = [
    "anonymous", "outsider", "viewer", "member", "owner", "quota_manager",
    "token_read", "token_submit", "token_cancel", "token_expired", "token_revoked",
]
#          anon outsider viewer member owner qm   read submit cancel expired revoked
READ_ANY = [401, 200,     200,   200,   200,  200, 200, 403,   403,   401,    401]
READ_TEAM = [401, 404,    200,   200,   200,  200, 200, 403,   403,   401,    401]
# Deciding stays in the console: no writes on a request, whoever asks (a token too: 405, not 403).
NO_WRITES = [401, 405,    405,   405,   405,  405, 405, 405,   405,   401,    401]
ENDPOINTS = {
    "list requests": ("get", URL, READ_ANY),
    "retrieve a request": ("get", URL + "/{pk}", READ_TEAM),
    # An outsider cannot name the team: 400, as for a team that does not exist. A quota
    # manager is in no team, so is no owner. The tokens are the owner's.
    "ask for a change": ("post", URL, [401, 400, 403, 403, 201, 403, 403, 201, 403, 401, 401]),
    "approve by PATCH": ("patch", URL + "/{pk}", NO_WRITES),
    "replace by PUT": ("put", URL + "/{pk}", NO_WRITES),
    "withdraw by DELETE": ("delete", URL + "/{pk}", NO_WRITES),
    "approve action": ("post", URL + "/{pk}/approve", [404] * len(CALLERS)),
    "deny action": ("post", URL + "/{pk}/deny", [404] * len(CALLERS)),
}
CASES = [
    pytest.param(endpoint, caller, expected[i], id=f"{endpoint} as {caller} is {expected[i]}")
    for endpoint, (_m, _u, expected) in ENDPOINTS.items()
    for i, caller in enumerate(CALLERS)
]


@pytest.mark.parametrize("endpoint, caller, expected", CASES)
def test_each_caller_gets_the_expected_answer(endpoint, caller, expected, as_caller, pending, owner):
    method, url, _ = ENDPOINTS[endpoint]
    url = url.format(pk=pending.pk)
    payload = body() if method == "post" else {"status": "approved", "decision_reason": "ok", **body()}
    before = QuotaRequest.objects.count()

    client = as_caller(caller)
    response = client.get(url) if method == "get" else getattr(client, method)(url, payload, format="json")

    assert response.status_code == expected, response.content
    if expected >= 400:
        assert set(response.json()) == {"code", "message", "fields"}
    pending.refresh_from_db()
    # What was refused changed nothing; what was allowed did its one thing.
    assert QuotaRequest.objects.count() == before + (expected == 201)
    assert (pending.status, pending.decided_by, pending.gpus) == ("pending", None, 8)
    if expected == 201:
        created = QuotaRequest.objects.get(pk=response.json()["id"])
        assert (created.team.slug, created.requested_by, created.status) == ("vision", owner, "pending")
    if expected == 200 and method == "get":
        data = response.json()
        ids = [r["id"] for r in data["results"]] if "results" in data else [data["id"]]
        # The outsider's list holds only its own team's (none here); everyone else sees it.
        assert ids == ([] if caller == "outsider" else [pending.pk])


# --- what each caller sees ------------------------------------------------------------------
@pytest.fixture
def requests_of_two_teams(team, flavor, owner, outsider):
    from tenants.models import Team

    other = Team.objects.get(slug="other-team")
    return {"vision": file_request(team, owner, flavor), "other-team": file_request(other, outsider, flavor)}


@pytest.mark.parametrize("who, teams", [
    ("outsider", ["other-team"]), ("viewer", ["vision"]), ("member", ["vision"]), ("owner", ["vision"]),
    ("quota_manager", ["other-team", "vision"]),
])
def test_each_person_lists_the_requests_of_their_teams_only(request, client_as, requests_of_two_teams, who, teams):
    results = client_as(request.getfixturevalue(who)).get(URL).json()["results"]
    assert sorted(r["team"] for r in results) == teams
    assert {r["id"] for r in results} == {requests_of_two_teams[t].pk for t in teams}


def test_outsiders_get_404_for_another_teams_request_never_403(client_as, outsider, requests_of_two_teams):
    response = client_as(outsider).get(f"{URL}/{requests_of_two_teams['vision'].pk}")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert client_as(outsider).get(f"{URL}/{requests_of_two_teams['other-team'].pk}").status_code == 200


def test_unknown_and_malformed_ids_are_404(client_as, owner, pending):
    for pk in (pending.pk + 1000, "abc", 2**70):
        response = client_as(owner).get(f"{URL}/{pk}")
        assert response.status_code == 404, pk
        assert response.json()["code"] == "not_found"


def test_a_team_token_sees_and_asks_only_for_its_team(client_as, owner, team, flavor, pending):
    nlp = make_team("nlp", members={owner: Membership.Role.OWNER})
    theirs = file_request(nlp, owner, flavor)
    client = client_as(token=issue_token(owner, team=team))
    assert [r["id"] for r in client.get(URL).json()["results"]] == [pending.pk]
    assert client.get(f"{URL}/{theirs.pk}").status_code == 404
    response = client.post(URL, body(team="nlp"), format="json")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["team"]
    assert QuotaRequest.objects.filter(team=nlp).count() == 1
    # The same person's all-teams token sees both and may ask for either.
    everything = client_as(token=issue_token(owner))
    assert {r["id"] for r in everything.get(URL).json()["results"]} == {pending.pk, theirs.pk}
    assert everything.post(URL, body(team="nlp"), format="json").status_code == 201
    assert QuotaRequest.objects.filter(team=nlp).count() == 2


def test_the_requester_reads_the_decision_its_reason_and_what_was_granted(
    client_as, owner, viewer, quota_manager, team, flavor
):
    today = timezone.localdate()
    approved = file_request(team, owner, flavor, gpus=8)
    actions.approve(approved, quota_manager, gpus=4, borrowing_limit_gpus=2, starts_on=today, ends_on=today + timedelta(days=6),
                     cpu_cores=48, memory_gib=480, reason="Half for now.")
    denied = file_request(team, owner, flavor, gpus=64)
    denied.deny(quota_manager, "The cluster has no 64 spare H100s.")

    for who in (owner, viewer):
        client = client_as(who)
        got = client.get(f"{URL}/{approved.pk}").json()
        assert (got["status"], got["decided_by"], got["decision_reason"], got["gpus"]) == (
            "approved", "quinn", "Half for now.", 8)
        assert got["decided_at"] is not None
        grant = got["grant"]
        assert (grant["gpus"], grant["borrowing_limit_gpus"], grant["cpu_cores"], grant["memory_gib"]) == (4, 2, 48, 480)
        assert grant["id"] == approved.grant.pk and grant["ends_at"] is not None
        got = client.get(f"{URL}/{denied.pk}").json()
        assert (got["status"], got["decided_by"], got["decision_reason"], got["grant"]) == (
            "denied", "quinn", "The cluster has no 64 spare H100s.", None)


# --- asking ---------------------------------------------------------------------------------
def test_an_owners_request_is_filed_pending_with_its_numbers(client_as, owner, team, flavor):
    today = timezone.localdate()
    response = client_as(owner).post(URL, body(gpus=-2, borrowing_limit_gpus=4, ends_on=None), format="json")

    assert response.status_code == 201, response.content
    data = response.json()
    created = QuotaRequest.objects.get()
    assert response["Location"].endswith(f"{URL}/{created.pk}")
    assert data == {
        "id": created.pk, "team": "vision", "flavor": "h100", "gpus": -2, "borrowing_limit_gpus": 4,
        "starts_on": today.isoformat(), "ends_on": None, "justification": "Paper deadline: ViT-L runs.",
        "renews": None, "status": "pending", "requested_by": "olivia", "created_at": data["created_at"],
        "decided_by": None, "decided_at": None, "decision_reason": "", "grant": None,
    }
    assert (created.team, created.flavor, created.requested_by, created.gpus, created.ends_on) == (team, flavor, owner, -2, None)
    # The audit trail names who asked, as for the team page.
    assert created.history.get().history_user == owner
    assert client_as(owner).get(f"{URL}/{created.pk}").json() == data


def test_the_fields_a_caller_sends_for_the_decision_are_refused_each_by_name(client_as, owner, team, flavor):
    response = client_as(owner).post(URL, {
        **body(), "status": "approved", "decided_by": "olivia", "decision_reason": "self-approved", "id": 999,
    }, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"status", "decided_by", "decision_reason", "id"}
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize("overrides, field", [
    ({"justification": ""}, "justification"),
    ({"justification": None}, "justification"),
    ({"flavor": "tpu-v9"}, "flavor"),
    ({"team": "no-such-team"}, "team"),
    ({"gpus": "eight"}, "gpus"),
    ({"gpus": 2**40}, "gpus"),
    ({"borrowing_limit_gpus": -1}, "borrowing_limit_gpus"),
    ({"starts_on": "next week"}, "starts_on"),
    ({"starts_on": "2001-01-01", "ends_on": None}, "starts_on"),  # the first day in the past
    # The model's own rules (QuotaRequest.full_clean inside QuotaRequest.objects.submit):
    ({"gpus": 0, "borrowing_limit_gpus": None}, "gpus"),
    ({"ends_on": timezone.localdate().isoformat(),
      "starts_on": (timezone.localdate() + timedelta(days=3)).isoformat()}, "ends_on"),
])
def test_invalid_requests_are_400_with_the_field_named(client_as, owner, team, flavor, overrides, field):
    data = body(**overrides)
    response = client_as(owner).post(URL, data, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid"
    assert list(response.json()["fields"]) == [field]
    assert not QuotaRequest.objects.exists()


def test_missing_fields_are_each_named(client_as, owner, team, flavor):
    response = client_as(owner).post(URL, {"team": "vision"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"flavor", "gpus", "starts_on", "justification"}


def test_a_body_that_is_not_json_is_400(client_as, owner, team, flavor):
    response = client_as(owner).post(URL, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_are_refused_whatever_the_rest_of_the_body(request, client_as, team, flavor, who):
    client = client_as(request.getfixturevalue(who))
    for data in (body(), body(gpus=0, justification="")):
        response = client.post(URL, data, format="json")
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "permission_denied"
        assert "owners of vision" in response.json()["message"]
    assert not QuotaRequest.objects.exists()


def test_an_owner_of_one_team_cannot_ask_for_another_team_it_is_a_member_of(client_as, owner, team, flavor):
    make_team("nlp", members={owner: Membership.Role.MEMBER})
    assert client_as(owner).post(URL, body(team="nlp"), format="json").status_code == 403
    assert not QuotaRequest.objects.exists()


# --- filters and pagination -----------------------------------------------------------------
@pytest.fixture
def mixed(team, flavor, owner, quota_manager):
    reqs = [file_request(team, owner, flavor, gpus=n) for n in (1, 2, 3, 4, 5)]
    reqs[1].deny(quota_manager, "No.")
    today = timezone.localdate()
    actions.approve(reqs[3], quota_manager, gpus=4, borrowing_limit_gpus=None, starts_on=today, ends_on=None,
                    cpu_cores=48, memory_gib=480)
    return reqs


@pytest.mark.parametrize("query, gpus", [
    ("", [5, 4, 3, 2, 1]),
    ("?status=pending", [5, 3, 1]),
    ("?status=approved&status=denied", [4, 2]),
    ("?team=vision&status=denied", [2]),
    ("?team=other-team", []),
])
def test_filters_by_team_and_status(client_as, quota_manager, outsider, mixed, query, gpus):
    results = client_as(quota_manager).get(URL + query).json()["results"]
    assert [r["gpus"] for r in results] == gpus


@pytest.mark.parametrize("query, field", [("?team=vision", "team"), ("?status=granted", "status")])
def test_a_filter_naming_a_team_you_cannot_see_or_an_unknown_status_is_400(client_as, outsider, mixed, query, field):
    response = client_as(outsider).get(URL + query)
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]


def test_cursor_pages_go_newest_first_without_repeats(client_as, owner, mixed):
    client = client_as(owner)
    seen, url = [], f"{URL}?page_size=2"
    while url:
        page = client.get(url).json()
        assert len(page["results"]) <= 2
        seen += [r["id"] for r in page["results"]]
        url = page["next"]
    assert seen == sorted((r.pk for r in mixed), reverse=True)


# --- the schema -----------------------------------------------------------------------------
def test_the_schema_documents_reading_and_asking_but_no_deciding(client_as):
    schema = client_as().get("/api/schema/?format=json").json()
    assert set(schema["paths"][URL]) == {"get", "post"}
    assert set(schema["paths"][URL + "/{id}"]) == {"get"}
    assert not [p for p in schema["paths"] if p.startswith(URL + "/{id}/")]
    components = schema["components"]["schemas"]
    assert components["QuotaRequestStatusEnum"]["enum"] == ["pending", "approved", "denied"]
    # The teams' status enum keeps its name (a second "status" enum renames both otherwise).
    assert components["Team"]["properties"]["status"]["allOf"] == [{"$ref": "#/components/schemas/StatusEnum"}]


# --- schemathesis with real objects and a token that may ask ---------------------------------
from .test_schema_fuzz import schema

quota_request_schema = schema.include(path_regex=r"^/api/v1/quota-requests")


@pytest.fixture
def owners_bearer(db, owner, team, flavor, quota_manager, requests_keep_the_test_connection):
    """The owner's token, with a pending, an approved and a denied request to read."""
    make_flavor("a100")
    today = timezone.localdate()
    file_request(team, owner, flavor)
    actions.approve(file_request(team, owner, flavor, gpus=2, ends_on=None), quota_manager, gpus=1, borrowing_limit_gpus=3, starts_on=today, ends_on=None, cpu_cores=12, memory_gib=120)
    file_request(team, owner, flavor, gpus=-1).deny(quota_manager, "Keep them.")
    return {"Authorization": f"Bearer {issue_token(owner)}"}


@quota_request_schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_quota_request_operations_answer_on_schema_for_an_owner(case, owners_bearer):
    if case.method == "POST" and isinstance(case.body, dict):
        # Name a team and flavor that exist, so generated numbers and dates reach the
        # model's rules (and some requests are filed) instead of stopping at "no such team".
        case.body.update({key: value for key, value in (("team", "vision"), ("flavor", "h100")) if key in case.body})
    case.call_and_validate(headers=owners_bearer)  # every check
