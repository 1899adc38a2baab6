from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from . import receivers  # the app registry is ready only now

        receivers.connect()
