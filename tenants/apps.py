from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_migrate, post_save, pre_save


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Teams"

    def ready(self) -> None:
        from . import receivers
        from .models import Membership
        from .roles import ensure_quota_manager_group

        post_migrate.connect(ensure_quota_manager_group, dispatch_uid="quota-manager-group")
        post_save.connect(receivers.membership_saved, sender=Membership, dispatch_uid="membership-saved-reconciles")
        post_delete.connect(receivers.membership_deleted, sender=Membership, dispatch_uid="membership-deleted-reconciles")
        pre_save.connect(receivers.user_saving, sender=settings.AUTH_USER_MODEL, dispatch_uid="user-saving-reconciles")
        post_save.connect(receivers.user_saved, sender=settings.AUTH_USER_MODEL, dispatch_uid="user-saved-reconciles")
