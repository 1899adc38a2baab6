"""The schema says what the API does (issue 52, item 3): every status an operation's code
gives and every header it sets are declared, read from the code (``core.api_answers``); a
query parameter the schema does not declare, or an empty filter, is a 400 in the error shape;
names carry the pattern their validators hold them to.

schemathesis checks the answers it provokes against the schema (test_schema_fuzz.py); these
name the cases users met, and hold each derived declaration to a request that gives it."""

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from cluster.names import DNS1035_LABEL, DNS1123_LABEL
from core.api_answers import of_operation
from core.api_errors import ERROR_DESCRIPTIONS
from core.api_query import operations
from core.validators import validate_dns1035_label, validate_dns1123_label
from jobs.models import Volume

from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def responses(schema, method: str, path: str) -> dict:
    return schema["paths"][path][method]["responses"]


def error_shape(answer, field: str) -> list[str]:
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert set(body) == {"code", "message", "fields"} and body["code"] == "invalid"
    return body["fields"][field]


# --- statuses and headers ------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path", "code"), [
    ("delete", "/api/v1/volumes/{id}", "409"),  # a volume a live job mounts
    ("post", "/api/v1/drains/{id}/end", "409"),
    ("post", "/api/v1/jobs", "409"),  # an Idempotency-Key reused, a live name raced
    ("get", "/api/v1/jobs/{id}/logs", "503"),  # no cluster, or it cannot be reached
])
def test_a_status_the_code_gives_is_in_the_schema_with_the_error_shape(schema, method, path, code):
    answer = responses(schema, method, path)[code]
    assert answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_every_operation_declares_the_errors_every_view_may_give_and_retry_after_on_429(schema):
    for item in schema["paths"].values():
        for operation in item.values():
            assert set(ERROR_DESCRIPTIONS) <= set(operation["responses"]), operation["operationId"]
            assert "Retry-After" in operation["responses"]["429"]["headers"]
            assert "Allow" in operation["responses"]["405"]["headers"]


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/api/v1/quota-requests", "/api/v1/quota-grants/{id}/renew"])
def test_a_201_that_sends_location_declares_it(schema, path):
    assert "Location" in responses(schema, "post", path)["201"]["headers"]


def test_every_status_read_from_a_views_code_is_declared_for_its_operation(schema):
    """Over every route: what ``core.api_answers`` finds in the code is in the schema (a view
    whose code the reading misses would show here as a found status the schema lacks)."""
    generator = SchemaGenerator()
    generator._initialise_endpoints()
    checked = 0
    for path, _, method, view in generator.endpoints:
        path = path.replace("{pk}", "{id}")  # as the schema names it (SCHEMA_COERCE_PATH_PK)
        if path not in schema["paths"]:
            continue  # the schema and its docs page, which the schema leaves out
        view = generator.create_view(view, method)
        found = of_operation(view, method)
        declared = responses(schema, method.lower(), path)
        assert {str(code) for code in found.statuses} <= set(declared), (method, path)
        for code, names in found.headers.items():
            assert names <= set(declared[str(code)].get("headers", {})), (method, path, code)
        checked += 1
    assert checked == sum(len(item) for item in schema["paths"].values())


def test_deleting_a_mounted_volume_answers_the_declared_409(client_as, owner, member, team, flavor, schema,
                                                            monkeypatch):
    from quotas.models import StorageQuota

    monkeypatch.setattr("jobs.actions.enqueue", lambda *args: None)
    StorageQuota.objects.create(team=team, storage_class="standard", storage_gib=100, volumes=3)
    volume = Volume.objects.add(team=team, user=owner, name="model-cache", storage_class="standard", size_gib=5)
    job = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "workers": 1, "volumes": {"model-cache": "/m"}})
    assert job.status_code == 201 and job["Location"].endswith(f"/api/v1/jobs/{job.json()['id']}")

    refused = client_as(owner).delete(f"/api/v1/volumes/{volume.pk}")

    assert refused.status_code == 409 and refused.json()["code"] == "conflict"
    assert str(refused.status_code) in responses(schema, "delete", "/api/v1/volumes/{id}")


