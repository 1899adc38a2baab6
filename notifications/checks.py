"""System checks for the notification settings (stable ids notifications.E00x)."""

from django.conf import settings
from django.core.checks import Error, Warning, register

from .addresses import allowed_networks


@register()
def check_webhook_networks(app_configs=None, **kwargs):
    try:
        allowed_networks(settings.WEBHOOK_ALLOWED_NETWORKS)
    except ValueError as err:
        return [Error(f"WEBHOOK_ALLOWED_NETWORKS has a value that is not a network: {err}",
                      hint="Use CIDRs separated by commas, e.g. 10.20.0.0/16,192.0.2.10/32.",
                      id="notifications.E001")]
    return []


@register(deploy=True)
def check_public_url(app_configs=None, **kwargs):
    """Links in emails and webhook bodies are built from PUBLIC_URL."""
    if "://localhost" in settings.PUBLIC_URL or "://127.0.0.1" in settings.PUBLIC_URL:
        return [Warning(f"PUBLIC_URL is {settings.PUBLIC_URL}: links in emails and webhook bodies will not "
                        "work for anyone else.", hint="Set PUBLIC_URL to the address people use, e.g. "
                        "https://gpu.example.org.", id="notifications.W001")]
    return []
