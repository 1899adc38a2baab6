"""Warn team owners by email before a quota grant ends: once per grant.

Runs from the sweep. The warning is claimed with a compare-and-swap on
``expiry_warning_sent_at`` before the email goes out, so two sweeps never both send it.
"""

from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from tenants.models import Membership

from .models import QuotaGrant


def expiring(now, days: int):
    """Grants that add GPUs and end within ``days`` of ``now`` whose owners were not warned."""
    return (
        QuotaGrant.objects.filter(ends_at__gt=now, ends_at__lte=now + timedelta(days=days),
                                  expiry_warning_sent_at__isnull=True)
        .filter(Q(gpus__gt=0) | Q(borrowing_limit_gpus__gt=0))
        .select_related("team", "flavor")
    )


def owner_addresses(team) -> list[str]:
    return sorted(
        Membership.objects.filter(team=team, role=Membership.Role.OWNER)
        .exclude(user__email="").values_list("user__email", flat=True)
    )


def warn_expiring_grants(now=None, *, days: int | None = None) -> int:
    """Email the owners of each grant ending soon; returns how many grants were warned about."""
    now = now or timezone.now()
    days = days or settings.GRANT_EXPIRY_WARNING_DAYS
    warned = 0
    for grant in expiring(now, days):
        claimed = QuotaGrant.objects.filter(pk=grant.pk, expiry_warning_sent_at__isnull=True).update(
            expiry_warning_sent_at=now
        )
        if not claimed:
            continue
        recipients = owner_addresses(grant.team)
        if recipients:
            context = {"grant": grant, "team": grant.team, "days_left": max(0, (grant.ends_at - now).days)}
            send_mail(
                subject=f"[GPU Platform] {grant.team.slug}: {grant.gpus:+d} {grant.flavor.name} GPUs end "
                        f"on {timezone.localtime(grant.ends_at):%Y-%m-%d %H:%M %Z}",
                message=render_to_string("quotas/grant_expiry_email.txt", context),
                from_email=None, recipient_list=recipients,
            )
        warned += 1
    return warned
