"""Grant arithmetic, and the sweep step that writes it onto Quota rows.

A team's quota for one flavor at a moment is the sum of its grants active then (a grant
is active from ``starts_at`` inclusive until ``ends_at`` exclusive). Overlapping grants
add up; each sum is floored at zero, so no mix of grants makes a quota negative. Once any
grant exists for a (team, flavor), the Quota row is *managed by grants*: the first grant
on an existing quota is preceded by a standing grant holding the numbers it had.

``apply_grants(now)`` runs at the start of every sweep: it finds grants whose activity
changed since they were last applied (starting or ending), recomputes those Quota rows,
and asks for a reconcile of the teams whose rows changed, so the ClusterQueue, Volcano
Queue and ResourceQuota follow on the cluster.
"""

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db import transaction
from django.utils import timezone

from tenants.models import Team

from .models import GpuFlavor, Quota, QuotaGrant

# CPU and memory that go with one GPU when a quota has no GPUs to take the ratio from.
CPU_CORES_PER_GPU = 12
MEMORY_GIB_PER_GPU = 120


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


def resources_for(team: Team, flavor: GpuFlavor, gpus: int) -> tuple[int, int]:
    """CPU cores and memory (GiB) to grant with ``gpus``, in the ratio the team's quota has."""
    quota = Quota.objects.filter(team=team, flavor=flavor).first()
    if quota and quota.nominal_gpus:
        cpu, memory = quota.cpu_cores / quota.nominal_gpus, quota.memory_gib / quota.nominal_gpus
    else:
        cpu, memory = CPU_CORES_PER_GPU, MEMORY_GIB_PER_GPU
    rounded = math.ceil if gpus >= 0 else math.floor
    return int(rounded(gpus * cpu)), int(rounded(gpus * memory))


def grant(*, team: Team, flavor: GpuFlavor, now=None, **fields) -> QuotaGrant:
    """Create a grant. The first grant on a quota that exists is preceded by a standing
    grant with its current numbers, so a change adds to what the team had."""
    now = now or timezone.now()
    with transaction.atomic():
        Team.objects.select_for_update().filter(pk=team.pk).first()
        if not QuotaGrant.objects.filter(team=team, flavor=flavor).exists():
            quota = Quota.objects.filter(team=team, flavor=flavor).first()
            if quota is not None:
                QuotaGrant.objects.create(
                    team=team, flavor=flavor, gpus=quota.nominal_gpus,
                    borrowing_limit_gpus=quota.borrowing_limit_gpus, cpu_cores=quota.cpu_cores,
                    memory_gib=quota.memory_gib, starts_at=now, applied=True,
                    note="Standing quota when grants took over this quota.",
                )
        created = QuotaGrant(team=team, flavor=flavor, **fields)
        created.full_clean(exclude=["team", "flavor"])
        if created.granted_by is not None:
            created._history_user = created.granted_by
        created.save()
    return created


def _write_quota(team: Team, flavor: GpuFlavor, quota: Quota | None, eff: Effective, reason: str) -> bool:
    """Bring the Quota row to ``eff``; returns whether anything changed."""
    if quota is None:
        if eff.gpus == 0 and eff.cpu_cores == 0 and eff.memory_gib == 0:
            return False
        quota = Quota(team=team, flavor=flavor, nominal_gpus=eff.gpus, cpu_cores=eff.cpu_cores,
                      memory_gib=eff.memory_gib)
        quota._change_reason = reason
        quota.save()
        return True
    wanted = {
        "nominal_gpus": eff.gpus,
        "cpu_cores": eff.cpu_cores,
        "memory_gib": eff.memory_gib,
        # Limits need a cohort (constraint quota_limits_need_cohort); lending stays within nominal.
        "borrowing_limit_gpus": eff.borrowing_limit_gpus if quota.cohort_id else None,
        "lending_limit_gpus": None if quota.lending_limit_gpus is None else min(quota.lending_limit_gpus, eff.gpus),
    }
    if all(getattr(quota, field) == value for field, value in wanted.items()):
        return False
    for field, value in wanted.items():
        setattr(quota, field, value)
    quota._change_reason = reason
    quota.save()
    return True


def _apply_pair(now, team_id: int, flavor_id: int) -> bool:
    with transaction.atomic():
        # The team row serialises the sweep, approvals and early ends for this team.
        team = Team.objects.select_for_update().filter(pk=team_id).first()
        if team is None:
            return False
        grants = list(QuotaGrant.objects.filter(team_id=team_id, flavor_id=flavor_id))
        if not grants:  # a quota without grants is kept by hand, not by this step
            return False
        eff = effective(grants, now)
        quota = Quota.objects.select_for_update().filter(team_id=team_id, flavor_id=flavor_id).first()
        flavor = GpuFlavor.objects.get(pk=flavor_id)
        ids = ", ".join(f"#{pk}" for pk in eff.grant_ids) or "none"
        changed = _write_quota(team, flavor, quota, eff, f"grants in effect: {ids}")
        QuotaGrant.objects.filter(pk__in=eff.grant_ids).exclude(applied=True).update(applied=True)
        QuotaGrant.objects.filter(team_id=team_id, flavor_id=flavor_id, applied=True).exclude(
            pk__in=eff.grant_ids).update(applied=False)
        if changed:
            from tenants.tasks import reconcile_team_soon  # tasks sit above models

            reconcile_team_soon(team)
    return changed


def apply_grants(now=None, *, team: Team | None = None, flavor: GpuFlavor | None = None) -> list[int]:
    """1. find grants whose activity changed since last applied, 2. recompute each affected
    Quota row, 3. reconcile the teams whose row changed (after commit).
    Returns the ids of those teams. ``team`` and ``flavor`` narrow it to one quota."""
    now = now or timezone.now()
    due = QuotaGrant.objects.active_at(now).filter(applied=False) | QuotaGrant.objects.inactive_at(now).filter(applied=True)
    if team is not None:
        due = due.filter(team=team)
    if flavor is not None:
        due = due.filter(flavor=flavor)
    pairs = sorted(set(due.values_list("team_id", "flavor_id")))
    if team is not None and flavor is not None:
        pairs = sorted(set(pairs) | {(team.pk, flavor.pk)})  # a fresh grant or an edit
    changed = [team_id for team_id, flavor_id in pairs if _apply_pair(now, team_id, flavor_id)]
    return sorted(set(changed))
