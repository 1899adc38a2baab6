"""Events worth telling, who wants to hear of which, and what was delivered.

An ``Event`` is recorded once per happening under a unique ``key`` (a job's state change is
keyed by its ``JobEvent``, a grant's end by the grant), so a retried task or a restarted
watcher never tells anything twice. Each person who wants that kind of event gets a
``Notification`` (an email, possibly in a digest); each team webhook that subscribed gets a
``WebhookDelivery``, whose attempts make the log owners read.
"""

import secrets
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from jobs.models import Job
from tenants.models import Membership, Team

from .addresses import UnsafeTarget, resolve


class Kind(models.TextChoices):
    JOB_STARTED = "job.started", "Your job started"
    JOB_SUCCEEDED = "job.succeeded", "Your job succeeded"
    JOB_FAILED = "job.failed", "Your job failed"
    JOB_PREEMPTED = "job.preempted", "Your job was preempted"
    JOB_CANCELLED = "job.cancelled", "Your job was cancelled"
    JOB_WAITING = "job.waiting", "Your job waits long, or can never start"
    JOB_IDLE = "job.idle", "Your job's GPUs sit idle: it will be reclaimed"
    JOB_RECLAIMED = "job.reclaimed", "Your job was reclaimed for idle GPUs"
    JOB_DRAIN = "job.drain", "The GPU pool of your job is drained for maintenance"
    QUOTA_REQUEST_DECIDED = "quota_request.decided", "A quota request was approved or denied"
    GRANT_STARTED = "grant.started", "A quota grant of your team started"
    GRANT_ENDING = "grant.ending", "A quota grant of your team ends soon"
    GRANT_ENDED = "grant.ended", "A quota grant of your team ended"
    MEMBER_ADDED = "member.added", "Someone joined your team"
    MEMBER_REMOVED = "member.removed", "Someone left your team"
    PING = "ping", "A test sent from the webhook page"


# What people choose by email and webhooks subscribe to (a ping is sent on request only).
CHOOSABLE = [kind for kind in Kind if kind != Kind.PING]


# Your own job's end and failure; the decision on a quota request (whoever asked waits for
# it); the grant warning owners always had; and an idle-GPU warning and reclaim (the job
# stops unless someone acts). Everything else is off until a person turns it on. No row
# means the default, so a person who turned one off stays off.
DEFAULT_ON = frozenset({Kind.JOB_SUCCEEDED, Kind.JOB_FAILED, Kind.QUOTA_REQUEST_DECIDED, Kind.GRANT_ENDING,
                        Kind.JOB_IDLE, Kind.JOB_RECLAIMED, Kind.JOB_DRAIN})
# Who hears of each kind (shown on the preferences page).
AUDIENCE = {
    "job": "the job's submitter",
    "quota_request": "whoever asked, and the team's owners",
    "grant": "the team's owners",
    "member": "the person, and the team's owners",
    "ping": "nobody by email",
}


def audience(kind: str) -> str:
    return AUDIENCE[kind.split(".", 1)[0]]


class EventQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.visible_to(user))