# --- query parameters ----------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "misspelt"), [
    ("/api/v1/jobs?stat=failed", "stat"),  # a misspelt filter once answered the whole list
    ("/api/v1/jobs?team=vision&teams=vision", "teams"),
    ("/api/v1/volumes?tema=vision", "tema"),
    ("/api/v1/teams/vision?status=active", "status"),  # a list's filter is no parameter of one team
    ("/api/v1/me?verbose=1", "verbose"),
    ("/api/v1/drains?flavour=h100", "flavour"),
])
def test_a_query_parameter_the_schema_does_not_declare_is_refused(client_as, member, team, flavor, url, misspelt):
    messages = error_shape(client_as(member).get(url), misspelt)
    assert messages[0].startswith("Not a query parameter of this operation")


def test_the_parameters_the_schema_declares_are_taken(client_as, member, team, flavor, job):
    api = client_as(member)
    listed = api.get("/api/v1/jobs?team=vision&state=submitted&state=queued&kind=training&page_size=5&ordering=id")
    assert listed.status_code == 200 and [row["id"] for row in listed.json()["results"]] == [job.pk]
    assert api.get("/api/v1/volumes?team=vision&storage_class=standard").status_code == 200


def test_what_the_api_refuses_is_what_the_schema_leaves_out(schema):
    """The check reads the schema: each operation takes exactly its declared parameters."""
    taken = {(pattern.pattern, method): names for pattern, by_method in operations() for method, names in by_method.items()}
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            key = next(key for key in taken if re.fullmatch(key[0], path.replace("{", "x").replace("}", "x"))
                       and key[1] == method.upper())
            assert taken[key] == declared, (method, path)


@pytest.mark.parametrize(("url", "field"), [
    ("/api/v1/jobs?team=", "team"), ("/api/v1/jobs?flavor=", "flavor"), ("/api/v1/jobs?state=", "state"),
    ("/api/v1/jobs?q=", "q"), ("/api/v1/volumes?team=", "team"), ("/api/v1/drains?flavor=", "flavor"),
])
def test_an_empty_filter_is_refused_as_the_schema_says(client_as, member, team, flavor, schema, url, field):
    assert error_shape(client_as(member).get(url), field) == ["Give a value, or leave the filter out."]
    path = url.split("?")[0]
    parameter = next(p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == field)
    accepts_empty = parameter["schema"].get("minLength", 0) == 0 and "enum" not in parameter["schema"] \
        and "items" not in parameter["schema"]
    assert not accepts_empty


# --- names ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("component", "field", "validator", "regex"), [
    ("JobRequest", "name", validate_dns1035_label, DNS1035_LABEL),
    ("VolumeRequest", "name", validate_dns1123_label, DNS1123_LABEL),
    ("VolumeRequest", "team", validate_dns1123_label, DNS1123_LABEL),
])
def test_a_name_carries_the_pattern_its_validator_holds_it_to(schema, component, field, validator, regex):
    pattern = schema["components"]["schemas"][component]["properties"][field]["pattern"]
    assert validator.regex is regex and regex.pattern in pattern
    ecmascript = re.compile(pattern.replace("$", r"\Z"))  # ECMAScript's $ ends the text; Python's \Z
    for value in ("resnet50", "a-b", "Resnet", "-a", "a-", "a_b", "a\n", "", "9lives"):
        assert bool(ecmascript.search(value)) == bool(regex.fullmatch(value)), value


@pytest.mark.parametrize("ordering", ["", "name", "id,created_at", "-id&ordering=id"])
def test_an_ordering_the_schema_does_not_list_is_refused(client_as, member, team, schema, ordering):
    assert error_shape(client_as(member).get(f"/api/v1/jobs?ordering={ordering}"), "ordering")
    parameter = next(p for p in schema["paths"]["/api/v1/jobs"]["get"]["parameters"] if p["name"] == "ordering")
    assert parameter["schema"]["enum"] == ["id", "-id", "created_at", "-created_at"]
