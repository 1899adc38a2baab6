"""The API does what its schema and docs say: each case here was found by an outside tool
(schemathesis over /api/schema/, gpuctl as CI uses it) and answered wrongly before."""

import base64
import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from notifications.models import Webhook
from quotas.models import Cohort, MemberCap, QuotaGrant
from tenants.models.identities import GroupMapping
from tenants.tokens import ApiToken

from ..builders import make_job, make_quota
from ..support.api import JOB_BODY, issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def cursor(position: str) -> str:
    return base64.b64encode(urlencode({"o": 0, "r": 0, "p": position}).encode()).decode()


# --- lists ------------------------------------------------------------------------------------
def test_quota_managers_list_group_mappings(client_as, quota_manager, team):
    GroupMapping.objects.create(group="ml-owners", role=GroupMapping.Role.OWNER, team=team)
    response = client_as(quota_manager).get("/api/v1/group-mappings")
    assert response.status_code == 200
    assert [m["group"] for m in response.json()["results"]] == ["ml-owners"]


@pytest.mark.parametrize("url", ["/api/v1/webhooks", "/api/v1/group-mappings", "/api/v1/jobs", "/api/v1/tokens",
                                 "/api/v1/quota-requests", "/api/v1/quota-grants", "/api/v1/member-caps",
                                 "/api/v1/volumes"])
def test_a_tampered_cursor_is_a_404_in_the_error_shape_on_every_list_by_id(client_as, owner, quota_manager, team, url):
    client = client_as(quota_manager if "group" in url else owner)
    for position in ["not-a-number", "99999999999999999999999", "\x00"]:
        response = client.get(url, {"cursor": cursor(position)})
        assert response.status_code == 404, (url, position)
        assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("value", ["0", "-1", "201", "ten", "", "1.5"])
def test_an_invalid_page_size_is_a_400_on_page_size(client_as, member, team, value):
    response = client_as(member).get("/api/v1/jobs", {"page_size": value})
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["page_size"]


def test_a_valid_page_size_is_honoured_and_the_schema_states_its_bounds(client_as, member, team, job, schema):
    assert len(client_as(member).get("/api/v1/jobs", {"page_size": 1}).json()["results"]) == 1
    parameter = next(p for p in schema["paths"]["/api/v1/jobs"]["get"]["parameters"] if p["name"] == "page_size")
    assert parameter["schema"] == {"type": "integer", "minimum": 1, "maximum": 200}


@pytest.mark.parametrize("query", ["state=", "kind=", "status="])
def test_an_empty_choice_filter_is_a_400_not_an_unfiltered_list(client_as, member, team, query):
    url = "/api/v1/teams" if query == "status=" else "/api/v1/jobs"
    response = client_as(member).get(f"{url}?{query}")
    assert response.status_code == 400 and list(response.json()["fields"]) == [query.rstrip("=")]


# --- what the schema says of values -----------------------------------------------------------
def test_a_quota_without_a_cohort_reads_null_and_the_schema_allows_it(client_as, member, team, flavor, schema):
    make_quota(team, flavor)
    quota = client_as(member).get("/api/v1/teams/vision").json()["quotas"][0]
    assert quota["cohort"] is None
    assert schema["components"]["schemas"]["Quota"]["properties"]["cohort"]["nullable"] is True


def test_a_quota_in_a_cohort_names_it(client_as, member, team, flavor):
    make_quota(team, flavor, cohort=Cohort.objects.create(name="research"))
    assert client_as(member).get("/api/v1/teams/vision").json()["quotas"][0]["cohort"] == "research"


@pytest.mark.parametrize("value", ["", "-1", "0", "0.05", "1025", "1e2", "01", True, None, [4],
                                   -1.7819344125417613e+308, 10**400])  # too large to round: once a 500
def test_cpu_per_worker_refuses_what_its_schema_refuses(client_as, member, team, flavor, value):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "cpu_per_worker": value}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["cpu_per_worker"]


@pytest.mark.parametrize("value, stored", [(4, "4.00"), (0.5, "0.50"), ("0.1", "0.10"), ("1024", "1024.00"),
                                           ("2.345", "2.35"), (16.25, "16.25")])
def test_cpu_per_worker_takes_a_number_or_a_decimal_string(client_as, member, team, flavor, value, stored):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "cpu_per_worker": value}, format="json")
    assert response.status_code == 201 and response.json()["cpu_per_worker"] == stored


def test_the_schema_of_cpu_per_worker_is_its_bounds(schema):
    import re

    request = schema["components"]["schemas"]["JobRequest"]["properties"]["cpu_per_worker"]
    number, string = request["oneOf"]
    assert (number["minimum"], number["maximum"]) == (0.1, 1024)
    for text, ok in [("0.1", True), ("1024", True), ("1024.5", False), ("", False), ("-1", False), ("0.09", False)]:
        assert bool(re.fullmatch(string["pattern"], text)) == ok, text


