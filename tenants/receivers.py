"""Revoke on the cluster as soon as people's access changes: adding, changing or removing
a membership, or deactivating (or deleting) an account, reconciles the team's RoleBindings
once the transaction commits, instead of waiting for the next sweep. Connected in
``TenantsConfig.ready``; they catch every path (the team page, the admin and its inlines,
the user admin, commands)."""

from .models import Membership, Team
from .tasks import reconcile_team_soon


def membership_saved(sender, instance: Membership, **kwargs) -> None:
    reconcile_team_soon(instance.team)


def membership_deleted(sender, instance: Membership, origin=None, **kwargs) -> None:
    # Deleting the team itself (offboarding ends so) leaves nothing to reconcile.
    if isinstance(origin, Team):
        return
    reconcile_team_soon(instance.team)


def _may_touch_is_active(created: bool, update_fields) -> bool:
    # A login stamps only ``last_login``; a new account is in no team yet.
    return not created and (update_fields is None or "is_active" in update_fields)


def user_saving(sender, instance, update_fields=None, **kwargs) -> None:
    """Remember whether the account was active before this save (one small read)."""
    if instance.pk is not None and _may_touch_is_active(False, update_fields):
        instance._was_active = sender.objects.filter(pk=instance.pk).values_list("is_active", flat=True).first()


def user_saved(sender, instance, created: bool, update_fields=None, **kwargs) -> None:
    """A deactivated account leaves its teams' RoleBindings (``render_rbac``); a
    reactivated one comes back. Saves that leave ``is_active`` as it was reconcile nothing."""
    was = getattr(instance, "_was_active", None)
    if not _may_touch_is_active(created, update_fields) or was is None or was == instance.is_active:
        return
    for team in Team.objects.filter(memberships__user=instance).exclude(status=Team.Status.DELETING).distinct():
        reconcile_team_soon(team)
