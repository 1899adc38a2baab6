"""Hostile input any signed-in person can send (issue 12, Medium 4 and the Low items):
every one is a 4xx in the API's error shape (or a page error), never a 500, never HTML."""

import base64
import json
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.core.exceptions import RequestDataTooBig, ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper as SqliteWrapper
from django.db.models import IntegerField
from django.test import Client
from django.utils import timezone

from core.api_errors import exception_handler
from core.validators import INT32_MAX, validate_dns1123_label, validate_env
from jobs.models import Job
from quotas.models import GpuFlavor, PriorityClass, Quota, QuotaGrant, QuotaRequest
from tenants.models import Membership

from ..builders import build_job, make_quota, make_team, make_user
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db

LISTS = ["/api/v1/jobs", "/api/v1/tokens", "/api/v1/quota-requests"]


def cursor(**parts) -> str:
    """A cursor as DRF encodes it (base64 of a query string), with whatever we put in."""
    return base64.b64encode(urlencode(parts).encode()).decode()


def assert_error_shape(response, status: int | tuple) -> dict:
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "fields"} and body["message"]
    return body


# --- tampered pagination cursors -----------------------------------------------------------------
TAMPERED = [
    cursor(p="not-a-number"),
    cursor(p=str(2**70)),
    cursor(p="-" + str(2**70)),
    cursor(p="1.5"),
    "%%%not-base64",
    cursor(p="\x00"),
]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("tampered", TAMPERED)
def test_tampered_cursor_is_a_400(client_as, member, team, job, url, tampered):
    response = client_as(member).get(url, {"cursor": tampered})
    assert_error_shape(response, (400, 404))


@pytest.mark.parametrize("url", LISTS)
def test_a_cursor_the_platform_wrote_still_pages(client_as, member, team, job, url):
    response = client_as(member).get(url, {"cursor": cursor(p=str(job.pk + 10**6), r="1", o="0")})
    assert response.status_code == 200


def test_tampered_cursor_on_a_date_ordering_is_a_400(client_as, member, team, job):
    response = client_as(member).get("/api/v1/jobs", {"ordering": "created_at", "cursor": cursor(p="yesterday")})
    assert_error_shape(response, (400, 404))


def test_huge_ids_in_the_url_are_a_404(client_as, member, job):
    response = client_as(member).get(f"/api/v1/jobs/{2**70}")
    assert_error_shape(response, 404)


# --- bodies --------------------------------------------------------------------------------------
def test_json_nested_100000_deep_is_a_400(client_as, member, team, flavor):
    deep = '{"team": "vision", "env": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = client_as(member).generic("POST", "/api/v1/jobs", deep, content_type="application/json")
    body = assert_error_shape(response, 400)
    assert body["code"] == "parse_error"


