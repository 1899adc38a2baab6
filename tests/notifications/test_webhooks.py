"""Team webhooks call a real HTTP receiver: a signed, stable JSON body; retries with
backoff up to a cap; a delivery log with resends; and an address policy that keeps
webhooks out of the platform's own network, at save time and again at send time."""

import socket

import pytest
from django.core.exceptions import ValidationError

from jobs.models import Job
from notifications.actions import resend
from notifications.addresses import UnsafeTarget, is_allowed, resolve
from notifications.models import Kind, Webhook, WebhookDelivery

from ..builders import make_job

pytestmark = pytest.mark.django_db


def a_hook(people, url, kinds=(Kind.JOB_FAILED, Kind.JOB_SUCCEEDED)):
    hook = Webhook(team=people["team"], url=url, kinds=list(kinds), created_by=people["owner"])
    hook.full_clean()
    hook.save()
    return hook


def fail_a_job(people, inline):
    job = make_job(people["team"], people["flavor"], submitter=people["member"])
    with inline["commit"]():
        job.submit()
        job.observe(Job.State.FAILED, reason="OOMKilled", message="Worker 0 ran out of memory.")
    return job


def test_a_webhook_gets_a_signed_body_and_retries_after_a_500(people, receiver, inline, settings):
    settings.PUBLIC_URL = "https://gpu.example.org"
    server = receiver(500, 200)
    hook = a_hook(people, server.url)
    server.secret = hook.secret
    job = fail_a_job(people, inline)
    [first] = server.requests
    assert first["valid"] and first["path"] == "/hooks/gpu?source=test"
    assert first["headers"]["X-GPUPlatform-Event"] == "job.failed"
    body = first["body"]
    assert body["schema"] == 1 and body["kind"] == "job.failed" and body["team"] == "vision"
    assert body["url"] == f"https://gpu.example.org/jobs/{job.pk}/"
    assert body["data"]["job"] == {"id": job.pk, "name": job.name, "kind": "training", "state": "failed",
                                   "reason": "OOMKilled", "message": "Worker 0 ran out of memory.",
                                   "flavor": "h100", "submitter": "max"}
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.status_code == 500 and delivery.attempts == 1
    [(_, _, countdown)] = inline["later"]
    assert countdown == 30
    inline["run_later"]()
    delivery.refresh_from_db()
    assert delivery.status == "succeeded" and delivery.status_code == 200 and delivery.attempts == 2
    assert [a["status_code"] for a in delivery.log] == [500, 200]
    assert len(server.requests) == 2 and all(r["valid"] for r in server.requests)
    assert server.requests[1]["body"] == first["body"]  # the same event, the same body


def test_retries_back_off_and_stop_at_the_cap(people, receiver, inline, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 4
    server = receiver(500, 500, 502, 503, 200)
    server.secret = a_hook(people, server.url).secret
    fail_a_job(people, inline)
    countdowns = []
    while inline["later"]:
        countdowns.append(inline["later"][0][2])
        inline["run_later"]()
    delivery = WebhookDelivery.objects.get()
    assert countdowns == [30, 60, 120]
    assert delivery.status == "failed" and delivery.attempts == 4 and delivery.status_code == 503
    assert WebhookDelivery.backoff(20) == 3600  # an hour at most


def test_an_owner_resends_a_delivery_as_a_new_log_entry(people, receiver, inline):
    server = receiver(200, 200)
    server.secret = a_hook(people, server.url).secret
    fail_a_job(people, inline)
    original = WebhookDelivery.objects.get()
    with inline["commit"]():
        again = resend(original)
    again.refresh_from_db()
    assert again.is_resend and again.status == "succeeded" and again.event_id == original.event_id
    assert len(server.requests) == 2 and server.requests[1]["body"]["id"] == server.requests[0]["body"]["id"]


def test_a_webhook_hears_only_the_kinds_it_chose(people, receiver, inline):
    server = receiver()
    server.secret = a_hook(people, server.url, kinds=[Kind.JOB_SUCCEEDED]).secret
    fail_a_job(people, inline)
    assert server.requests == [] and not WebhookDelivery.objects.exists()


def test_redirects_are_not_followed(people, receiver, inline):
    server = receiver(302)
    server.secret = a_hook(people, server.url).secret
    fail_a_job(people, inline)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status_code == 302 and "Redirects are not followed" in delivery.error
    assert len(server.requests) == 1


@pytest.mark.parametrize("address", ["127.0.0.1", "10.96.0.1", "169.254.169.254", "192.168.1.5", "100.64.0.1",
                                     "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1"])
def test_inside_addresses_are_refused(address, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert not is_allowed(address)


def test_public_addresses_and_allowed_networks_pass(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    assert is_allowed("93.184.215.14") and is_allowed("2606:4700::1111") and is_allowed("10.20.3.4")
    assert not is_allowed("10.21.0.1")


def test_a_webhook_to_loopback_cannot_be_saved(people, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(ValidationError) as err:
        a_hook(people, "http://localhost:8080/hook")
    assert "loopback" in err.value.message_dict["url"][0]
    for url in ("ftp://example.org/", "http://user:pw@example.org/", "http://"):
        with pytest.raises(UnsafeTarget):
            resolve(url)


def test_dns_rebinding_after_save_is_caught_at_send_time(people, receiver, inline, monkeypatch, settings):
    server = receiver()
    # The name resolves to a public address when saved ...
    real = socket.getaddrinfo
    answers = {"hooks.example.test": "93.184.215.14"}
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: (
        [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))] if host in answers else real(host, port, *a, **k)))
    hook = a_hook(people, f"http://hooks.example.test:{server.server.server_address[1]}/x")
    server.secret = hook.secret
    # ... and to loopback when it is used: the send is refused, nothing reaches the receiver.
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    answers["hooks.example.test"] = "127.0.0.1"
    fail_a_job(people, inline)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status_code is None and delivery.error.startswith("Refused: hooks.example.test resolves to 127.0.0.1")
    assert server.requests == []


def test_the_sender_connects_to_the_address_it_checked(people, receiver, inline, monkeypatch):
    server = receiver(200)
    port = server.server.server_address[1]
    calls = []
    real = socket.getaddrinfo

    def resolver(host, *args, **kwargs):
        calls.append(host)
        return real("127.0.0.1" if host == "hooks.internal.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    hook = a_hook(people, f"http://hooks.internal.test:{port}/x")
    server.secret = hook.secret
    calls.clear()
    fail_a_job(people, inline)
    assert calls == ["hooks.internal.test", "127.0.0.1"]  # resolved once, then the address itself
    assert server.requests[0]["headers"]["Host"] == f"hooks.internal.test:{port}" and server.requests[0]["valid"]


def test_a_bad_allowed_network_is_a_system_check_error(settings):
    from notifications.checks import check_webhook_networks

    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8", "not-a-network"]
    [error] = check_webhook_networks()
    assert error.id == "notifications.E001" and "not-a-network" in error.msg
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert check_webhook_networks() == []


def test_a_localhost_public_url_is_a_deployment_warning(settings):
    from notifications.checks import check_public_url

    settings.PUBLIC_URL = "http://localhost:8000"
    assert [w.id for w in check_public_url()] == ["notifications.W001"]
    settings.PUBLIC_URL = "https://gpu.example.org"
    assert check_public_url() == []
