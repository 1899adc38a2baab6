"""Reconcile a team's namespace, RBAC and policies onto the cluster, and offboard teams."""

import logging

from celery import shared_task

import schedulers
from cluster import PermanentError
from core.ownership import selector, team_selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, enqueue, sync

from .manifests import TEAM_KINDS, render_team
from .models import SystemNamespace, Team

log = logging.getLogger(__name__)

# Everything that can carry a team's label: its own objects, its jobs' workloads, its
# quotas' ResourceQuota and (cluster-scoped) queues, and the namespace, deleted last.
NAMESPACE = ("v1", "Namespace")
OFFBOARD_KINDS = [
    *schedulers.all_kinds("workload_kinds"), *TEAM_KINDS, ("v1", "ResourceQuota"),
    *schedulers.all_kinds("queue_kinds"), NAMESPACE,
]


def sync_team(cluster, team: Team) -> Outcome:
    """1. render, 2. apply, 3. prune the team's objects that are no longer desired,
    4. record the outcome on the team (only when it changed)."""
    try:
        desired = render_team(team, list(team.memberships.select_related("user", "user__oidc_identity")),
                              list(team.group_mappings.all()))
    except SystemNamespace as err:
        team.set_status(Team.Status.ERROR, str(err))
        return Outcome()
    try:
        outcome = sync(cluster, desired, selector=team_selector(team.slug), kinds=TEAM_KINDS)
    except PermanentError as err:
        team.set_status(Team.Status.ERROR, f"The cluster refused the team's objects: {err}")
        raise
    team.set_status(Team.Status.READY, "")
    return outcome


def offboard(cluster, team: Team) -> Outcome:
    """Delete everything the team owns on the cluster (namespace last), then the row.
    A system namespace is never deleted, even if it carries the team's label."""
    kinds = [kind for kind in OFFBOARD_KINDS if kind != NAMESPACE] if team.owns_system_namespace else OFFBOARD_KINDS
    outcome = sync(cluster, [], selector=selector(team=team.slug), kinds=kinds)
    team.delete()
    return outcome


@shared_task(**RETRY_POLICY)
def reconcile_team(self, team_id: int) -> int:
    team = Team.objects.filter(pk=team_id).first()
    if team is None:
        return 0
    try:
        cluster = current_cluster()
    except NoCluster as err:
        team.set_status(Team.Status.PENDING, str(err))
        return 0
    if team.status == Team.Status.DELETING:
        return offboard(cluster, team).writes
    try:
        return sync_team(cluster, team).writes
    except PermanentError:
        log.warning("team %s: %s", team.slug, team.status_message)
        return 0


def reconcile_team_soon(team: Team) -> None:
    enqueue(reconcile_team, team.pk)
