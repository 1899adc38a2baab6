"""Grant arithmetic: what a team's quota is from the grants active at a moment. Pure.

A team's quota for one flavor at a moment is the sum of its grants active then (a grant
is active from ``starts_at`` inclusive until ``ends_at`` exclusive). Overlapping grants
add up; each sum is floored at zero, so no mix of grants makes a quota negative. Once any
grant exists for a (team, flavor), the Quota row is *managed by grants*: the first grant
on an existing quota is preceded by a standing grant holding the numbers it had
(``QuotaGrant.objects.add``, the one way a grant is created).

``quotas.actions.apply_grants(now)`` runs at the start of every sweep and writes these sums
onto the Quota rows whose grants started or ended.
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.utils import timezone

# CPU and memory that go with one GPU when a quota has no GPUs to take the ratio from.
CPU_CORES_PER_GPU = 12
MEMORY_GIB_PER_GPU = 120

# Bounds of every quota number (quotas, requests, grants; grants and requests may also be
# as negative), the same on every database and far inside int32: a platform bigger than
# this is a configuration mistake, not a request.
MAX_GPUS = 100_000
MAX_CPU_CORES = MAX_GPUS * 100
MAX_MEMORY_GIB = MAX_GPUS * 1000
# The largest node a flavor describes (and so the most GPUs one worker can ask for).
MAX_GPUS_PER_NODE = 256


@dataclass(frozen=True)
class Effective:
    """What a team's quota for one flavor is, from its active grants."""

    gpus: int = 0
    borrowing_limit_gpus: int | None = None
    cpu_cores: int = 0
    memory_gib: int = 0
    grant_ids: tuple = ()


def is_active(grant, at: datetime) -> bool:
    """``starts_at <= at < ends_at``; both aware, so time zones compare as instants."""
    return grant.starts_at <= at and (grant.ends_at is None or at < grant.ends_at)


def effective(grants, at: datetime) -> Effective:
    """Sum the grants active at ``at``; every total is floored at zero.

    The borrowing limit is the sum of the limits that active grants name; when none names
    one the quota borrows without a limit (Kueue's default)."""
    active = [g for g in grants if is_active(g, at)]
    limits = [g.borrowing_limit_gpus for g in active if g.borrowing_limit_gpus is not None]
    return Effective(
        gpus=max(0, sum(g.gpus for g in active)),
        borrowing_limit_gpus=max(0, sum(limits)) if limits else None,
        cpu_cores=max(0, sum(g.cpu_cores for g in active)),
        memory_gib=max(0, sum(g.memory_gib for g in active)),
        grant_ids=tuple(sorted(g.pk for g in active if g.pk is not None)),
    )


def window(starts_on: date, ends_on: date | None, tz=None) -> tuple[datetime, datetime | None]:
    """A grant's instants from calendar days in the platform's time zone: from the start of
    the first day until the start of the day after the last one."""
    tz = tz or timezone.get_default_timezone()
    start = timezone.make_aware(datetime.combine(starts_on, time.min), tz)
    if ends_on is None or ends_on >= date.max:  # the calendar's last day: no end at all
        return start, None
    end = timezone.make_aware(datetime.combine(ends_on + timedelta(days=1), time.min), tz)
    return start, end


def last_day(ends_at: datetime | None, tz=None) -> date | None:
    """The inverse of ``window``: the last calendar day an end at ``ends_at`` covers, the
    one date convention of the pages ("until <last day>", both days included). An end at
    midnight covers the day before; an end during a day ("End now") covers part of it."""
    if ends_at is None:
        return None
    local = timezone.localtime(ends_at, tz or timezone.get_default_timezone())
    return local.date() - timedelta(days=1) if local.time() == time.min else local.date()
