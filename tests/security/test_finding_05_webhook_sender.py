"""Finding 5 (issue 29): one owner could stall the worker. The webhook sender had no overall
deadline and posted inside a database transaction (a receiver trickling one byte every
1.5 s held one attempt for 18 s against a 2 s timeout); pings were unlimited and shared the
worker with every reconcile.

Now: an attempt is cut at ``WEBHOOK_TIMEOUT_SECONDS`` whatever the receiver trickles, and
the POST holds no transaction and no row lock; attempts are rate-limited per webhook and
per team, test events and resends by hand per hour; and the sender has a Celery queue and
worker of its own.

The chart's side, rendered by real Helm: tests/live/security/test_finding_05_webhook_sender.py."""

import socket
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, transaction

from gpuplatform.celery import app
from notifications import tasks
from notifications.models import Event, Kind, Webhook, WebhookDelivery

ROOT = Path(__file__).resolve().parents[2]


class Trickler:
    """A receiver on 127.0.0.1 that reads the request, then answers one byte at a time,
    ``every`` seconds apart, for far longer than any deadline."""

    def __init__(self, every=0.3, on_request=None):
        self.every, self.on_request = every, on_request
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests, self.seen = 0, []
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            conn.recv(65536)
            self.requests += 1
            if self.on_request:
                self.seen.append(self.on_request())
            answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 50  # some 20 s of trickle
            for byte in answer:
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(self.every)

    def close(self):
        self.stop.set()
        self.listener.close()


def a_delivery(team, url, kind=Kind.JOB_FAILED) -> WebhookDelivery:
    hook = Webhook.objects.filter(team=team, url=url).first() or Webhook.objects.create(
        team=team, url=url, kinds=[Kind.JOB_FAILED])
    event = Event.objects.create(kind=kind, key=f"test:{Event.objects.count()}", team=team, title="t")
    return WebhookDelivery.objects.create(webhook=hook, event=event)


@pytest.fixture
def later(monkeypatch):
    """Tasks the sender schedules for later (retries, rate waits), kept off the broker."""
    kept = []
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async",
                        lambda args=(), countdown=None, **kw: kept.append((args, countdown)))
    return kept


def lock_is_free(delivery_id: int):
    """From another connection: can the delivery and its webhook be locked right now?"""
    def check():
        try:
            with transaction.atomic():
                row = WebhookDelivery.objects.select_for_update(nowait=True).get(pk=delivery_id)
                Webhook.objects.select_for_update(nowait=True).get(pk=row.webhook_id)
            return True
        except Exception as err:  # noqa: BLE001 - the answer is the error's kind
            return type(err).__name__
        finally:
            connection.close()
    return check


@pytest.mark.django_db(transaction=True)
def test_finding_05_a_trickling_receiver_is_cut_at_the_deadline_and_holds_no_lock(team, settings, later):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.WEBHOOK_TIMEOUT_SECONDS = 2
    delivery = a_delivery(team, "http://127.0.0.1:1/x")
    server = Trickler(every=0.3, on_request=lock_is_free(delivery.pk))
    Webhook.objects.filter(pk=delivery.webhook_id).update(url=f"http://127.0.0.1:{server.port}/hook")
    try:
        started = time.monotonic()
        status = tasks.deliver_webhook.apply(args=(delivery.pk,)).get()
        took = time.monotonic() - started
    finally:
        server.close()
    delivery.refresh_from_db()
    # The trickle would last 20 s; the attempt ends at its 2 s deadline (plus scheduling).
    assert took < 6, took
    assert status == "pending" and delivery.attempts == 1 and delivery.status_code is None
    assert "did not answer within 2 s" in delivery.error
    assert later == [((delivery.pk,), 30)]  # retried like any failure
    assert server.requests == 1 and server.seen == [True]  # nothing locked while it waited


