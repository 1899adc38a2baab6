"""App config for the project package: registers system checks and management commands, and\ninstalls the reconciled owners (`gpuplatform.owners`)."""

from django.apps import AppConfig


class GpuPlatformConfig(AppConfig):
    name = "gpuplatform"
    verbose_name = "GPU Platform"

    def ready(self) -> None:
        from core.owners import install

        from . import (
            checks,  # noqa: F401  (registers the checks)
            heal,  # noqa: F401  (the leader's watcher runs the heal: jobs.watch.watcher.leading)
            metrics,  # noqa: F401  (connects the Celery signal handlers that count tasks)
        )
        from .owners import OWNERS

        install(OWNERS)  # the reconciled owners, also for the apps below the list (offboarding)
