"""Who sees what: preferences are your own; a team's webhooks and their log are its
owners' (members and viewers get 403, outsiders 404), on the pages and in the API alike;
tokens read, sessions change."""

from datetime import timedelta

import pytest

from notifications.models import Event, Kind, Preference, Webhook, WebhookDelivery
from tenants.tokens import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(people, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    made = Webhook.objects.create(team=people["team"], url="http://127.0.0.1:9/hook", kinds=[Kind.JOB_FAILED])
    event = Event.objects.create(kind=Kind.JOB_FAILED, key="e1", team=people["team"], title="vision/x failed")
    WebhookDelivery.objects.create(webhook=made, event=event, status="failed", attempts=8, status_code=500)
    return made


EXPECTED_PAGE = {"owner": 200, "member": 403, "viewer": 403, "outsider": 404}


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "outsider"])
def test_only_owners_see_a_teams_webhook_pages(people, hook, client_for, who):
    client = client_for(people[who])
    for url in ("/notifications/teams/vision/webhooks/", f"/notifications/teams/vision/webhooks/{hook.pk}/"):
        page = client.get(url)
        assert page.status_code == EXPECTED_PAGE[who], url
        assert hook.secret.encode() not in page.content  # shown once, when made (tests/security, finding 11)


@pytest.mark.parametrize("who", ["member", "viewer", "outsider"])
def test_others_cannot_change_resend_or_remove_a_webhook(people, hook, client_for, who):
    client = client_for(people[who])
    delivery = hook.deliveries.get()
    base = f"/notifications/teams/vision/webhooks/{hook.pk}"
    for url in (f"{base}/", f"{base}/delete/", f"{base}/ping/", f"{base}/deliveries/{delivery.pk}/resend/",
                "/notifications/teams/vision/webhooks/"):
        assert client.post(url, {"url": "http://127.0.0.1:9/x", "kinds": ["job.failed"]}).status_code == EXPECTED_PAGE[who]
    assert Webhook.objects.count() == 1 and WebhookDelivery.objects.count() == 1


def test_an_owner_adds_a_webhook_and_the_address_policy_speaks_in_the_form(people, client_for, settings):
    client = client_for(people["owner"])
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    refused = client.post("/notifications/teams/vision/webhooks/", {"url": "http://127.0.0.1:8080/x", "kinds": ["job.failed"]})
    assert refused.status_code == 400 and b"loopback" in refused.content and b"127.0.0.1:8080" in refused.content
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    added = client.post("/notifications/teams/vision/webhooks/", {"url": "http://127.0.0.1:8080/x",
                                                                  "kinds": ["job.failed", "grant.ending"], "is_active": "on"})
    hook = Webhook.objects.get()
    assert added.status_code == 302 and added["Location"] == f"/notifications/teams/vision/webhooks/{hook.pk}/"
    assert hook.kinds == ["job.failed", "grant.ending"] and hook.created_by == people["owner"]


def test_an_owner_resends_from_the_log(people, hook, client_for, django_capture_on_commit_callbacks, monkeypatch):
    from notifications import tasks

    sent = []
    monkeypatch.setattr(tasks.deliver_webhook, "delay", lambda pk: sent.append(pk))
    delivery = hook.deliveries.get()
    with django_capture_on_commit_callbacks(execute=True):
        page = client_for(people["owner"]).post(
            f"/notifications/teams/vision/webhooks/{hook.pk}/deliveries/{delivery.pk}/resend/", HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="deliveries")
    assert page.status_code == 200 and b"resend" in page.content
    again = WebhookDelivery.objects.get(is_resend=True)
    assert sent == [again.pk]


def test_preferences_page_saves_a_persons_own_choices(people, client_for):
    client = client_for(people["member"])
    page = client.get("/notifications/")
    assert page.status_code == 200 and b"Your job failed" in page.content
    saved = client.post("/notifications/", {"job__failed": "on", "job__started": "on"}, HTTP_HX_REQUEST="true")
    assert saved.status_code == 200
    chosen = Preference.objects.effective(people["member"])
    assert chosen["job.started"] and chosen["job.failed"] and not chosen["job.succeeded"]
    assert Preference.objects.effective(people["owner"])["job.succeeded"]  # nobody else's


def test_pages_need_a_sign_in(client):
    assert client.get("/notifications/").status_code == 302
    assert client.get("/notifications/teams/vision/webhooks/").status_code == 302


# --- API ------------------------------------------------------------------------------------
def token_for(user, team=None, scopes=("read", "submit", "cancel")):
    _, secret = ApiToken.objects.issue(user=user, name="ci", team=team, scopes=list(scopes), lifetime=timedelta(days=1))
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def test_preferences_api_lists_and_changes_your_own(people, client_for):
    client = client_for(people["member"])
    listed = client.get("/api/v1/notification-preferences").json()
    assert {p["kind"]: p["email"] for p in listed}["job.failed"] is True
    assert next(p for p in listed if p["kind"] == "job.started") == {
        "kind": "job.started", "label": "Your job started", "audience": "the job's submitter", "email": False,
        "default": False}
    changed = client.patch("/api/v1/notification-preferences/job.started", {"email": True}, content_type="application/json")
    assert changed.status_code == 200 and changed.json()["email"] is True
    assert client.patch("/api/v1/notification-preferences/job.nope", {"email": True},
                        content_type="application/json").json()["code"] == "not_found"
    bad = client.patch("/api/v1/notification-preferences/job.started", {"email": "maybe"}, content_type="application/json")
    assert bad.status_code == 400 and set(bad.json()) == {"code", "message", "fields"} and "email" in bad.json()["fields"]


