from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Teams"

    def ready(self) -> None:
        from .roles import ensure_quota_manager_group

        post_migrate.connect(ensure_quota_manager_group, dispatch_uid="quota-manager-group")