def test_oversized_json_body_gets_the_api_error_not_html(client_as, member, team, flavor, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    big = json.dumps({**JOB_BODY, "args": ["x" * 20_000]})
    response = client_as(member).generic("POST", "/api/v1/jobs", big, content_type="application/json")
    body = assert_error_shape(response, 413)
    assert body["code"] == "too_large"
    assert not Job.objects.exists()


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=b"])
def test_oversized_form_body_gets_the_api_error_not_html(client_as, member, team, flavor, settings, content_type):
    # Django refuses big form bodies with its HTML 400 page; the API takes JSON only and
    # answers anything else before reading it.
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = urlencode({**JOB_BODY, "image": "x" * 20_000})
    response = client_as(member).generic("POST", "/api/v1/jobs", body, content_type=content_type)
    assert assert_error_shape(response, (413, 415))["code"] in ("too_large", "unsupported_media_type")
    assert not Job.objects.exists()


def test_djangos_own_body_limit_becomes_the_api_error_not_html():
    response = exception_handler(RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE."), {})
    assert response.status_code == 413
    assert response.data == {"code": "too_large", "message": "The request body is too large.", "fields": {}}


# --- numbers without bounds ------------------------------------------------------------------------
@pytest.fixture
def sqlite_integer_ranges(monkeypatch):
    """Validate as on SQLite, whose columns take any 64-bit integer: Django then adds no
    range of its own, so only the bounds the fields declare hold."""
    monkeypatch.setattr(connection.ops, "integer_field_range",
                        lambda internal_type: SqliteWrapper.ops_class.integer_field_range(None, internal_type))
    fields = [f for model in apps.get_models() for f in model._meta.concrete_fields if isinstance(f, IntegerField)]

    def forget_cached_validators():
        for field in fields:
            field.__dict__.pop("validators", None)

    forget_cached_validators()
    yield
    forget_cached_validators()


def test_max_replicas_2_to_the_63_is_a_400_on_sqlite_too(client_as, client_for, member, quota_manager, team, flavor,
                                                          sqlite_integer_ranges, settings, tmp_path):
    inference = {**JOB_BODY, "kind": "inference", "workers": 1, "gpus_per_worker": 1, "port": 8000,
                 "min_replicas": 1, "max_replicas": 2**63 - 1}
    response = client_as(member).post("/api/v1/jobs", inference, format="json")
    body = assert_error_shape(response, 400)
    assert body["fields"]["max_replicas"] == ["Ensure this value is less than or equal to 512."]
    assert not Job.objects.exists()
    settings.KUBECONFIG = str(tmp_path / "missing")
    assert client_for(quota_manager).get("/quotas/console/").status_code == 200


BOUNDED_MODELS = [Job, GpuFlavor, Quota, QuotaRequest, QuotaGrant, PriorityClass]


@pytest.mark.parametrize("model", BOUNDED_MODELS, ids=lambda m: m.__name__)
def test_every_number_declares_bounds_that_fit_an_int32_whatever_the_database(model):
    for field in model._meta.concrete_fields:
        if not isinstance(field, IntegerField) or field.primary_key or field.is_relation:
            continue
        lows = [v.limit_value for v in field._validators if isinstance(v, MinValueValidator)]
        highs = [v.limit_value for v in field._validators if isinstance(v, MaxValueValidator)]
        assert lows and highs, f"{model.__name__}.{field.name} has no bounds of its own"
        assert -INT32_MAX - 1 <= min(lows) and max(highs) <= INT32_MAX, f"{model.__name__}.{field.name}"


@pytest.mark.parametrize("field, value", [
    ("max_replicas", 2**63 - 1), ("min_replicas", 2**31), ("port", 2**63 - 1),
    ("readiness_initial_delay_seconds", 2**31), ("max_replicas", 100_000), ("model_load_seconds", 2**31),
    ("model_load_seconds", 10),
])
def test_an_inference_number_out_of_range_is_a_400_with_the_field(client_as, member, team, flavor, field, value):
    inference = {**JOB_BODY, "kind": "inference", "workers": 1, "gpus_per_worker": 1, "port": 8000,
                 "min_replicas": 1, "max_replicas": 2, field: value}
    response = client_as(member).post("/api/v1/jobs", inference, format="json")
    body = assert_error_shape(response, 400)
    assert field in body["fields"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("field, value", [
    ("workers", 2**63 - 1), ("workers", 100_000), ("gpus_per_worker", 2**40), ("memory_per_worker_gib", 2**31),
    ("memory_per_worker_gib", 1_000_000), ("max_runtime_seconds", 2**31), ("cpu_per_worker", "9999.99"),
])
def test_a_training_number_out_of_range_is_a_400_with_the_field(client_as, member, team, flavor, field, value):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, field: value}, format="json")
    body = assert_error_shape(response, 400)
    assert field in body["fields"]


def test_a_quota_request_for_2_to_the_63_gpus_is_a_400(client_as, owner, team, flavor):
    request = {"team": "vision", "flavor": "h100", "gpus": 2**63 - 1, "borrowing_limit_gpus": 2**63 - 1,
               "starts_on": timezone.localdate().isoformat(), "justification": "All of them."}
    response = client_as(owner).post("/api/v1/quota-requests", request, format="json")
    body = assert_error_shape(response, 400)
    assert {"gpus", "borrowing_limit_gpus"} <= set(body["fields"])


# --- names: DNS-1035 for Services, no trailing newline ---------------------------------------------
@pytest.mark.parametrize("name", ["1train", "9", "0-serve"])
def test_a_job_name_starting_with_a_digit_is_refused_because_services_are_named_after_it(
        client_as, member, team, flavor, name):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "name": name}, format="json")
    body = assert_error_shape(response, 400)
    assert "starting with a letter" in body["fields"]["name"][0]


def test_a_job_name_ending_in_a_newline_is_refused(team, flavor):
    # Forms and serializers strip whitespace; the model's own rule must not need them to.
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, name="train\n").full_clean()
    assert "name" in err.value.message_dict


def test_an_env_name_ending_in_a_newline_is_refused(client_as, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "env": {"EPOCHS\n": "3"}}, format="json")
    assert "env" in assert_error_shape(response, 400)["fields"]


