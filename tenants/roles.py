"""Platform-wide roles. Team roles live on Membership; "quota manager" is a Django group."""

from django.contrib.auth.models import Group, Permission
from django.db.models import Exists, OuterRef, Q

QUOTA_MANAGER_GROUP = "Quota managers"

# What a quota manager may do in the console: run teams, members and quotas; watch jobs.
QUOTA_MANAGER_PERMISSIONS = {
    "tenants": {"team": "add change delete view", "membership": "add change delete view",
                # Single sign-on: map IdP groups, see who signs in as whom.
                "groupmapping": "add change delete view", "historicalgroupmapping": "view",
                "oidcidentity": "view", "historicaloidcidentity": "view"},
    "quotas": {
        "gpuflavor": "add change delete view",
        "cohort": "add change delete view",
        "quota": "add change delete view",
        "priorityclass": "add change delete view",
        # Idle-GPU reclaim: a flavor's policy and a team's override.
        "idlepolicy": "add change delete view",
        "historicalidlepolicy": "view",
        # Per-person caps inside a team (set by its owners; the admin for the cases they ask).
        "membercap": "add change delete view",
        "historicalmembercap": "view",
        # The Kubeflow Trainer runtimes teams may run TrainJobs on (docs/trainjobs.md).
        "trainingruntime": "add change delete view",
        "historicaltrainingruntime": "view",
        # The console: decide requests (in the console only; the admin shows them read
        # only), run grants, read the audit trail.
        "quotarequest": "view",
        "quotagrant": "add change view",
        "historicalteam": "view",
        "historicalmembership": "view",
        "historicalgpuflavor": "view",
        "historicalquota": "view",
        "historicalquotagrant": "view",
        "historicalquotarequest": "view",
    },
    "jobs": {"job": "view", "jobevent": "view", "idlewatch": "view", "historicalidlewatch": "view"},
}


# Set on a user object once known, for the rest of the request.
QUOTA_MANAGER_FLAG = "_is_quota_manager"


def is_quota_manager(user) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    # An API token's lookup answers it in its own query (``quota_manager_flag``); a session
    # asks Django's permission backend, which remembers every permission on the user
    # object for the pages' other checks.
    if not hasattr(user, QUOTA_MANAGER_FLAG):
        setattr(user, QUOTA_MANAGER_FLAG, user.has_perm("quotas.change_quota"))
    return getattr(user, QUOTA_MANAGER_FLAG)


def quota_manager_flag(user_field: str):
    """For ``annotate`` on a query that reads an active user (then set as
    ``QUOTA_MANAGER_FLAG`` on it): whether ``has_perm("quotas.change_quota")`` says yes."""
    user = OuterRef(user_field)
    return Exists(Permission.objects.filter(
        Q(user=user) | Q(group__user=user), content_type__app_label="quotas", codename="change_quota"))


def ensure_quota_manager_group(sender=None, **kwargs) -> Group:
    """Create (or repair) the quota-manager group; runs after every ``migrate``."""
    group, _ = Group.objects.get_or_create(name=QUOTA_MANAGER_GROUP)
    wanted = [
        f"{action}_{model}"
        for models in QUOTA_MANAGER_PERMISSIONS.values()
        for model, actions in models.items()
        for action in actions.split()
    ]
    perms = Permission.objects.filter(
        content_type__app_label__in=QUOTA_MANAGER_PERMISSIONS, codename__in=wanted
    )
    group.permissions.add(*perms)
    return group
