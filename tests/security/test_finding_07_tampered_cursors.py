"""Finding 7 (issue 29): a tampered cursor on /api/v1/webhooks, and the group-mappings list,
answered 500. Both were fixed before this pass (b90450d: core.api_input.CursorPagination
checks a cursor's position against the ordering field); this keeps the reproduction, over
every cursor-paginated list the schema has, so a new list cannot bring the 500 back."""

import base64
from urllib.parse import urlencode

import pytest
from drf_spectacular.generators import SchemaGenerator

from notifications.models import Event, Kind, Webhook, WebhookDelivery
from tenants.models.identities import GroupMapping

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("scheduled_reconciles")]


def cursor(**parts) -> str:
    return base64.b64encode(urlencode(parts).encode()).decode()


TAMPERED = [cursor(o=0, r=0, p="not-a-number"), cursor(o=0, r=0, p=str(2**70)), cursor(o=0, r=1, p="\x00"),
            cursor(o=0, r=0, p="1" * 300), cursor(o=0, r=0, p="9999-12-31T23:59:59-14:00"), "%%%not-base64"]


def cursor_lists() -> list[str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(path for path, item in schema["paths"].items()
                  if any(p["name"] == "cursor" for p in item.get("get", {}).get("parameters", [])))


def test_finding_07_the_schema_still_has_the_lists_of_the_finding():
    assert {"/api/v1/webhooks", "/api/v1/group-mappings"} <= set(cursor_lists())


@pytest.mark.parametrize("path", cursor_lists())
def test_finding_07_a_tampered_cursor_is_never_a_500_on_any_list(
        client_as, owner, quota_manager, team, job, path):
    hook = Webhook.objects.create(team=team, url="https://example.org/x", kinds=[Kind.JOB_FAILED])
    event = Event.objects.create(kind=Kind.JOB_FAILED, key="e", team=team, title="t")
    WebhookDelivery.objects.create(webhook=hook, event=event)
    GroupMapping.objects.create(group="ml", role=GroupMapping.Role.OWNER, team=team)
    owner.groups.add(*quota_manager.groups.all())  # owner of the team and a quota manager: sees every list
    client = client_as(owner)
    client.raise_request_exception = False
    url = path.replace("{id}", str(hook.pk if "webhooks" in path else job.pk)).replace("{slug}", team.slug)
    for tampered in TAMPERED:
        for ordering in ({}, {"ordering": "created_at"}):
            response = client.get(url, {"cursor": tampered, **ordering})
            # A position that is a value of the ordering field (a flavor's name, a long
            # number on a date ordering read as a year) pages; anything else is refused.
            assert response.status_code in (200, 400, 404), (url, tampered, response.status_code)
            assert response["Content-Type"].startswith("application/json")
            if response.status_code != 200:
                assert set(response.json()) == {"code", "message", "fields"}