@pytest.mark.parametrize("check, value", [
    (validate_dns1123_label, "vision\n"), (validate_env, {"PATH\n": "x"}),
])
def test_validators_match_the_whole_value_not_up_to_a_newline(check, value):
    with pytest.raises(ValidationError):
        check(value)


# --- a job that can never run ------------------------------------------------------------------------
def test_a_job_that_can_never_run_says_so_in_the_201(client_as, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", JOB_BODY, format="json")  # no quota on h100
    assert response.status_code == 201
    assert response.json()["feasibility"] == {
        "verdict": "never", "message": "Can never run: team vision has no quota on h100.",
        "kueue_reason": "", "kueue_message": "",  # Kueue has not looked at it yet: the verdict is the platform's
        "waits_for": [], "room_by": None}


def test_a_job_that_fits_says_it_starts_now(client_as, member, team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    response = client_as(member).post("/api/v1/jobs", JOB_BODY, format="json")
    assert response.status_code == 201
    assert response.json()["feasibility"]["verdict"] == "now"


# --- enumeration, caching --------------------------------------------------------------------------
def test_usernames_cannot_be_enumerated_through_the_submitter_filter(client_as, member, team, job):
    stranger = make_user("stranger")
    make_team("secret-team", members={stranger: Membership.Role.OWNER})
    client = client_as(member)
    known = client.get("/api/v1/jobs", {"submitter": "stranger"})
    unknown = client.get("/api/v1/jobs", {"submitter": "nobody-at-all"})
    assert known.status_code == unknown.status_code == 200
    assert known.json()["results"] == unknown.json()["results"] == []
    # The filter still works on people whose jobs you can see.
    assert [j["id"] for j in client.get("/api/v1/jobs", {"submitter": "max"}).json()["results"]] == [job.pk]


def test_usernames_cannot_be_enumerated_through_the_job_list_page(client_for, member, team, job):
    stranger = make_user("stranger")
    make_team("secret-team", members={stranger: Membership.Role.OWNER})
    client = client_for(member)
    table = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "job-table"}
    known = client.get("/jobs/", {"submitter": "stranger"}, **table)
    unknown = client.get("/jobs/", {"submitter": "nobody-at-all"}, **table)
    assert known.status_code == unknown.status_code == 200
    assert known.content.replace(b"stranger", b"nobody-at-all") == unknown.content


def test_a_response_carrying_a_new_token_is_not_cacheable(client_as, member, team):
    response = client_as(member).post("/api/v1/tokens", {"name": "ci"}, format="json")
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    assert "private" in response["Cache-Control"]


# --- accounting pages: months and teams ------------------------------------------------------------
NONSENSE_MONTHS = ["9999-12", "0001-01", "2026-13", "2026-00", "abcd-ef", "99999-01", "2026-1-1", "\x00"]


@pytest.mark.parametrize("month", NONSENSE_MONTHS)
def test_a_nonsense_month_on_the_usage_page_is_a_page_error(client_for, member, team, month):
    response = client_for(member).get("/quotas/usage/", {"month": month})
    assert response.status_code == 400
    assert b"is not a month" in response.content


@pytest.mark.parametrize("month", NONSENSE_MONTHS)
def test_a_nonsense_month_on_usage_csv_is_a_400(client_for, member, team, month):
    response = client_for(member).get("/quotas/usage.csv", {"month": month})
    assert response.status_code == 400
    assert not response.has_header("Content-Disposition")


@pytest.mark.parametrize("slug", ["vision\r\nSet-Cookie: x=1", "vision\nX: y", 'a"; filename="evil.sh', "\x00", "é" * 3])
def test_odd_characters_in_the_usage_csv_team_are_a_400_and_never_reach_a_header(client_for, member, team, slug):
    response = client_for(member).get("/quotas/usage.csv", {"team": slug})
    assert response.status_code == 400
    assert not response.has_header("Content-Disposition")
    assert not response.has_header("X") and "x=1" not in str(response.cookies)


def test_the_usage_csv_of_a_team_still_names_the_file_after_it(client_for, member, team):
    response = client_for(member).get("/quotas/usage.csv", {"team": "vision", "month": "2026-11"})
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="gpu-usage-2026-11-vision.csv"'


def test_odd_characters_in_the_usage_page_team_are_a_page_error(client_for, member, team):
    response = client_for(member).get("/quotas/usage/", {"team": "vision\x00"})
    assert response.status_code == 400


def test_the_anonymous_cannot_reach_the_usage_csv(db):
    assert Client().get("/quotas/usage.csv", {"month": "9999-12"}).status_code == 302
