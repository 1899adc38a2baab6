"""Team state changes that must reach the cluster: change the rows, then enqueue the
reconcile once the transaction commits. The edges (the admin included) call these; the
rules (who may offboard, what offboarding marks) stay on the models, which never enqueue."""

from .models import Team
from .tasks import reconcile_team_soon


def team_saved(team: Team) -> None:
    """A team added or edited: its namespace, LimitRange, RBAC and policies follow after
    commit, not at the next sweep."""
    reconcile_team_soon(team)


def offboard(team: Team, user) -> bool:
    """Mark ``team`` for offboarding and reconcile it, which deletes its namespace, queues and
    workloads, and then the team. ``False`` when it was already being offboarded."""
    if not team.start_offboarding(user):
        return False
    reconcile_team_soon(team)  # after commit
    return True
