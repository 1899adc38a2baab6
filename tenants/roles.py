"""Platform-wide roles. Team roles live on Membership; "quota manager" is a Django group."""

from django.contrib.auth.models import Group, Permission

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
        # The console: decide requests, run grants, read the audit trail.
        "quotarequest": "change view",
        "quotagrant": "add change view",
        "historicalteam": "view",
        "historicalmembership": "view",
        "historicalgpuflavor": "view",
        "historicalquota": "view",
        "historicalquotagrant": "view",
        "historicalquotarequest": "view",
    },
    "jobs": {"job": "view", "jobevent": "view"},
}


def is_quota_manager(user) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    # Cached per request object by Django's permission backend.
    return user.has_perm("quotas.change_quota")


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