def test_an_empty_patch_of_a_preference_changes_nothing_and_is_200(client_as, member):
    client = client_as(member)
    before = client.get("/api/v1/notification-preferences").json()
    response = client.patch("/api/v1/notification-preferences/job.started", {}, format="json")
    assert response.status_code == 200 and response.json()["kind"] == "job.started"
    assert client.get("/api/v1/notification-preferences").json() == before


@pytest.mark.parametrize("scopes", [[], ["admin"], "read"])
def test_a_token_needs_at_least_one_known_scope(client_as, member, team, scopes):
    response = client_as(member).post("/api/v1/tokens", {"name": "ci", "scopes": scopes}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["scopes"]
    assert not ApiToken.objects.exists()


def test_the_schema_says_scopes_may_not_be_empty(schema):
    assert schema["components"]["schemas"]["TokenCreateRequest"]["properties"]["scopes"]["minItems"] == 1


def test_a_bad_job_name_says_its_real_limit(client_as, member, team, flavor):
    too_long = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "name": "a" * 41}, format="json").json()
    assert too_long["fields"]["name"] == ["Ensure this field has no more than 40 characters."]
    bad = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "name": "0-starts-with-a-digit"}, format="json").json()
    assert "63" not in " ".join(bad["fields"]["name"]) and "starting with a letter" in bad["fields"]["name"][0]


# --- methods and authentication ---------------------------------------------------------------
@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_writes_a_job_has_no_endpoint_for_are_405_for_tokens_and_sessions(client_as, member, team, job, method):
    for client in (client_as(token=issue_token(member)), client_as(member)):
        response = getattr(client, method)(f"/api/v1/jobs/{job.pk}", {}, format="json")
        assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


SESSION_ONLY = {
    ("GET", "/api/v1/tokens"), ("POST", "/api/v1/tokens"), ("GET", "/api/v1/tokens/{id}"),
    ("DELETE", "/api/v1/tokens/{id}"), ("PATCH", "/api/v1/notification-preferences/{kind}"),
    ("POST", "/api/v1/webhooks"), ("PATCH", "/api/v1/webhooks/{id}"), ("DELETE", "/api/v1/webhooks/{id}"),
    ("POST", "/api/v1/webhooks/{id}/deliveries/{delivery_id}/resend"), ("POST", "/api/v1/group-mappings"),
    ("DELETE", "/api/v1/group-mappings/{id}"), ("POST", "/api/v1/webhooks/{id}/rotate-secret"),
    ("POST", "/api/v1/member-caps"), ("PATCH", "/api/v1/member-caps/{id}"), ("DELETE", "/api/v1/member-caps/{id}"),
    ("POST", "/api/v1/drains"), ("POST", "/api/v1/drains/{id}/end"),
    ("POST", "/api/v1/volumes"), ("DELETE", "/api/v1/volumes/{id}"),
}


def test_the_schema_offers_bearer_tokens_only_where_a_token_is_taken(schema):
    with_token = {(method, path) for method, path, operation in operations(schema)
                  if {"bearerAuth": []} in operation.get("security", [])}
    every = {(method, path) for method, path, _ in operations(schema)}
    assert every - with_token == SESSION_ONLY | {("GET", "/api/v1/ping")}


@pytest.mark.parametrize("method, path", sorted(SESSION_ONLY))
def test_a_token_is_refused_where_the_schema_offers_none(client_as, owner, team, method, path):
    client = client_as(token=issue_token(owner))
    url = path.replace("{id}", "1").replace("{kind}", "job.started").replace("{delivery_id}", "1")
    response = client.generic(method, url, "{}", content_type="application/json")
    assert response.status_code == 403, (method, path)


