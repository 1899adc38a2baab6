"""Owners are warned by email, once, some days before a grant ends (moved here from
quotas/emails.py): the sweep records the event, a task mails each owner."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail

from notifications.actions import warn_expiring_grants
from notifications.models import Kind, Preference
from quotas import actions
from tenants.models import Membership

from ..builders import make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def owners(people):
    second = make_user("otto", email="otto@example.org")
    Membership.objects.create(team=people["team"], user=second, role=Membership.Role.OWNER)
    return people["owner"], second


def a_grant(people, ends_at, gpus=8):
    return actions.grant(team=people["team"], flavor=people["flavor"], gpus=gpus, cpu_cores=0, memory_gib=0,
                         starts_at=T0 - 10 * DAY, ends_at=ends_at, now=T0 - 10 * DAY)


def test_owners_are_warned_once_before_a_grant_ends(settings, people, owners, inline):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    grant = a_grant(people, T0 + 6 * DAY)
    with inline["commit"]():
        assert warn_expiring_grants(T0) == 1
    assert sorted(m.to[0] for m in mail.outbox) == ["olivia@example.org", "otto@example.org"]  # not max, a member
    message = mail.outbox[0]
    assert "vision: +8 h100 GPUs end on 2026-12-07" in message.subject
    assert f"Grant #{grant.pk} ends in 6 days" in message.body
    with inline["commit"]():
        assert warn_expiring_grants(T0 + DAY) == 0
    assert len(mail.outbox) == 2
    grant.refresh_from_db()
    assert grant.expiry_warning_sent_at == T0


def test_an_owner_can_turn_the_warning_off(settings, people, owners, inline):
    Preference.objects.choose(people["owner"], Kind.GRANT_ENDING, False)
    a_grant(people, T0 + 2 * DAY)
    with inline["commit"]():
        warn_expiring_grants(T0, days=7)
    assert [m.to for m in mail.outbox] == [["otto@example.org"]]


def test_no_warning_before_the_warning_window(settings, people, owners, inline):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    a_grant(people, T0 + 8 * DAY)
    with inline["commit"]():
        assert warn_expiring_grants(T0) == 0
    assert mail.outbox == []
    with inline["commit"]():
        assert warn_expiring_grants(T0 + DAY) == 1
    assert len(mail.outbox) == 2


def test_no_warning_for_ended_open_ended_or_reducing_grants(people, owners):
    a_grant(people, T0 - DAY)
    a_grant(people, None)
    a_grant(people, T0 + DAY, gpus=-2)
    assert warn_expiring_grants(T0, days=7) == 0 and mail.outbox == []


def test_the_sweep_sends_the_warning(settings, monkeypatch, tmp_path, people, owners, inline):
    from django.utils import timezone

    from gpuplatform.tasks import sweep

    settings.GRANT_EXPIRY_WARNING_DAYS = 3
    settings.KUBECONFIG = str(tmp_path / "missing")  # no cluster: grants and warnings still run
    a_grant(people, T0 + 2 * DAY)
    monkeypatch.setattr(timezone, "now", lambda: T0)
    with inline["commit"]():
        assert sweep.apply().get()["skipped"] == "no cluster"
    assert len(mail.outbox) == 2
    with inline["commit"]():
        sweep.apply().get()
    assert len(mail.outbox) == 2
