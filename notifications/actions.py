"""Record events worth telling and enqueue their delivery once the transaction commits.

``record`` is the one way an event enters: it is keyed, so recording the same happening
again (a retried task, a restarted watcher, the next sweep) does nothing. The functions
below turn the other apps' rows into events; ``notice_due`` is the sweep's part (jobs
waiting long, grants that start, end soon or ended) and ``requeue_stale`` re-sends what a
lost message left pending.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.urls import reverse
from django.utils import timezone

from core.ratelimit import take
from core.reconcile import enqueue
from jobs.lifecycle import WAITING_FOR_QUOTA, State
from jobs.models import Job, JobEvent
from jobs.models.idle import WARNED
from jobs.outlook.drains import ON_THE_POOL, WAITING, ends_at
from quotas.models import Drain, QuotaGrant, QuotaRequest
from tenants.models import Membership, Team

from .models import Event, Kind, Mailbox, Notification, Preference, Webhook, WebhookDelivery
from .tasks import deliver_webhook, send_emails

JOB_KINDS = {
    State.RUNNING: Kind.JOB_STARTED,
    State.SUCCEEDED: Kind.JOB_SUCCEEDED,
    State.FAILED: Kind.JOB_FAILED,
    State.PREEMPTED: Kind.JOB_PREEMPTED,
    State.CANCELLED: Kind.JOB_CANCELLED,
    State.RECLAIMED: Kind.JOB_RECLAIMED,
}
NEVER_STARTS = "Can never start"
# Grants that started or ended this long ago are still worth telling (a sweep that was
# down for a while); older ones are history.
GRANT_LOOKBACK = timedelta(days=1)
# Pending work older than this lost its message; the sweep sends it again.
STALE_AFTER = timedelta(minutes=5)


def record(*, kind: str, key: str, team: Team | None, title: str, message: str = "", path: str = "",
           data: dict | None = None, job: Job | None = None, people=()) -> Event | None:
    """Record the event under ``key`` once, with a notification for each person who wants
    it and a delivery for each team webhook that subscribed. None if already recorded."""
    # Joins the caller's transaction (a receiver's savepoint, `notifications.receivers`) or
    # starts one; only the insert that may meet its key again has a savepoint of its own.
    with transaction.atomic(savepoint=False):
        try:
            with transaction.atomic():
                event = Event.objects.create(
                    key=key, kind=kind, team=team, job=job, title=title[:300], message=message, path=path,
                    data={"team": team.slug if team else None, **(data or {})})
        except IntegrityError:
            if Event.objects.filter(key=key).exists():
                return None  # recorded before
            raise
        unique = list({person.pk: person for person in people if person is not None}.values())
        for person in Preference.objects.wanting(kind, unique):
            Notification.objects.create(event=event, user=person)
            enqueue(send_emails, person.pk)
        if team is not None:
            for hook in Webhook.objects.filter(team=team, is_active=True):
                if hook.wants(kind):
                    enqueue(deliver_webhook, WebhookDelivery.objects.create(webhook=hook, event=event).pk)
    return event


def owners(team: Team) -> list:
    return [m.user for m in Membership.objects.filter(team=team, role=Membership.Role.OWNER).select_related("user")]


# --- jobs ------------------------------------------------------------------------------------
def _job_data(job: Job, moved: JobEvent | None = None) -> dict:
    """The job in an event's data; after ``moved``, in the state, reason and message it moved to."""
    state, reason, message = (moved.to_state, moved.reason, moved.message) if moved else (job.state, job.reason, job.message)
    return {"job": {"id": job.pk, "name": job.name, "kind": job.kind, "state": state,
                    "reason": reason, "message": message, "flavor": job.flavor.name,
                    "submitter": job.submitter.get_username() if job.submitter else None}}


def worth_telling(event: JobEvent) -> bool:
    """Whether ``job_event`` could record something (most moves, submitted and queued
    among them, tell nobody): decided without a query. A note (``Job.note``: no move, the
    same state on both sides) is never a start or an end; an idle-GPU warning is one."""
    moved = event.from_state != event.to_state
    return (moved and event.to_state in JOB_KINDS) or event.message.startswith(NEVER_STARTS) or event.reason == WARNED