# --- unknown fields ---------------------------------------------------------------------------
def writable_bodies(team, flavor, hook):
    """A valid body of every API operation that reads one (the schema lists them all)."""
    return {
        ("POST", "/api/v1/jobs"): ("/api/v1/jobs", JOB_BODY),
        ("POST", "/api/v1/jobs/dry-run"): ("/api/v1/jobs/dry-run", JOB_BODY),
        ("POST", "/api/v1/tokens"): ("/api/v1/tokens", {"name": "ci"}),
        ("POST", "/api/v1/quota-requests"): ("/api/v1/quota-requests", {
            "team": "vision", "flavor": "h100", "gpus": 8, "starts_on": "2099-01-01", "justification": "x"}),
        ("POST", "/api/v1/webhooks"): ("/api/v1/webhooks", {"team": "vision", "url": "http://127.0.0.1:9/x",
                                                             "kinds": ["job.failed"]}),
        ("PATCH", "/api/v1/webhooks/{id}"): (f"/api/v1/webhooks/{hook.pk}", {"is_active": False}),
        ("POST", "/api/v1/webhooks/{id}/rotate-secret"): (f"/api/v1/webhooks/{hook.pk}/rotate-secret",
                                                          {"keep_previous": True}),
        ("PATCH", "/api/v1/notification-preferences/{kind}"): ("/api/v1/notification-preferences/job.started",
                                                                {"email": True}),
        ("POST", "/api/v1/group-mappings"): ("/api/v1/group-mappings", {"group": "g", "role": "member",
                                                                         "team": "vision"}),
        ("POST", "/api/v1/jobs/{id}/exempt-idle"): (f"/api/v1/jobs/{make_job(team, flavor).pk}/exempt-idle",
                                                    {"reason": "a dataset copy"}),
        ("POST", "/api/v1/quota-grants/{id}/renew"): (f"/api/v1/quota-grants/{a_grant(team, flavor).pk}/renew",
                                                      {"ends_on": "2099-01-01", "justification": "x"}),
        ("POST", "/api/v1/member-caps"): ("/api/v1/member-caps", {"team": "vision", "flavor": "h100", "max_gpus": 8}),
        ("PATCH", "/api/v1/member-caps/{id}"): (f"/api/v1/member-caps/{a_cap(team, flavor).pk}", {"max_gpus": 4}),
        ("POST", "/api/v1/drains"): ("/api/v1/drains", {"flavor": "h100", "deadline": "2099-01-01T00:00:00Z",
                                                         "reopens_at": "2099-01-02T00:00:00Z", "reason": "x"}),
        ("POST", "/api/v1/volumes"): ("/api/v1/volumes", {"team": "vision", "name": "data", "storage_class": "standard",
                                                           "size_gib": 1}),
    }


def a_cap(team, flavor) -> MemberCap:
    return MemberCap.objects.create(team=team, flavor=flavor, user=None, max_gpus=8)


def a_grant(team, flavor) -> QuotaGrant:
    now = timezone.now()
    return QuotaGrant.objects.add(QuotaGrant(team=team, flavor=flavor, gpus=2, cpu_cores=8, memory_gib=64,
                                             starts_at=now, ends_at=now + timedelta(days=30)))


@pytest.fixture
def hook(team, owner, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return Webhook.objects.create(team=team, url="http://127.0.0.1:9/hook", kinds=["job.failed"], created_by=owner)


def test_every_operation_with_a_body_refuses_unknown_and_read_only_fields_by_name(
    client_as, owner, quota_manager, team, flavor, hook, schema
):
    owner.groups.add(*quota_manager.groups.all())  # the owner may map groups too
    bodies = writable_bodies(team, flavor, hook)
    with_body = {(method, path) for method, path, operation in operations(schema) if "requestBody" in operation}
    assert with_body == set(bodies), "a new operation with a body: add a valid body above"
    client = client_as(owner)
    for (method, path), (url, body) in bodies.items():
        sent = {**body, "gpu_memory_mib": 80, "id": 7}
        response = client.generic(method, url, json.dumps(sent), content_type="application/json")
        assert response.status_code == 400, (method, path, response.content)
        fields = response.json()["fields"]
        assert fields["gpu_memory_mib"] == ["Unknown field: this request does not take it."], (method, path)
        assert "id" in fields, (method, path)
        ref = schema["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["additionalProperties"] is False


def test_a_job_body_with_a_misspelt_field_creates_nothing(client_as, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "gpus_per_workers": 4}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["gpus_per_workers"]
    assert response.json()["code"] == "invalid"
    from jobs.models import Job

    assert not Job.objects.exists()


# --- token scopes -----------------------------------------------------------------------------
def test_a_viewer_gets_a_read_token_and_cannot_ask_for_submit_or_cancel(client_as, viewer, team):
    client = client_as(viewer)
    refused = client.post("/api/v1/tokens", {"name": "ci", "team": "vision", "scopes": ["read", "submit"]},
                          format="json")
    assert refused.status_code == 400 and "submit" in refused.json()["fields"]["scopes"][0]
    created = client.post("/api/v1/tokens", {"name": "ci", "team": "vision"}, format="json")
    assert created.status_code == 201 and created.json()["scopes"] == ["read"]


def test_a_member_gets_every_scope_by_default(client_as, member, team):
    created = client_as(member).post("/api/v1/tokens", {"name": "ci", "team": "vision"}, format="json")
    assert created.json()["scopes"] == ["cancel", "read", "submit"]


def test_an_all_teams_token_may_submit_if_the_person_submits_in_some_team(client_as, viewer, team, flavor):
    from tenants.models import Membership

    from ..builders import make_team

    make_team("nlp", members={viewer: Membership.Role.MEMBER})
    response = client_as(viewer).post("/api/v1/tokens", {"name": "ci", "scopes": ["submit"]}, format="json")
    assert response.status_code == 201
    narrowed = client_as(viewer).post("/api/v1/tokens", {"name": "ci", "team": "vision", "scopes": ["submit"]},
                                      format="json")
    assert narrowed.status_code == 400
