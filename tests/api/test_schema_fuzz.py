"""Schemathesis against the live OpenAPI schema, in-process over WSGI: every operation,
with generated requests, never answers 5xx, and every answer (errors included) has a
status, content type and body the schema documents."""

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import issue_token

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

# Loaded from the running application, as a client would (no database needed for it).
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture
def requests_keep_the_test_connection():
    """As Django's test client does: a request must not close the test's database
    connection (and with it the transaction every example runs in)."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(db, member, team, job, requests_keep_the_test_connection):
    return {"Authorization": f"Bearer {issue_token(member)}"}


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx_or_off_schema(case, bearer):
    case.call_and_validate(headers=bearer, checks=CHECKS)
