"""Schemathesis against the served OpenAPI schema, in-process over WSGI, with every check it
has: generated requests that follow the schema and requests that break it, signed in with a
session (and its CSRF token) and with a bearer token, never answer 5xx, are accepted or
refused as the schema says, and every answer (errors included) has a status, headers,
content type and body the schema documents; and workflows that chain operations through
what their answers return (the stateful checks: a deleted resource stays gone, a created
one can be read). Deterministic (derandomized, no example database) and bounded: part of
every ``make test``, under two minutes on a busy two-core machine.

Beside schemathesis's checks, one of ours: every header an answer carries is declared for its
status (``Location`` on a 201, ``Retry-After`` on a 429), but those every HTTP answer of the
platform carries (``TRANSPORT``: content, caching and the security headers).

The one allowance: a schema cannot say which team or flavor names exist, nor the model's
rules across fields, so operations that name rows or create them may answer a valid-looking
request with 400 (``NAMES_ROWS``). Everything else is each check's default.
"""

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings

from ..builders import make_quota
from ..support.api import add_pod, issue_token

EXAMPLES = 6  # per operation, phase and mode (58 operations, 2 callers): ~1 min of CPU in all
NAMES_ROWS = [
    "GET /api/v1/jobs", "POST /api/v1/jobs", "POST /api/v1/jobs/dry-run", "GET /api/v1/quota-requests", "POST /api/v1/quota-requests",
    "POST /api/v1/webhooks", "PATCH /api/v1/webhooks/{id}", "POST /api/v1/tokens", "POST /api/v1/group-mappings",
    "GET /api/v1/quota-grants", "POST /api/v1/quota-grants/{id}/renew", "POST /api/v1/member-caps",
    "GET /api/v1/member-caps", "GET /api/v1/volumes", "POST /api/v1/volumes", "GET /api/v1/drains",
    "POST /api/v1/drains",
]
CONFIG = schemathesis.Config.from_dict({
    "generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True,
                   # Credentials come from the test (below), never generated.
                   "with-security-parameters": False},
    "operations": [{"include-name": name, "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429"]}}} for name in NAMES_ROWS],
})
CSRF = "c" * 32
# What every answer carries, whatever the operation: HTTP's own and the security middleware's
# (Allow: DRF's, on every answer of an API view; declared where it is the point, on a 405).
TRANSPORT = {"content-type", "content-length", "vary", "allow", "x-frame-options", "content-security-policy",
             "x-content-type-options", "referrer-policy", "cross-origin-opener-policy", "set-cookie",
             "cache-control", "expires", "strict-transport-security", "date", "server"}
STATEFUL_EXAMPLES = 6
SET_BY_THE_TEST = "set-by-the-test"

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application(), config=CONFIG)


@schemathesis.check
def headers_are_declared(ctx, response, case):
    """Every header of the answer, but ``TRANSPORT``, is declared for its status."""
    definition = case.operation.responses.find_by_status_code(response.status_code)
    declared = {name.lower() for name, _ in (definition.headers.items() if definition else [])}
    undeclared = sorted(set(response.headers) - TRANSPORT - declared)
    if undeclared:
        raise AssertionError(f"{case.operation.label} answered {response.status_code} with headers its schema does "
                             f"not declare: {', '.join(undeclared)}")


class Credentials:
    """Every case carries credentials (so schemathesis's authentication checks know them and
    take them out to see the request refused). Some cases are built before any test runs,
    so their values are put in by the test that sends them (``caller``)."""

    def get(self, case, context):
        return SET_BY_THE_TEST

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": data}
        case.cookies = {**(case.cookies or {}), "sessionid": data}


@pytest.fixture(params=["session", "token"])
def caller(request, db, owner, team, flavor, job, fake, requests_keep_the_test_connection):
    """The team's owner (every operation but the quota managers' is open to her), with a
    quota, a job with a pod and its log; signed in or with a token of every scope."""
    from django.test import Client

    make_quota(team, flavor)
    add_pod(fake, job, "existing-1-0", "epoch 1\n")
    if request.param == "token":
        headers, cookies = {"Authorization": f"Bearer {issue_token(owner)}"}, {}
    else:
        client = Client()
        client.force_login(owner)
        headers, cookies = {"X-CSRFToken": CSRF}, {"sessionid": client.cookies["sessionid"].value, "csrftoken": CSRF}

    def sign(case):
        """The case as this caller sends it: its session cookie (and CSRF token) or its token."""
        case.headers = {key: value for key, value in (case.headers or {}).items()
                        if key not in ("Authorization", "X-CSRFToken")} | headers
        case.cookies = {key: value for key, value in (case.cookies or {}).items()
                        if key not in ("sessionid", "csrftoken")} | cookies
        return case

    return sign


@schema.parametrize()
@schema.auth.apply(Credentials, refresh_interval=None)
@settings(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_its_schema_says(case, caller):
    caller(case).call_and_validate()


schema.auth(refresh_interval=None)(Credentials)  # the stateful workflows' cases too
Workflow = schema.as_state_machine()


@pytest.mark.parametrize("caller", ["session", "token"], indirect=True)
def test_workflows_of_linked_operations_answer_as_the_schema_says(caller):
    """Sequences that use what one answer returned (a job's id, say) in the next request,
    every answer checked as above."""

    class Signed(Workflow):
        def before_call(self, case):
            caller(case)

    Signed.run(settings=settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=6, deadline=None,
                                 derandomize=True, database=None, suppress_health_check=list(HealthCheck)))
