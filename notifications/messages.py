"""What people and webhooks receive: emails (text and HTML, alone or as a digest) and the
webhook body. Pure given the rows: no database writes, no network.

Unsubscribe links carry a signed token (user and kind of event) so they work without
signing in; the token never expires but only ever turns one kind of email off.
"""

import email.policy
import json

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

from .models import CHOOSABLE, Event, Kind, Notification

UNSUBSCRIBE_SALT = "notifications.unsubscribe"
SUBJECT_PREFIX = "[GPU Platform]"
# The webhook body's schema version; bump it only with a new, documented shape.
SCHEMA_VERSION = 1


def absolute(path: str) -> str:
    return f"{settings.PUBLIC_URL}{path}" if path else settings.PUBLIC_URL + "/"


def unsubscribe_token(user, kind: str) -> str:
    return signing.dumps({"u": user.pk, "k": kind}, salt=UNSUBSCRIBE_SALT, compress=True)


def read_unsubscribe_token(token: str) -> tuple[int, str] | None:
    """(user id, kind) from a token this platform signed; None for anything else."""
    try:
        value = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(value, dict) or value.get("k") not in CHOOSABLE or not isinstance(value.get("u"), int):
        return None
    return value["u"], value["k"]


def unsubscribe_url(user, kind: str) -> str:
    return absolute(reverse("notifications:unsubscribe", args=[unsubscribe_token(user, kind)]))


class _Mail(EmailMultiAlternatives):
    """Headers folded at 998 characters, not 78: a List-Unsubscribe URL is one long word
    that a 78-character policy would turn into an encoded word mail clients cannot read."""

    def message(self, *, policy=email.policy.default):
        return super().message(policy=policy.clone(max_line_length=998))


def _item(event: Event, user) -> dict:
    return {"event": event, "url": absolute(event.path), "kind_label": Kind(event.kind).label,
            "unsubscribe_url": unsubscribe_url(user, event.kind)}


def email_for(user, notifications: list[Notification]) -> EmailMultiAlternatives:
    """One email for one person: the event itself, or a digest of several."""
    items = [_item(n.event, user) for n in notifications]
    context = {"user": user, "items": items, "settings_url": absolute(reverse("notifications:preferences")),
               "digest": len(items) > 1}
    if len(items) == 1:
        subject = f"{SUBJECT_PREFIX} {items[0]['event'].title}"
    else:
        subject = f"{SUBJECT_PREFIX} {len(items)} updates: {items[0]['event'].title}, ..."
    message = _Mail(
        subject=subject[:250],
        body=render_to_string("notifications/email/message.txt", context),
        to=[user.email],
    )
    message.attach_alternative(render_to_string("notifications/email/message.html", context), "text/html")
    if len(items) == 1:
        # One-click unsubscribe (RFC 8058) for mail clients that offer it.
        message.extra_headers["List-Unsubscribe"] = f"<{items[0]['unsubscribe_url']}>"
        message.extra_headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return message


def webhook_body(event: Event, delivery_id: int) -> dict:
    """The stable JSON body every webhook receives (docs/api.md)."""
    return {
        "schema": SCHEMA_VERSION,
        "id": f"evt_{event.pk}",
        "delivery": delivery_id,
        "kind": event.kind,
        "created_at": event.created_at.isoformat(),
        "team": event.data.get("team"),
        "title": event.title,
        "message": event.message,
        "url": absolute(event.path),
        "data": event.data,
    }


def encode(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
