"""Local password login, which ``LOCAL_LOGIN_ENABLED=false`` narrows to superusers (the
break-glass path: /admin/login/ or /login/?local=1 with their password)."""

from django.conf import settings
from django.contrib.auth.backends import ModelBackend


class LocalBackend(ModelBackend):
    def user_can_authenticate(self, user) -> bool:
        if not super().user_can_authenticate(user):
            return False
        return settings.LOCAL_LOGIN_ENABLED or user.is_superuser
