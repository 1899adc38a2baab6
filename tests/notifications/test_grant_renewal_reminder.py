"""The reminder before a grant ends links to the grant's page, where an owner asks to renew
it (issue 34, item 3); a non-renewable grant's reminder says so; an extended grant is
reminded of again before its new end."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.urls import reverse

from notifications.actions import warn_expiring_grants
from notifications.models import Event, Kind
from quotas import actions
from quotas.grants import last_day
from quotas.models import QuotaGrant, QuotaRequest

from ..builders import make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("quotas.actions.enqueue", lambda task, pk: None)


def a_grant(people, **fields):
    return actions.grant(team=people["team"], flavor=people["flavor"], gpus=8, cpu_cores=0, memory_gib=0,
                         starts_at=T0 - 10 * DAY, ends_at=T0 + 5 * DAY, now=T0 - 10 * DAY, **fields)


def test_the_reminder_links_to_the_grants_page_and_comes_again_before_the_new_end(settings, people, inline):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    grant = a_grant(people)
    with inline["commit"]():
        assert warn_expiring_grants(T0) == 1
    link = reverse("console:grant", args=["vision", grant.pk])
    [event] = Event.objects.filter(kind=Kind.GRANT_ENDING)
    assert event.path == link and "ask to renew or extend it from the link" in event.message
    [message] = mail.outbox  # the owner's
    assert settings.PUBLIC_URL + link in message.body

    renewal = QuotaRequest.objects.renew(grant, requested_by=people["owner"], justification="More epochs.",
                                         ends_on=last_day(grant.ends_at) + 3 * DAY, now=T0)
    actions.approve(renewal, make_user("ruth", quota_manager=True), gpus=8, borrowing_limit_gpus=None,
                    cpu_cores=0, memory_gib=0, starts_on=renewal.starts_on, ends_on=renewal.ends_on, now=T0)
    with inline["commit"]():
        assert warn_expiring_grants(T0 + DAY) == 1  # the new end, Dec 9, is within the seven days
    assert Event.objects.filter(kind=Kind.GRANT_ENDING).count() == 2
    inline["run_later"]()  # the second mail waits for the digest window after the first
    assert len([m for m in mail.outbox if "GPUs end on 2026-12-09" in m.body]) == 1


def test_a_non_renewable_grants_reminder_says_so(settings, people, inline):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    grant = a_grant(people, renewable=False)
    assert QuotaGrant.objects.get(pk=grant.pk).renewable is False
    warn_expiring_grants(T0)
    [event] = Event.objects.filter(kind=Kind.GRANT_ENDING)
    assert "This grant is not renewable" in event.message
