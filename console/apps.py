from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The pages and API that bring teams, quotas and jobs together (no models of its own):
    the dashboard, team pages, usage and accounting, and the quota managers' console."""

    name = "console"
    verbose_name = "Console"