def job_event(event: JobEvent) -> Event | None:
    """A job's state change worth telling (started, ended, preempted), or its reason
    saying it can never start."""
    if not worth_telling(event):
        return None
    if event.reason == WARNED:
        return idle_warning(event)
    kind = JOB_KINDS.get(event.to_state) if event.from_state != event.to_state else None
    if kind is None:
        job = Job.objects.select_related("team", "flavor", "submitter").get(pk=event.job_id)
        return never_starts(job) if event.message.startswith(NEVER_STARTS) else None
    # The job as the one that moved it holds it (`Job.transition` creates the event with
    # itself, its team and flavor loaded): no read. Its state is still the one it left;
    # the event says where it went.
    job = event.job
    said = {Kind.JOB_STARTED: "started", Kind.JOB_SUCCEEDED: "succeeded", Kind.JOB_FAILED: "failed",
            Kind.JOB_PREEMPTED: "was preempted", Kind.JOB_CANCELLED: "was cancelled",
            Kind.JOB_RECLAIMED: "was reclaimed (its GPUs sat idle)"}[kind]
    title = f"{job.team.slug}/{job.name} {said}"
    if kind == Kind.JOB_FAILED and event.reason:
        title += f" ({event.reason})"
    return record(kind=kind, key=f"job-event:{event.pk}", team=job.team, job=job, title=title,
                  message=event.message, path=reverse("jobs:detail", args=[job.pk]),
                  data=_job_data(job, moved=event), people=[job.submitter])


def idle_warning(event: JobEvent) -> Event | None:
    """Its GPUs sat idle: the submitter and the team's owners hear when it will be
    reclaimed, so one of them can use the GPUs, stop the job or ask for an exemption."""
    job = event.job
    return record(kind=Kind.JOB_IDLE, key=f"job-event:{event.pk}", team=job.team, job=job,
                  title=f"{job.team.slug}/{job.name}: its GPUs sit idle", message=event.message,
                  path=reverse("jobs:detail", args=[job.pk]), data=_job_data(job),
                  people=[job.submitter, *owners(job.team)])


def _waiting_key(job: Job, preemptions: int) -> str:
    # One word per stretch of waiting: from submission, then after each preemption.
    return f"job:{job.pk}:waiting:{preemptions}"


def never_starts(job: Job) -> Event | None:
    """Said at once: waiting will not help."""
    if not job.message.startswith(NEVER_STARTS) or job.state not in WAITING_FOR_QUOTA:
        return None
    preemptions = job.events.filter(to_state=State.PREEMPTED).count()
    return record(kind=Kind.JOB_WAITING, key=_waiting_key(job, preemptions), team=job.team, job=job,
                  title=f"{job.team.slug}/{job.name} can never start", message=job.message,
                  path=reverse("jobs:detail", args=[job.pk]), data=_job_data(job), people=[job.submitter])