@pytest.mark.django_db
def test_finding_05_a_duplicate_message_during_an_attempt_sends_nothing(team, settings, later, monkeypatch):
    """The claim moves next_attempt_at past the deadline: a second message for the same
    delivery while the first waits on the receiver finds it taken."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    delivery = a_delivery(team, "http://127.0.0.1:9/hook")
    sent = []

    def post(url, body, headers):
        sent.append(url)
        if len(sent) == 1:  # the duplicate arrives while the first attempt waits
            assert tasks.deliver_webhook.apply(args=(delivery.pk,)).get() == "pending"
        return 200, ""

    monkeypatch.setattr(tasks, "post", post)
    assert tasks.deliver_webhook.apply(args=(delivery.pk,)).get() == "succeeded"
    assert len(sent) == 1


@pytest.mark.django_db
def test_finding_05_attempts_over_the_webhooks_or_teams_rate_wait_for_the_next_minute(
        team, settings, later, monkeypatch, django_capture_on_commit_callbacks):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.WEBHOOK_SENDS_PER_MINUTE, settings.WEBHOOK_TEAM_SENDS_PER_MINUTE = 2, 3
    sent = []
    monkeypatch.setattr(tasks, "post", lambda url, body, headers: sent.append(url) or (200, ""))
    first = [a_delivery(team, "http://127.0.0.1:9/a") for _ in range(3)]
    second = [a_delivery(team, "http://127.0.0.1:9/b") for _ in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        statuses = [tasks.deliver_webhook.apply(args=(d.pk,)).get() for d in first + second]
    # a: two within its rate, the third waits; b: one more fits the team's three.
    assert statuses == ["succeeded", "succeeded", "pending", "succeeded", "pending"]
    assert sent == ["http://127.0.0.1:9/a"] * 2 + ["http://127.0.0.1:9/b"]
    waiting = WebhookDelivery.objects.filter(status="pending")
    assert [d.attempts for d in waiting] == [0, 0]  # waiting is no attempt
    assert all(d.next_attempt_at is not None for d in waiting)
    assert len(later) == 2 and all(0 < countdown <= 60 for _, countdown in later)


@pytest.mark.django_db
def test_finding_05_test_events_and_resends_are_limited_per_webhook_and_per_team(team, owner, client_for,
                                                                               client_as, settings, monkeypatch):
    monkeypatch.setattr("notifications.actions.enqueue", lambda *a: None)
    settings.WEBHOOK_PINGS_PER_HOUR, settings.WEBHOOK_TEAM_PINGS_PER_HOUR = 2, 3
    a = Webhook.objects.create(team=team, url="https://example.org/a", kinds=[Kind.JOB_FAILED])
    b = Webhook.objects.create(team=team, url="https://example.org/b", kinds=[Kind.JOB_FAILED])
    web = client_for(owner)

    def ping(hook):
        page = web.post(f"/notifications/teams/{team.slug}/webhooks/{hook.pk}/ping/", follow=True)
        assert page.status_code == 200
        return "limited to 2 an hour per webhook" not in page.content.decode()

    assert [ping(a), ping(a), ping(a)] == [True, True, False]
    assert [ping(b), ping(b)] == [True, False]  # the team's third, then over the team's rate
    assert WebhookDelivery.objects.filter(event__kind=Kind.PING).count() == 3
    # A resend by hand counts the same, in the API too: 429 in the error shape.
    delivery = WebhookDelivery.objects.filter(webhook=b).first()
    response = client_as(owner).post(f"/api/v1/webhooks/{b.pk}/deliveries/{delivery.pk}/resend")
    assert response.status_code == 429 and response.json()["code"] == "throttled"
    assert "limited to 2 an hour per webhook" in response.json()["message"]
    assert WebhookDelivery.objects.filter(is_resend=True).count() == 0


def test_finding_05_webhook_sends_have_a_queue_of_their_own():
    route = app.amqp.router.route({}, tasks.deliver_webhook.name)
    assert route["queue"].name == "webhooks"
    assert app.amqp.router.route({}, "jobs.tasks.reconcile_job")["queue"].name == "celery"
    assert app.amqp.router.route({}, tasks.send_emails.name)["queue"].name == "celery"


def test_finding_05_make_demo_runs_a_worker_for_each_queue():
    script = (ROOT / "scripts" / "demo.sh").read_text()
    workers = [line for line in script.replace("\\\n", " ").splitlines() if "celery -A gpuplatform worker" in line]
    assert sorted(w.split("--queues ")[1].split()[0] for w in workers) == ["celery", "webhooks"]


