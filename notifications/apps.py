from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Listens to the apps below through signals (they never import this app) and records
    each event worth telling once; Celery tasks deliver it by email and to webhooks."""

    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # Receivers and checks import models, which exist only once the registry is ready.
        from . import checks, receivers  # noqa: F401

        receivers.connect()
