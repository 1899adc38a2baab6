"""Celery entry points: mail a person their pending notifications, call a webhook.

Both take primary keys and re-read the rows under a lock, so a duplicated message sends
nothing twice. Email: the first notification goes out at once; later ones within
``NOTIFY_DIGEST_SECONDS`` of the last mail wait for the window to close and go out
together as one digest (one scheduled flush per person). Webhooks: one attempt per run;
a failure schedules the next with exponential backoff until ``WEBHOOK_MAX_ATTEMPTS``.

A webhook attempt is claimed in one short transaction and recorded in another; the POST
between them holds no lock and no transaction, so a slow receiver keeps nothing of the
database waiting. The claim moves ``next_attempt_at`` past the attempt's deadline, so a
duplicated message finds it taken (and the sweep finds it again should the worker die).
Attempts are counted per webhook and per team (``WEBHOOK_SENDS_PER_MINUTE``,
``WEBHOOK_TEAM_SENDS_PER_MINUTE``): one over the rate waits for the next window, without
counting as an attempt. The task runs on its own queue (``settings.WEBHOOK_QUEUE``).
"""

import logging
import smtplib
import time
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from core.ratelimit import take

from .delivery import post, signature
from .messages import email_for, encode, webhook_body
from .models import Mailbox, Notification, WebhookDelivery

log = logging.getLogger(__name__)

# A scheduled flush may arrive a little early by another worker's clock.
CLOCK_SLACK = timedelta(seconds=2)


@shared_task(bind=True, acks_late=True, ignore_result=True, autoretry_for=(OSError, smtplib.SMTPException),
             retry_backoff=5, retry_backoff_max=300, retry_jitter=True, max_retries=10)
def send_emails(self, user_id: int) -> int:
    """1. lock the person's mailbox, 2. wait for the digest window if a mail just went out
    (scheduling one flush), 3. send everything pending as one email, 4. mark it sent.
    Returns how many notifications went out."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return 0
    Mailbox.objects.get_or_create(user=user)
    now = timezone.now()
    with transaction.atomic():
        box = Mailbox.objects.select_for_update().get(user=user)
        pending = list(Notification.objects.filter(user=user, status=Notification.Status.PENDING)
                       .select_related("event").order_by("created_at", "id"))
        if not pending or not user.is_active or not user.email:
            return 0
        due = box.next_send_at(now)
        if due - CLOCK_SLACK > now:
            if box.flush_at is None or box.flush_at < now - CLOCK_SLACK:
                box.flush_at = due
                box.save(update_fields=["flush_at"])
                countdown = (due - now).total_seconds()
                transaction.on_commit(lambda: send_emails.apply_async((user_id,), countdown=countdown))
            return 0
        email_for(user, pending).send()
        Notification.objects.filter(pk__in=[n.pk for n in pending]).update(
            status=Notification.Status.SENT, sent_at=now, in_digest=len(pending) > 1)
        box.last_sent_at, box.flush_at = now, None
        box.save(update_fields=["last_sent_at", "flush_at"])
    return len(pending)


def send_rate_wait(hook) -> float:
    """Seconds until ``hook`` may send again (0: now), counting this attempt."""
    # The team's count only for what its webhook's let through.
    return (take(f"webhook:{hook.pk}", limit=settings.WEBHOOK_SENDS_PER_MINUTE, period=60)
            or take(f"webhook-team:{hook.team_id}", limit=settings.WEBHOOK_TEAM_SENDS_PER_MINUTE, period=60))


@shared_task(bind=True, acks_late=True, ignore_result=True)
def deliver_webhook(self, delivery_id: int) -> str:
    """1. claim the delivery (locked briefly), or put it off while its webhook or team is
    over the rate, 2. sign and POST the body, outside any transaction, 3. log the attempt,
    4. schedule the next one after a failure. Returns the delivery's status."""
    # 1. claim
    with transaction.atomic():
        delivery = (WebhookDelivery.objects.select_for_update(of=("self",))
                    .select_related("webhook", "event").filter(pk=delivery_id).first())
        if delivery is None:
            return "gone"
        now = timezone.now()
        if delivery.status != WebhookDelivery.Status.PENDING:
            return delivery.status
        if delivery.next_attempt_at and delivery.next_attempt_at - CLOCK_SLACK > now:
            return delivery.status  # a duplicate message, early, or an attempt under way
        hook = delivery.webhook
        if not hook.is_active:
            delivery.status, delivery.error = WebhookDelivery.Status.FAILED, "The webhook is turned off."
            delivery.save(update_fields=["status", "error"])
            return delivery.status
        wait = send_rate_wait(hook)
        if wait:
            delivery.next_attempt_at = now + timedelta(seconds=wait)
            delivery.save(update_fields=["next_attempt_at"])
            transaction.on_commit(lambda: deliver_webhook.apply_async((delivery_id,), countdown=wait))
            return delivery.status
        claimed = delivery.attempts
        delivery.next_attempt_at = now + timedelta(seconds=settings.WEBHOOK_TIMEOUT_SECONDS) + CLOCK_SLACK
        delivery.save(update_fields=["next_attempt_at"])
        url, secrets, kind = hook.url, hook.signing_secrets(), delivery.event.kind
        body = encode(webhook_body(delivery.event, delivery.pk))
    # 2. send, holding nothing
    timestamp = int(time.time())
    status_code, error = post(url, body, {
        "Content-Type": "application/json",
        "X-GPUPlatform-Event": kind,
        "X-GPUPlatform-Delivery": str(delivery_id),
        "X-GPUPlatform-Timestamp": str(timestamp),
        # During a rotation's grace period, one signature per secret, the new one first.
        "X-GPUPlatform-Signature": ", ".join(signature(secret, timestamp, body) for secret in secrets),
    })
    # 3. record
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().filter(pk=delivery_id).first()
        if delivery is None or delivery.status != WebhookDelivery.Status.PENDING or delivery.attempts != claimed:
            return delivery.status if delivery else "gone"
        delay = delivery.record_attempt(at=timezone.now(), status_code=status_code, error=error)
        delivery.save()
    # 4. again later
    if delay is not None:
        log.info("webhook delivery %s failed (%s), next attempt in %s s", delivery_id, error, delay)
        deliver_webhook.apply_async((delivery_id,), countdown=delay)
    return delivery.status
