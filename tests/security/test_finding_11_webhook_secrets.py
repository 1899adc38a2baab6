"""Finding 11 (issue 29): webhook signing secrets came back on every read, to read-only
tokens too, without ``no-store``, and could not be rotated.

Now the secret is in one answer only, the one that made the webhook or rotated its secret
(both need a signed-in session, so a token never sees one); every answer of the webhook
routes, pages and API, is ``Cache-Control: no-store``; and owners rotate a secret from the
page or the API, either at once (a leak) or keeping the previous one signing beside the
new one for ``WEBHOOK_SECRET_GRACE_HOURS`` (a planned change)."""

import hashlib
import hmac
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications import tasks
from notifications.models import Event, Kind, Webhook, WebhookDelivery
from tenants.models import Membership
from tests.support.api import issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(team, owner):
    return Webhook.objects.create(team=team, url="https://example.org/hook", kinds=[Kind.JOB_FAILED],
                                  created_by=owner)


def no_store(response) -> bool:
    return "no-store" in response.get("Cache-Control", "")


def test_finding_11_reads_never_carry_the_secret_and_are_no_store(client_as, owner, team, hook):
    session = client_as(owner)
    token = client_as(token=issue_token(owner, team=team, scopes=["read"]))
    for client in (session, token):
        for url in ("/api/v1/webhooks", f"/api/v1/webhooks/{hook.pk}"):
            response = client.get(url)
            assert response.status_code == 200, url
            assert hook.secret not in response.content.decode()
            assert "secret" not in response.json().get("results", [response.json()])[0]
            assert no_store(response), url


def test_finding_11_the_secret_is_in_the_answer_that_made_it_only(client_as, owner, team, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    created = client_as(owner).post("/api/v1/webhooks", {"team": team.slug, "url": "http://127.0.0.1:8080/y",
                                                          "kinds": ["job.failed"]})
    assert created.status_code == 201 and no_store(created)
    hook = Webhook.objects.get(pk=created.json()["id"])
    assert created.json()["secret"] == hook.secret
    assert "secret" not in client_as(owner).get(f"/api/v1/webhooks/{hook.pk}").json()


def test_finding_11_tokens_cannot_make_or_rotate_webhooks(client_as, owner, team, hook, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    token = client_as(token=issue_token(owner, team=team))  # every scope its owner can use
    made = token.post("/api/v1/webhooks", {"team": team.slug, "url": "http://127.0.0.1:8080/y", "kinds": ["job.failed"]})
    rotated = token.post(f"/api/v1/webhooks/{hook.pk}/rotate-secret", {})
    assert made.status_code == rotated.status_code == 403
    assert "secret" not in made.content.decode() + rotated.content.decode()
    before = hook.secret
    hook.refresh_from_db()
    assert hook.secret == before


@pytest.mark.parametrize("who", ["member", "viewer", "outsider"])
def test_finding_11_only_owners_rotate(client_as, team, hook, who, request):
    person = request.getfixturevalue(who)
    before = hook.secret
    response = client_as(person).post(f"/api/v1/webhooks/{hook.pk}/rotate-secret", {})
    assert response.status_code == 404
    page = client_as(person).post(f"/notifications/teams/{team.slug}/webhooks/{hook.pk}/rotate/")
    assert page.status_code == (404 if who == "outsider" else 403)
    hook.refresh_from_db()
    assert hook.secret == before


def test_finding_11_a_rotation_at_once_stops_the_old_secret(client_as, owner, hook):
    old = hook.secret
    response = client_as(owner).post(f"/api/v1/webhooks/{hook.pk}/rotate-secret", {})
    assert response.status_code == 200 and no_store(response)
    hook.refresh_from_db()
    assert response.json()["secret"] == hook.secret != old
    assert response.json()["previous_secret_until"] is None
    assert hook.signing_secrets() == [hook.secret]


def signatures(header: str) -> list[str]:
    return [part.strip() for part in header.split(",")]


def test_finding_11_a_rotation_keeping_the_old_secret_signs_with_both_until_the_grace_ends(
        client_as, owner, team, hook, settings, monkeypatch):
    settings.WEBHOOK_SECRET_GRACE_HOURS = 24
    old = hook.secret
    answer = client_as(owner).post(f"/api/v1/webhooks/{hook.pk}/rotate-secret", {"keep_previous": True}).json()
    new = answer["secret"]
    assert answer["previous_secret_until"] is not None
    sent = []
    monkeypatch.setattr(tasks, "post", lambda url, body, headers: sent.append((body, headers)) or (200, ""))
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda *a, **k: None)

    def deliver():
        event = Event.objects.create(kind=Kind.JOB_FAILED, key=f"e{len(sent)}", team=team, title="t")
        tasks.deliver_webhook.apply(args=(WebhookDelivery.objects.create(webhook=hook, event=event).pk,))
        body, headers = sent[-1]
        timestamp = headers["X-GPUPlatform-Timestamp"]
        return [sig for sig in signatures(headers["X-GPUPlatform-Signature"])], [
            "sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
            for secret in (new, old)]

    listed, expected = deliver()
    assert listed == expected  # the new secret's signature first, then the old one's
    # After the grace period, the new secret alone.
    later = timezone.now() + timedelta(hours=25)
    monkeypatch.setattr(timezone, "now", lambda: later)
    listed, expected = deliver()
    assert listed == expected[:1]


def test_finding_11_the_page_shows_a_new_secret_once_and_rotates(client_for, owner, team, hook):
    web = client_for(owner)
    page = f"/notifications/teams/{team.slug}/webhooks/{hook.pk}/"
    first = web.get(page)
    assert first.status_code == 200 and no_store(first) and hook.secret not in first.content.decode()
    assert "Rotate secret" in first.content.decode()
    rotated = web.post(page + "rotate/", {"keep_previous": "on"}, follow=True)
    hook.refresh_from_db()
    assert hook.secret in rotated.content.decode() and "shown this once" in rotated.content.decode()
    assert hook.previous_signs_until is not None
    again = web.get(page)
    assert hook.secret not in again.content.decode()  # once
    list_page = web.get(f"/notifications/teams/{team.slug}/webhooks/")
    assert no_store(list_page) and hook.secret not in list_page.content.decode()


def test_finding_11_a_webhook_made_on_the_page_shows_its_secret_once(client_for, owner, team, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    web = client_for(owner)
    made = web.post(f"/notifications/teams/{team.slug}/webhooks/",
                    {"url": "http://127.0.0.1:8080/x", "kinds": ["job.failed"], "is_active": "on"}, follow=True)
    hook = Webhook.objects.get(team=team)
    assert hook.secret in made.content.decode()
    assert hook.secret not in web.get(f"/notifications/teams/{team.slug}/webhooks/{hook.pk}/").content.decode()
    assert Membership.objects.filter(team=team, user=owner, role="owner").exists()
