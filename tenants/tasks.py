"""Reconcile a team's namespace, RBAC and policies onto the cluster, and offboard teams."""

import logging

from celery import shared_task

from cluster import PermanentError
from core.owners import Owner, Scope, labelled_kinds, registered, run
from core.ownership import selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, enqueue, sync

from .manifests import TEAM_KINDS, render_team
from .models import SystemNamespace, Team
from .models.identities import expire_idp_access as expire_stale_idp_access

log = logging.getLogger(__name__)

NAMESPACE = ("v1", "Namespace")
# The admission policy's parameters (`tenants.admission`). Offboarding leaves them to go with
# the namespace: without them the policy refuses every write to a pod in the namespace, the
# Job controller's removal of its tracking finalizer included, so pods being deleted would
# stay Terminating for ever (holding their GPUs) and the namespace with them.
ADMISSION_PARAMS = ("v1", "ConfigMap")


# --- the teams, as every team-wide owner reads them (team objects here, team quotas) ---------
def load_teams(keys: list | None):
    return Team.objects.all() if keys is None else Team.objects.filter(pk__in=keys).order_by("pk")


def team_keys() -> list[int]:
    return list(Team.objects.values_list("pk", flat=True))


def team_key_for(slug: str) -> int | None:
    return Team.objects.filter(slug=slug).values_list("pk", flat=True).first()


TEAM_ITEMS = dict(load=load_teams, keys=team_keys, key=lambda team: team.pk, label=lambda team: team.slug,
                  key_for=team_key_for, title=lambda team: f"team {team.slug}")


# --- the team's own objects ------------------------------------------------------------------
def _render(team: Team) -> list[dict]:
    return render_team(team, list(team.memberships.select_related("user", "user__oidc_identity")),
                       list(team.group_mappings.all()))


def _refused(team: Team, err: Exception, outcome: Outcome) -> Outcome | None:
    if isinstance(err, SystemNamespace):
        team.set_status(Team.Status.ERROR, str(err))
        return Outcome()
    if isinstance(err, PermanentError):
        team.set_status(Team.Status.ERROR, f"The cluster refused the team's objects: {err}")
    return None


def _ready(cluster, team: Team, outcome: Outcome) -> None:
    team.set_status(Team.Status.READY, "")


def sync_team(cluster, team: Team) -> Outcome:
    """Render, apply and prune the team's objects; the team ready (or `error` with why)."""
    return run(cluster, TEAM_OBJECTS, team)


def offboard(cluster, team: Team) -> Outcome:
    """Delete everything the team owns on the cluster (whatever owner put it there: its
    objects, its quotas, its jobs' workloads; namespace last), then the row. A system
    namespace is never deleted, even if it carries the team's label."""
    kinds = [kind for kind in labelled_kinds(registered(), Scope.TEAM) if kind != ADMISSION_PARAMS]
    if team.owns_system_namespace:
        kinds = [kind for kind in kinds if kind != NAMESPACE]
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


@shared_task(ignore_result=True)
def expire_idp_access() -> int:
    """Beat, every minute: IdP memberships and roles not renewed by a sign-in within
    ``OIDC_MEMBERSHIP_TTL_HOURS`` end; their teams' RoleBindings follow after commit."""
    changes = expire_stale_idp_access()
    for change in changes:
        log.info("sso: %s", change)
    return len(changes)


# The team's namespace, LimitRange, ServiceAccount, RBAC and policies. Its Namespace is
# applied but never pruned by a reconcile: only offboarding deletes it, last.
TEAM_OBJECTS = Owner(
    name="team objects", scope=Scope.TEAM, kinds=tuple(TEAM_KINDS), also_applies=(NAMESPACE,),
    render=_render, refused=_refused, record=_ready, task=reconcile_team, **TEAM_ITEMS,
)