class Event(models.Model):
    kind = models.CharField(max_length=32, choices=Kind)
    key = models.CharField(max_length=120, unique=True, help_text="What happened, once: e.g. job-event:42.")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    title = models.CharField(max_length=300)
    message = models.TextField(blank=True)
    path = models.CharField(max_length=200, blank=True, help_text="The page it is about, below PUBLIC_URL.")
    data = models.JSONField(default=dict, blank=True, help_text="The webhook body's data.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.title}"


class PreferenceQuerySet(models.QuerySet):
    def effective(self, user) -> dict[str, bool]:
        """Every kind with whether ``user`` gets it by email (their choice, else the default)."""
        chosen = dict(self.filter(user=user).values_list("kind", "email"))
        return {kind.value: chosen.get(kind, kind in DEFAULT_ON) for kind in CHOOSABLE}

    def wanting(self, kind: str, people) -> list:
        """The people (with an address) who want ``kind`` by email."""
        people = [p for p in people if p is not None and p.is_active and p.email]
        chosen = dict(self.filter(kind=kind, user__in=[p.pk for p in people]).values_list("user_id", "email"))
        return [p for p in people if chosen.get(p.pk, kind in DEFAULT_ON)]

    def choose(self, user, kind: str, email: bool) -> None:
        if kind not in CHOOSABLE:
            raise ValidationError({"kind": f"Unknown kind of event {kind!r}."})
        self.update_or_create(user=user, kind=kind, defaults={"email": email})


class Preference(models.Model):
    """A person's choice for one kind of event; no row means the default."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32, choices=Kind)
    email = models.BooleanField()

    objects = PreferenceQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["user", "kind"], name="notification_preference_one_per_kind",
            violation_error_message="One choice per person and kind of event.")]

    def __str__(self) -> str:
        return f"{self.kind}: {'email' if self.email else 'no email'}"


class Notification(models.Model):
    """One event for one person by email; sent alone or in a digest."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="notifications")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, choices=Status, default=Status.PENDING, db_index=True)
    in_digest = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(
            fields=["event", "user"], name="notification_once_per_person",
            violation_error_message="A person hears of an event once.")]

    def __str__(self) -> str:
        return f"notification of event {self.event_id} ({self.status})"


class Mailbox(models.Model):
    """When a person was last mailed, so a burst of events becomes one digest."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="+")
    last_sent_at = models.DateTimeField(null=True, blank=True)
    flush_at = models.DateTimeField(null=True, blank=True, help_text="A digest is scheduled for then.")

    def __str__(self) -> str:
        return f"mailbox of user {self.user_id}"

    def next_send_at(self, now):
        """Now, or when the digest window after the last mail closes."""
        if self.last_sent_at is None:
            return now
        return max(now, self.last_sent_at + timedelta(seconds=settings.NOTIFY_DIGEST_SECONDS))


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def validate_kinds(value) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError("Choose at least one kind of event.")
    unknown = sorted(set(map(str, value)) - set(CHOOSABLE))
    if unknown:
        raise ValidationError(f"Unknown kinds of event: {', '.join(unknown)}.")
    twice = sorted(str(kind) for kind, times in Counter(map(str, value)).items() if times > 1)
    if twice:  # so a webhook names at most every kind once
        raise ValidationError(f"Name each kind of event once: {', '.join(twice)} more than once.")


class WebhookQuerySet(models.QuerySet):
    def managed_by(self, user):
        """Webhooks of the teams ``user`` owns: only owners see and change them (secrets)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(team__memberships__user=user, team__memberships__role=Membership.Role.OWNER)

    def refuse_over_cap(self, team: Team, *, lock: bool = False) -> None:
        """A team has at most ``MAX_WEBHOOKS_PER_TEAM`` webhooks (each event is sent to every
        one). ``lock``: the team's row is locked first, in the transaction that adds one, so
        two additions at once cannot both take the last place."""
        if lock:
            Team.objects.select_for_update().filter(pk=team.pk).values_list("pk").first()
        held, cap = self.filter(team=team).count(), settings.MAX_WEBHOOKS_PER_TEAM
        if held >= cap:
            raise ValidationError(f"Team {team.slug} has {held} webhooks, the most a team may have ({cap}); "
                                  "remove one, or add its events to another, first.", code="too_many_webhooks")


