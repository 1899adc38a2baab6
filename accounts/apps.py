from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Single sign-on"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from . import checks  # noqa: F401  (registers the system checks)
        from .lockout import code_used
        from .sessions import session_started

        user_logged_in.connect(session_started, dispatch_uid="accounts-session-started")
        user_logged_in.connect(code_used, dispatch_uid="accounts-unlock-code-used")
