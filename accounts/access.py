"""Who can do what in a team, and why: one answer for the access page and the API.

The abilities are the permission map's (docs/console.md); the reasons are where each
right comes from: a hand-made membership, an IdP group (``Membership.via_group``), or the
quota-manager role (given by hand, by an IdP group, or by being a superuser).
"""

from django.contrib.auth import get_user_model
from django.db.models import Q

from tenants.models import Membership, Team
from tenants.models.identities import GroupMapping, OidcIdentity, cluster_user_name
from tenants.roles import QUOTA_MANAGER_GROUP

ABILITIES = {
    Membership.Role.OWNER: ["see the team", "submit jobs", "cancel jobs", "add and remove members",
                            "ask for quota", "kubectl: read, logs, port-forward"],
    Membership.Role.MEMBER: ["see the team", "submit jobs", "cancel jobs", "kubectl: read, logs, port-forward"],
    Membership.Role.VIEWER: ["see the team", "kubectl: read, logs"],
}
QUOTA_MANAGER_ABILITIES = ["see the team", "add and remove members", "decide quota requests", "end grants",
                           "write in the admin"]


def _why(membership: Membership) -> str:
    if membership.from_idp:
        return f"IdP group {membership.via_group}"
    return "hand-made membership"


def team_access(team: Team) -> dict:
    """``{"people": [...], "quota_managers": [...], "groups": [...]}`` for the team."""
    memberships = (team.memberships.select_related("user", "user__oidc_identity")
                   .order_by("role", "user__username"))
    people = [{
        "username": m.user.get_username(),
        "active": m.user.is_active,
        "role": m.role,
        "source": m.source,
        "via_group": m.via_group,
        "why": _why(m),
        "can": ABILITIES[m.role],
        "cluster_user": cluster_user_name(m.user) if m.user.is_active else "",
    } for m in memberships]
    managers = (get_user_model().objects.filter(is_active=True)
                .filter(Q(is_superuser=True) | Q(groups__name=QUOTA_MANAGER_GROUP)).distinct()
                .order_by("username"))
    via_idp = set(OidcIdentity.objects.filter(user__in=managers, quota_manager_via_idp=True)
                  .values_list("user_id", flat=True))
    quota_managers = [{
        "username": u.get_username(),
        "why": "superuser" if u.is_superuser else ("IdP group" if u.pk in via_idp else "given by hand"),
        "can": QUOTA_MANAGER_ABILITIES,
    } for u in managers]
    groups = [{"group": g.group, "role": g.role, "can": ABILITIES[g.role]}
              for g in GroupMapping.objects.filter(team=team).order_by("group")]
    return {"team": team.slug, "people": people, "quota_managers": quota_managers, "groups": groups}
