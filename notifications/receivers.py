"""Where the apps below tell this one what happened: Django signals, connected in
``NotificationsConfig.ready``. The apps below never import notifications.

A receiver runs inside the sender's transaction (a job's state change and its JobEvent),
so the event is recorded exactly when the change is, and never when it rolls back. Each
runs in a savepoint and logs its own failure: telling people must never stop the watcher
or a request.
"""

import logging
from functools import wraps

from django.db import transaction
from django.db.models.signals import post_save

from jobs.models import Job, JobEvent
from jobs.signals import job_reason_changed
from quotas.models import QuotaRequest
from tenants.models import Membership

from . import actions

log = logging.getLogger(__name__)


def _quietly(receiver):
    @wraps(receiver)
    def run(*args, **kwargs):
        try:
            with transaction.atomic():
                receiver(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a notification is never worth a failed state change
            log.exception("recording a notification in %s failed", receiver.__name__)
    return run


def on_job_event(sender, instance: JobEvent, created: bool, raw: bool = False, **kwargs) -> None:
    # Asked first, outside the savepoint: most moves (every submit) tell nobody.
    if created and not raw and actions.worth_telling(instance):
        _record_job_event(instance)


@_quietly
def _record_job_event(event: JobEvent) -> None:
    actions.job_event(event)


@_quietly
def on_job_reason(sender, job: Job, **kwargs) -> None:
    actions.never_starts(job)


@_quietly
def on_quota_request(sender, instance: QuotaRequest, created: bool, raw: bool = False, **kwargs) -> None:
    if not raw and not instance.is_pending:
        actions.request_decided(instance)


def on_membership_history(sender, instance, created: bool, raw: bool = False, **kwargs) -> None:
    # After the commit: a membership removed because its team or its person is being
    # deleted leaves nothing to tell, and nothing may point at them then.
    if created and not raw:
        history_id = instance.history_id
        transaction.on_commit(_quietly(lambda: actions.membership_changed(history_id)))


def connect() -> None:
    post_save.connect(on_job_event, sender=JobEvent, dispatch_uid="notifications-job-event")
    job_reason_changed.connect(on_job_reason, sender=Job, dispatch_uid="notifications-job-reason")
    post_save.connect(on_quota_request, sender=QuotaRequest, dispatch_uid="notifications-quota-request")
    post_save.connect(on_membership_history, sender=Membership.history.model,
                      dispatch_uid="notifications-membership")