def test_a_token_reads_preferences_but_cannot_change_them(people, client):
    headers = token_for(people["member"])
    assert client.get("/api/v1/notification-preferences", **headers).status_code == 200
    refused = client.patch("/api/v1/notification-preferences/job.started", {"email": True},
                           content_type="application/json", **headers)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"


@pytest.mark.parametrize("who", ["owner", "member", "viewer", "outsider"])
def test_webhook_api_shows_a_teams_webhooks_to_its_owners_only(people, hook, client_for, who):
    client = client_for(people[who])
    listed = client.get("/api/v1/webhooks").json()["results"]
    assert [h["id"] for h in listed] == ([hook.pk] if who == "owner" else [])
    detail = client.get(f"/api/v1/webhooks/{hook.pk}")
    assert detail.status_code == (200 if who == "owner" else 404)
    log = client.get(f"/api/v1/webhooks/{hook.pk}/deliveries")
    assert log.status_code == (200 if who == "owner" else 404)
    if who == "owner":
        assert "secret" not in detail.json()  # only in the answer that made or rotated it
        [entry] = log.json()["results"]
        assert entry["status_code"] == 500 and entry["kind"] == "job.failed"
    created = client.post("/api/v1/webhooks", {"team": "vision", "url": "http://127.0.0.1:8080/y", "kinds": ["job.failed"]},
                          content_type="application/json")
    assert created.status_code == (201 if who == "owner" else 400)
    if who != "owner":
        assert "team" in created.json()["fields"]


def test_webhook_api_refuses_inside_addresses_and_unknown_kinds(people, client_for, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    client = client_for(people["owner"])
    refused = client.post("/api/v1/webhooks", {"team": "vision", "url": "http://169.254.169.254/latest",
                                               "kinds": ["job.failed"]}, content_type="application/json")
    assert refused.status_code == 400 and "link-local" in refused.json()["fields"]["url"][0]
    unknown = client.post("/api/v1/webhooks", {"team": "vision", "url": "http://example.org/",
                                               "kinds": ["job.exploded"]}, content_type="application/json")
    assert unknown.status_code == 400 and "kinds" in str(unknown.json()["fields"])


def test_webhook_api_resend_and_edit_need_an_owners_session(people, hook, client, client_for,
                                                            django_capture_on_commit_callbacks, monkeypatch):
    from notifications import tasks

    monkeypatch.setattr(tasks.deliver_webhook, "delay", lambda pk: None)
    delivery = hook.deliveries.get()
    headers = token_for(people["owner"])
    assert client.get(f"/api/v1/webhooks/{hook.pk}", **headers).status_code == 200
    assert client.post(f"/api/v1/webhooks/{hook.pk}/deliveries/{delivery.pk}/resend", **headers).status_code == 403
    assert client.delete(f"/api/v1/webhooks/{hook.pk}", **headers).status_code == 403
    owner = client_for(people["owner"])
    with django_capture_on_commit_callbacks(execute=True):
        resent = owner.post(f"/api/v1/webhooks/{hook.pk}/deliveries/{delivery.pk}/resend")
    assert resent.status_code == 202 and resent.json()["is_resend"] is True
    edited = owner.patch(f"/api/v1/webhooks/{hook.pk}", {"is_active": False}, content_type="application/json")
    assert edited.status_code == 200 and edited.json()["is_active"] is False and edited.json()["team"] == "vision"
    assert owner.delete(f"/api/v1/webhooks/{hook.pk}").status_code == 204


def test_the_schema_documents_the_notification_endpoints(client_for, people):
    schema = client_for(people["owner"]).get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    for path in ("/api/v1/notification-preferences", "/api/v1/webhooks/{id}/deliveries",
                 "/api/v1/webhooks/{id}/deliveries/{delivery_id}/resend"):
        assert path in schema


def test_the_demo_shows_sent_notifications_and_a_webhook_log(client_for):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("seed_demo")
    call_command("seed_demo")
    alice = get_user_model().objects.get(username="alice")
    assert Event.objects.filter(kind=Kind.JOB_SUCCEEDED, title="vision/resnet-baseline succeeded").count() == 1
    hook = Webhook.objects.get(team__slug="vision")
    page = client_for(alice).get(f"/notifications/teams/vision/webhooks/{hook.pk}/")
    assert page.status_code == 200 and b"HTTP 500" in page.content and b"HTTP 200" in page.content
    assert b"vision/resnet-baseline succeeded" in client_for(alice).get("/notifications/").content


def test_the_delivery_log_costs_the_same_queries_however_long(people, hook, client_for, django_assert_max_num_queries):
    event = Event.objects.get()
    WebhookDelivery.objects.bulk_create([WebhookDelivery(webhook=hook, event=event, is_resend=True, status="succeeded",
                                                         attempts=1, status_code=200) for _ in range(30)])
    client = client_for(people["owner"])
    with django_assert_max_num_queries(12):
        assert client.get(f"/notifications/teams/vision/webhooks/{hook.pk}/").status_code == 200