def notice_waiting_jobs(now) -> int:
    """Jobs that have waited longer than ``NOTIFY_WAITING_AFTER_MINUTES`` in this stretch."""
    threshold = timedelta(minutes=settings.NOTIFY_WAITING_AFTER_MINUTES)
    preempted = Q(events__to_state=State.PREEMPTED)
    jobs = (Job.objects.filter(state__in=WAITING_FOR_QUOTA, submitted_at__lte=now - threshold)
            .annotate(times_preempted=Count("events", filter=preempted),
                      last_preempted=Max("events__created_at", filter=preempted))
            .select_related("team", "flavor", "submitter"))
    jobs = list(jobs)
    said = set(Event.objects.filter(kind=Kind.JOB_WAITING, job__in=jobs).values_list("key", flat=True))
    told = 0
    for job in jobs:
        since = max(filter(None, [job.submitted_at, job.last_preempted]))
        if now - since < threshold or _waiting_key(job, job.times_preempted) in said:
            continue
        minutes = int((now - since).total_seconds() // 60)
        waited = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
        told += bool(record(
            kind=Kind.JOB_WAITING, key=_waiting_key(job, job.times_preempted), team=job.team, job=job,
            title=f"{job.team.slug}/{job.name} has waited {waited}", message=job.message,
            path=reverse("jobs:detail", args=[job.pk]), data=_job_data(job), people=[job.submitter]))
    return told


# --- quota requests and grants ---------------------------------------------------------------
def request_decided(request: QuotaRequest) -> Event | None:
    if request.is_pending:
        return None
    request = QuotaRequest.objects.select_related("team", "flavor", "requested_by", "decided_by").get(pk=request.pk)
    said = "approved" if request.status == QuotaRequest.Status.APPROVED else "denied"
    message = request.decision_reason or ""
    return record(
        kind=Kind.QUOTA_REQUEST_DECIDED, key=f"quota-request:{request.pk}:decided", team=request.team,
        title=(f"{request.team.slug}: your renewal of grant #{request.renews_id} was {said}" if request.is_renewal
               else f"{request.team.slug}: your request for {request.gpus:+d} {request.flavor.name} GPUs was {said}"),
        message=message, path=reverse("console:team", args=[request.team.slug]),
        data={"quota_request": {"id": request.pk, "status": request.status, "gpus": request.gpus,
                                "flavor": request.flavor.name, "decision_reason": request.decision_reason,
                                "decided_by": request.decided_by.get_username() if request.decided_by else None}},
        people=[request.requested_by, *owners(request.team)])


def _grant_data(grant: QuotaGrant) -> dict:
    return {"grant": {"id": grant.pk, "gpus": grant.gpus, "flavor": grant.flavor.name,
                      "borrowing_limit_gpus": grant.borrowing_limit_gpus,
                      "starts_at": grant.starts_at.isoformat(),
                      "ends_at": grant.ends_at.isoformat() if grant.ends_at else None}}


def _grant_event(grant: QuotaGrant, kind: str, title: str, message: str = "", *, key: str = "",
                 path: str = "") -> Event | None:
    return record(kind=kind, key=key or f"grant:{grant.pk}:{kind.split('.')[1]}", team=grant.team, title=title,
                  message=message, path=path or reverse("console:team", args=[grant.team.slug]),
                  data=_grant_data(grant), people=owners(grant.team))


def _when(moment) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z}"


def notice_grants(now) -> dict:
    """Grants that started or ended since the last sweeps, and those ending within
    ``GRANT_EXPIRY_WARNING_DAYS`` (once each, as the warning always was)."""
    given = (QuotaGrant.objects.filter(Q(granted_by__isnull=False) | Q(request__isnull=False))
             .select_related("team", "flavor"))
    told = {"started": 0, "ending": 0, "ended": 0}
    for grant in given.active_at(now).filter(starts_at__gt=now - GRANT_LOOKBACK):
        told["started"] += bool(_grant_event(
            grant, Kind.GRANT_STARTED, f"{grant.team.slug}: {grant.gpus:+d} {grant.flavor.name} GPUs from now on",
            f"Grant #{grant.pk} is in effect" + (f" until {_when(grant.ends_at)}." if grant.ends_at else ".")))
    for grant in given.filter(ends_at__lte=now, ends_at__gt=now - GRANT_LOOKBACK):
        told["ended"] += bool(_grant_event(
            grant, Kind.GRANT_ENDED, f"{grant.team.slug}: {grant.gpus:+d} {grant.flavor.name} GPUs ended",
            f"Grant #{grant.pk} ended on {_when(grant.ends_at)}; the quota is back to the other grants' sum."))
    told["ending"] = warn_expiring_grants(now)
    return told


