"""Quota state changes that must reach the cluster: change the rows, then enqueue the
team's quota reconcile once the transaction commits. Models hold the rules (who may
approve, the standing grant, the arithmetic in `quotas.grants`) and never enqueue."""

import logging

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.reconcile import enqueue
from tenants.models import Team

from .grants import Effective, effective
from .models import Drain, GpuFlavor, Quota, QuotaGrant, QuotaRequest
from .tasks import reconcile_cluster_objects, reconcile_team_quotas

log = logging.getLogger(__name__)


def quotas_changed(team: Team) -> None:
    """A team's quota added, edited or removed by hand (the admin): its queues follow after
    commit, not at the next sweep."""
    enqueue(reconcile_team_quotas, team.pk)


def cluster_objects_changed(quotas=()) -> None:
    """A flavor, cohort or priority class was saved or deleted (the admin): the cluster-wide
    objects (ResourceFlavors, Cohorts, WorkloadPriorityClasses) follow once the transaction
    commits, and so do the queues of the teams holding `quotas` (those on the flavor, or in
    the cohort: their ClusterQueues name it)."""
    enqueue(reconcile_cluster_objects)
    for team in Team.objects.filter(quotas__in=quotas).distinct():
        quotas_changed(team)


def approve(quota_request: QuotaRequest, user, *, now=None, **numbers) -> QuotaGrant | None:
    """Approve a request (see `QuotaRequest.approve`) and apply its grant at once when it
    has started; None when someone else decided first."""
    now = now or timezone.now()
    with transaction.atomic():
        grant = quota_request.approve(user, now=now, **numbers)
        if grant is not None:
            apply_grants(now, team=grant.team, flavor=grant.flavor)
    return grant


def end_grant(grant: QuotaGrant, user, *, now=None) -> bool:
    """End a grant early (see `QuotaGrant.end_now`); the quota drops back at once."""
    now = now or timezone.now()
    with transaction.atomic():
        ended = grant.end_now(user, now=now)
        if ended:
            apply_grants(now, team=grant.team, flavor=grant.flavor)
    return ended


def grant(*, team: Team, flavor: GpuFlavor, now=None, **fields) -> QuotaGrant:
    """Create a grant from its fields; ``QuotaGrant.objects.add`` holds the rule."""
    return QuotaGrant.objects.add(QuotaGrant(team=team, flavor=flavor, **fields), now=now)


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
            enqueue(reconcile_team_quotas, team.pk)
    return changed


def apply_grants(now=None, *, team: Team | None = None, flavor: GpuFlavor | None = None,
                 failures: list[str] | None = None) -> list[int]:
    """1. find grants whose activity changed since last applied, 2. recompute each affected
    Quota row, 3. reconcile the teams whose row changed (after commit).
    Returns the ids of those teams. ``team`` and ``flavor`` narrow it to one quota.

    With ``failures`` (the sweep), a quota whose grants cannot be applied is logged with
    its error, described in that list and left as it was (its grants keep their `applied`
    flag, so the next sweep tries again), and the other quotas go on. Without it the
    error reaches the caller: an approval or an admin edit shows it."""
    now = now or timezone.now()
    due = QuotaGrant.objects.active_at(now).filter(applied=False) | QuotaGrant.objects.inactive_at(now).filter(applied=True)
    if team is not None:
        due = due.filter(team=team)
    if flavor is not None:
        due = due.filter(flavor=flavor)
    pairs = sorted(set(due.values_list("team_id", "flavor_id")))
    if team is not None and flavor is not None:
        pairs = sorted(set(pairs) | {(team.pk, flavor.pk)})  # a fresh grant or an edit
    changed = set()
    for team_id, flavor_id in pairs:
        try:
            if _apply_pair(now, team_id, flavor_id):
                changed.add(team_id)
        except Exception as err:  # noqa: BLE001 - one bad grant must not stop the sweep
            if failures is None:
                raise
            log.exception("grants of team #%s on flavor #%s could not be applied", team_id, flavor_id)
            failures.append(f"team #{team_id}, flavor #{flavor_id}: {type(err).__name__}: {err}")
    return sorted(changed)


# --- drains (docs/drain.md) ---------------------------------------------------------------------
def _flavor_queues_changed(flavor_id: int) -> None:
    """The queues of every team holding a quota on the flavor follow once committed (their
    ClusterQueues' stopPolicy), not at the next sweep."""
    for team in Team.objects.filter(quotas__flavor_id=flavor_id).distinct():
        quotas_changed(team)


def declare_drain(drain: Drain, user) -> Drain:
    """A quota manager drains a flavor by a deadline (`Drain.declare_by`); its queues hold at
    once when the drain has started."""
    with transaction.atomic():
        drain.declare_by(user)
        if drain.starts_at <= timezone.now():
            drain.held_at = timezone.now()
            Drain.objects.filter(pk=drain.pk).update(held_at=drain.held_at)
        _flavor_queues_changed(drain.flavor_id)
    return drain


def end_drain(drain: Drain, user, *, now=None) -> bool:
    """End a drain early: the flavor's queues reopen at once."""
    now = now or timezone.now()
    with transaction.atomic():
        ended = drain.end_by(user, now)
        if ended:
            Drain.objects.filter(pk=drain.pk, reopened_at__isnull=True).update(reopened_at=now)
            _flavor_queues_changed(drain.flavor_id)
    return ended


def drain_windows(now=None) -> dict[str, int]:
    """The sweep's part: drains whose window opened or closed since the last sweep are noted
    (``held_at``, ``reopened_at``) and their flavor's queues reconciled, so a pool reopens by
    itself at ``reopens_at`` (the sweep renders every queue from the time anyway; this makes
    it prompt and recorded)."""
    now = now or timezone.now()
    told = {"held": 0, "reopened": 0}
    with transaction.atomic():
        for drain in Drain.objects.open_at(now).filter(held_at__isnull=True):
            if Drain.objects.filter(pk=drain.pk, held_at__isnull=True).update(held_at=now):
                told["held"] += 1
                _flavor_queues_changed(drain.flavor_id)
        over = Drain.objects.filter(reopened_at__isnull=True, held_at__isnull=False).filter(
            Q(reopens_at__lte=now) | Q(ended_at__lte=now))
        for drain in over:
            if Drain.objects.filter(pk=drain.pk, reopened_at__isnull=True).update(reopened_at=now):
                told["reopened"] += 1
                _flavor_queues_changed(drain.flavor_id)
    return told
