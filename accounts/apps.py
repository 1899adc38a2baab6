from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Single sign-on"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