def warn_expiring_grants(now, *, days: int | None = None) -> int:
    """Owners hear once, some days before a grant that adds GPUs ends (claimed with
    ``expiry_warning_sent_at``, shown in the admin)."""
    days = days or settings.GRANT_EXPIRY_WARNING_DAYS
    ending = (QuotaGrant.objects.filter(ends_at__gt=now, ends_at__lte=now + timedelta(days=days),
                                        expiry_warning_sent_at__isnull=True)
              .filter(Q(gpus__gt=0) | Q(borrowing_limit_gpus__gt=0)).select_related("team", "flavor"))
    warned = 0
    for grant in ending:
        claimed = QuotaGrant.objects.filter(pk=grant.pk, expiry_warning_sent_at__isnull=True).update(
            expiry_warning_sent_at=now)
        if not claimed:
            continue
        days_left = max(0, (grant.ends_at - now).days)
        # The link is the grant's page, where an owner asks to renew it; a grant extended
        # since its last warning is warned of again before its new end (its own key).
        then = "Jobs that need these GPUs after then will wait"
        told = (f"{then}; ask to renew or extend it from the link." if grant.renewable
                else f"{then}. This grant is not renewable; ask for a new grant on the team page.")
        _grant_event(grant, Kind.GRANT_ENDING,
                     f"{grant.team.slug}: {grant.gpus:+d} {grant.flavor.name} GPUs end on {_when(grant.ends_at)}",
                     f"Grant #{grant.pk} ends in {days_left} days. {told}",
                     key=f"grant:{grant.pk}:ending:{grant.ends_at:%Y%m%dT%H%M%S}",
                     path=reverse("console:grant", args=[grant.team.slug, grant.pk]))
        warned += 1
    return warned


# --- members -----------------------------------------------------------------------------------
def membership_changed(history_id: int) -> Event | None:
    """A membership's history row (added or removed). Said after the change committed; a
    team being offboarded, or a person being deleted, is not worth a word."""
    row = Membership.history.model.objects.filter(history_id=history_id).first()
    if row is None or row.history_type not in ("+", "-"):
        return None
    team = Team.objects.filter(pk=row.team_id).exclude(status=Team.Status.DELETING).first()
    person = get_user_model().objects.filter(pk=row.user_id).first()
    if team is None or person is None:
        return None
    added = row.history_type == "+"
    kind = Kind.MEMBER_ADDED if added else Kind.MEMBER_REMOVED
    by = row.history_user.get_username() if row.history_user else "the platform"
    title = (f"{person.get_username()} joined {team.slug} as {row.role}" if added
             else f"{person.get_username()} left {team.slug}")
    return record(kind=kind, key=f"membership-history:{history_id}", team=team, title=title,
                  message=f"Changed by {by}.", path=reverse("console:team", args=[team.slug]),
                  data={"member": {"username": person.get_username(), "role": row.role, "by": by}},
                  people=[person, *owners(team)])


# --- drained pools (docs/drain.md) ---------------------------------------------------------------
def notice_drains(now) -> int:
    """The submitter and the team's owners of every job on a pool being drained hear once per
    drain and job: when it should end (its maximum runtime) against the deadline, or that it
    waits until the pool reopens."""
    told = 0
    for drain in Drain.objects.open_at(now).select_related("flavor"):
        jobs = (Job.objects.filter(flavor_id=drain.flavor_id, state__in=[*ON_THE_POOL, *WAITING])
                .exclude(pk__in=Event.objects.filter(key__startswith=f"drain:{drain.pk}:job:").values("job_id"))
                .select_related("team", "flavor", "submitter"))
        for job in jobs:
            title = f"{job.name}: {drain.flavor.name} is drained by {_when(drain.deadline)}"
            if job.state in WAITING:
                message = drain.waiting_message()
            else:
                end = ends_at(job, now)
                said = f"It should end by {_when(end)} (its maximum runtime)" if end else "It has no maximum runtime"
                late = end is None or end > drain.deadline
                message = (f"{drain.reason}. {said}" + (
                    ": that is after the deadline, so checkpoint it and stop it before then, or the cluster admin's "
                    "drain of the nodes will stop it." if late else ", before the deadline: nothing to do.")
                    + f" The pool reopens at {_when(drain.reopens_at)}.")
            told += bool(record(kind=Kind.JOB_DRAIN, key=f"drain:{drain.pk}:job:{job.pk}", team=job.team, job=job,
                                title=title, message=message, path=reverse("jobs:detail", args=[job.pk]),
                                data={**_job_data(job), "drain": {
                                    "flavor": drain.flavor.name, "deadline": drain.deadline.isoformat(),
                                    "reopens_at": drain.reopens_at.isoformat()}},
                                people=[job.submitter, *owners(job.team)]))
    return told


