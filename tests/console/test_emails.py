"""Owners are warned by email, once, some days before a grant ends."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail

from quotas import actions
from quotas.emails import warn_expiring_grants
from tenants.models import Membership

from ..builders import make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def owners(team, owner):
    owner.email = "olivia@example.org"
    owner.save()
    second = make_user("otto", email="otto@example.org")
    Membership.objects.create(team=team, user=second, role=Membership.Role.OWNER)
    return owner, second


def a_grant(team, flavor, ends_at, gpus=8):
    return actions.grant(team=team, flavor=flavor, gpus=gpus, cpu_cores=0, memory_gib=0,
                        starts_at=T0 - 10 * DAY, ends_at=ends_at, now=T0 - 10 * DAY)


def test_owners_are_warned_once_before_a_grant_ends(settings, team, flavor, owners, member):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    member.email = "max@example.org"
    member.save()
    grant = a_grant(team, flavor, T0 + 6 * DAY)
    assert warn_expiring_grants(T0) == 1
    [message] = mail.outbox
    assert message.to == ["olivia@example.org", "otto@example.org"]
    assert "vision: +8 h100 GPUs end on 2026-12-07" in message.subject
    assert f"grant #{grant.pk}" in message.body and "in 6 days" in message.body
    assert warn_expiring_grants(T0 + DAY) == 0
    assert len(mail.outbox) == 1
    grant.refresh_from_db()
    assert grant.expiry_warning_sent_at == T0


def test_no_warning_before_the_warning_window(settings, team, flavor, owners):
    settings.GRANT_EXPIRY_WARNING_DAYS = 7
    a_grant(team, flavor, T0 + 8 * DAY)
    assert warn_expiring_grants(T0) == 0 and mail.outbox == []
    assert warn_expiring_grants(T0 + DAY) == 1 and len(mail.outbox) == 1


def test_no_warning_for_ended_open_ended_or_reducing_grants(team, flavor, owners):
    a_grant(team, flavor, T0 - DAY)
    a_grant(team, flavor, None)
    a_grant(team, flavor, T0 + DAY, gpus=-2)
    assert warn_expiring_grants(T0, days=7) == 0 and mail.outbox == []


def test_the_sweep_sends_the_warning(settings, monkeypatch, tmp_path, team, flavor, owners):
    from django.utils import timezone

    from gpuplatform.tasks import sweep

    settings.GRANT_EXPIRY_WARNING_DAYS = 3
    settings.KUBECONFIG = str(tmp_path / "missing")  # no cluster: grants and warnings still run
    a_grant(team, flavor, T0 + 2 * DAY)
    monkeypatch.setattr(timezone, "now", lambda: T0)
    assert sweep.apply().get() == {"skipped": "no cluster"}
    assert len(mail.outbox) == 1
    sweep.apply().get()
    assert len(mail.outbox) == 1
