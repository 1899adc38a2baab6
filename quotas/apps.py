from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate


def seed_training_runtimes(sender, using="default", **kwargs) -> None:
    """After every ``migrate`` (the chart's migration Job runs one on each install and upgrade):
    the runtimes the chart seeds (``TRAINING_RUNTIMES``) that are not rows yet."""
    from .models.runtimes import seed_from_settings

    seed_from_settings(settings.TRAINING_RUNTIMES, using=using)


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "GPU quotas"

    def ready(self) -> None:
        post_migrate.connect(seed_training_runtimes, sender=self, dispatch_uid="quotas.seed_training_runtimes")