# --- the sweep's part --------------------------------------------------------------------------
def notice_due(now=None) -> dict:
    """Run from the periodic sweep: waiting jobs, grants, and a resend of lost work."""
    now = now or timezone.now()
    told = notice_grants(now)
    told["waiting"] = notice_waiting_jobs(now)
    told["drains"] = notice_drains(now)
    told["requeued"] = requeue_stale(now)
    return told


def requeue_stale(now) -> int:
    """Enqueue again what waits longer than its message should have taken."""
    stale = now - STALE_AFTER
    late_boxes = Mailbox.objects.filter(flush_at__lt=stale).values_list("user_id", flat=True)
    people = set(Notification.objects.filter(status=Notification.Status.PENDING, created_at__lt=stale)
                 .exclude(user_id__in=Mailbox.objects.filter(flush_at__gte=stale).values("user_id"))
                 .values_list("user_id", flat=True)) | set(late_boxes)
    deliveries = set(WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).filter(
        Q(next_attempt_at__lt=stale) | Q(next_attempt_at__isnull=True, created_at__lt=stale)
    ).values_list("pk", flat=True))
    Mailbox.objects.filter(user_id__in=people).update(flush_at=None)
    for user_id in sorted(people):
        enqueue(send_emails, user_id)
    for delivery_id in sorted(deliveries):
        enqueue(deliver_webhook, delivery_id)
    return len(people) + len(deliveries)


# --- what people do ----------------------------------------------------------------------------
class TooManyByHand(Exception):
    """A webhook's or team's test events and resends by hand are over the hour's rate."""

    def __init__(self, wait: float):
        self.wait = wait
        minutes = max(1, round(wait / 60))
        super().__init__(f"Test events and resends are limited to {settings.WEBHOOK_PINGS_PER_HOUR} an hour per "
                         f"webhook and {settings.WEBHOOK_TEAM_PINGS_PER_HOUR} per team; try again in "
                         f"{minutes} min.")


def _count_by_hand(hook: Webhook) -> None:
    # The team's count only for what its webhook's let through.
    wait = (take(f"webhook-by-hand:{hook.pk}", limit=settings.WEBHOOK_PINGS_PER_HOUR, period=3600)
            or take(f"webhook-team-by-hand:{hook.team_id}", limit=settings.WEBHOOK_TEAM_PINGS_PER_HOUR, period=3600))
    if wait:
        raise TooManyByHand(wait)


def resend(delivery: WebhookDelivery) -> WebhookDelivery:
    """Send a delivery's event to its webhook again, as a new delivery in the log (counted
    with the test events: ``TooManyByHand`` past the rate)."""
    _count_by_hand(delivery.webhook)
    with transaction.atomic():
        again = WebhookDelivery.objects.create(webhook=delivery.webhook, event=delivery.event, is_resend=True)
        enqueue(deliver_webhook, again.pk)
    return again


def ping_webhook(hook: Webhook, user) -> WebhookDelivery:
    """Send a ping event to one webhook, so an owner can check the receiver
    (``TooManyByHand`` past the rate)."""
    _count_by_hand(hook)
    with transaction.atomic():
        event = Event.objects.create(
            kind=Kind.PING, key=f"ping:{hook.pk}:{timezone.now().timestamp()}", team=hook.team,
            title=f"{hook.team.slug}: a test from {user.get_username()}",
            message="Sent from the webhook page to check the receiver.",
            path=reverse("notifications:webhook", args=[hook.team.slug, hook.pk]),
            data={"team": hook.team.slug})
        delivery = WebhookDelivery.objects.create(webhook=hook, event=event)
        enqueue(deliver_webhook, delivery.pk)
    return delivery
