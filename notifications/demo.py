"""Demo data for notifications: a webhook of team vision with a delivery log.

Called by ``seed_demo``; safe to run again. The seeded jobs' ends are recorded as events
by the receivers like any other (alice hears that resnet-baseline succeeded, bob that
bert-finetune failed), and the demo's worker prints those emails (console backend). The
demo webhook's URL is not reachable from a laptop, so its seeded log shows a 500 and a
retry that succeeded; new events add failed attempts that back off, as a real outage would.
"""

from datetime import timedelta

from tenants.models import Team

from .models import Event, Kind, Webhook, WebhookDelivery

DEMO_URL = "https://hooks.example.org/gpuplatform/vision"


def seed_notifications(users: dict) -> int:
    """Returns how many items were created."""
    vision = Team.objects.get(slug="vision")
    hook, created = Webhook.objects.get_or_create(
        team=vision, url=DEMO_URL,
        defaults={"kinds": [Kind.JOB_SUCCEEDED, Kind.JOB_FAILED, Kind.GRANT_ENDING], "created_by": users["alice"]})
    event = Event.objects.filter(team=vision, kind=Kind.JOB_SUCCEEDED).order_by("created_at").first()
    if event is not None and not hook.deliveries.filter(event=event).exists():
        first = event.created_at + timedelta(seconds=2)
        retried = first + timedelta(seconds=WebhookDelivery.backoff(1))
        WebhookDelivery.objects.create(
            webhook=hook, event=event, status=WebhookDelivery.Status.SUCCEEDED, attempts=2, status_code=200,
            created_at=first, delivered_at=retried,
            log=[{"at": first.isoformat(), "status_code": 500, "error": "The receiver answered 500."},
                 {"at": retried.isoformat(), "status_code": 200, "error": ""}])
    return int(created)