class Webhook(models.Model):
    """A team's URL for the events it chose. Its signing secret is shown once, when it is
    made or rotated; a rotation may keep the previous secret signing too for
    ``WEBHOOK_SECRET_GRACE_HOURS``, so a receiver can switch without refusing an event."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500, help_text="Called with a signed POST for each event chosen.")
    kinds = models.JSONField(default=list, validators=[validate_kinds])
    secret = models.CharField(max_length=80, default=new_secret, editable=False)
    previous_secret = models.CharField(max_length=80, blank=True, default="", editable=False)
    previous_secret_until = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="The previous secret signs deliveries until then.")
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WebhookQuerySet.as_manager()

    class Meta:
        ordering = ["team__slug", "id"]

    def __str__(self) -> str:
        return f"{self.team.slug}: {self.url}"

    def save(self, *args, **kwargs) -> None:
        # However it is saved (form, API, admin), a new webhook is counted with the team locked.
        if self._state.adding:
            with transaction.atomic():
                Webhook.objects.refuse_over_cap(self.team, lock=True)
                super().save(*args, **kwargs)
        else:
            super().save(*args, **kwargs)

    @staticmethod
    def can_manage(team: Team, user) -> bool:
        return team.role_of(user) == Membership.Role.OWNER

    def rotate_secret(self, *, keep_previous: bool, now=None) -> str:
        """A new secret (saved); the current one keeps signing for the grace period if
        ``keep_previous``, else stops at once (a leaked secret). Returns the new secret."""
        now = now or timezone.now()
        if keep_previous:
            self.previous_secret = self.secret
            self.previous_secret_until = now + timedelta(hours=settings.WEBHOOK_SECRET_GRACE_HOURS)
        else:
            self.previous_secret, self.previous_secret_until = "", None
        self.secret = new_secret()
        self.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
        return self.secret

    @property
    def previous_signs_until(self):
        """When the previous secret stops signing, while it still does; else None."""
        if self.previous_secret and self.previous_secret_until and self.previous_secret_until > timezone.now():
            return self.previous_secret_until
        return None

    def signing_secrets(self) -> list[str]:
        """The secrets a delivery is signed with now: the current one first."""
        return [self.secret, self.previous_secret] if self.previous_signs_until else [self.secret]

    def wants(self, kind: str) -> bool:
        return self.is_active and (kind in self.kinds or kind == Kind.PING)

    def clean(self) -> None:
        if self._state.adding and self.team_id:  # a form's or the API's error; `save` holds the cap
            Webhook.objects.refuse_over_cap(self.team)
        if self.url:
            try:
                resolve(self.url)
            except UnsafeTarget as err:
                raise ValidationError({"url": str(err)}) from None


class WebhookDelivery(models.Model):
    """One event sent to one webhook (a resend is a new row), with every attempt logged."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="+")
    is_resend = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status, default=Status.PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Of the last attempt.")
    error = models.TextField(blank=True)
    log = models.JSONField(default=list, blank=True, help_text="Each attempt: at, status_code, error.")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(
            fields=["webhook", "event"], condition=Q(is_resend=False), name="webhook_delivery_once_per_event",
            violation_error_message="An event is delivered to a webhook once (resends aside).")]

    def __str__(self) -> str:
        return f"delivery of event {self.event_id} to webhook {self.webhook_id} ({self.status})"

    @staticmethod
    def backoff(attempts: int) -> int:
        """Seconds before the next attempt: 30 s, 1, 2, 4 ... minutes, at most an hour."""
        return min(3600, 30 * 2 ** max(0, attempts - 1))

    def record_attempt(self, *, at, status_code: int | None, error: str = "") -> int | None:
        """Log one attempt; returns the seconds until the next one, or None when done."""
        self.attempts += 1
        self.status_code, self.error = status_code, error[:2000]
        self.log = [*self.log, {"at": at.isoformat(), "status_code": status_code, "error": error[:300]}]
        if status_code is not None and 200 <= status_code < 300:
            self.status, self.delivered_at, self.next_attempt_at = self.Status.SUCCEEDED, at, None
            return None
        if self.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            self.status, self.next_attempt_at = self.Status.FAILED, None
            return None
        delay = self.backoff(self.attempts)
        self.next_attempt_at = at + timedelta(seconds=delay)
        return delay
