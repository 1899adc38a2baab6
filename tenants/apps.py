from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save, pre_save


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Teams"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group, Permission

        from . import receivers, recent_tokens
        from .models import Membership
        from .roles import ensure_quota_manager_group
        from .tokens import ApiToken

        post_migrate.connect(ensure_quota_manager_group, dispatch_uid="quota-manager-group")
        post_save.connect(receivers.membership_saved, sender=Membership, dispatch_uid="membership-saved-reconciles")
        post_delete.connect(receivers.membership_deleted, sender=Membership, dispatch_uid="membership-deleted-reconciles")
        pre_save.connect(receivers.user_saving, sender=settings.AUTH_USER_MODEL, dispatch_uid="user-saving-reconciles")
        post_save.connect(receivers.user_saved, sender=settings.AUTH_USER_MODEL, dispatch_uid="user-saved-reconciles")

        # What a token may do changed: every process looks its tokens up again.
        user = get_user_model()
        for model in (ApiToken, user, Group, Permission):
            post_delete.connect(recent_tokens.bump, sender=model, dispatch_uid=f"recent-tokens-{model.__name__}-deleted")
        post_save.connect(recent_tokens.bump, sender=ApiToken, dispatch_uid="recent-tokens-token-saved")
        post_save.connect(recent_tokens.user_saved, sender=user, dispatch_uid="recent-tokens-user-saved")
        for through in (user.groups.through, user.user_permissions.through, Group.permissions.through):
            m2m_changed.connect(recent_tokens.bump, sender=through, dispatch_uid=f"recent-tokens-{through.__name__}")
