"""System checks of the single sign-on settings (stable ids: accounts.W001, ...)."""

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def sso_settings(app_configs, **kwargs):
    found = []
    if settings.SSO_ENABLED and settings.OIDC_ISSUER.startswith("http://") and not settings.DEBUG:
        found.append(Warning(
            f"OIDC_ISSUER={settings.OIDC_ISSUER} is plain http: ID tokens and the client secret cross "
            "the network unprotected.", hint="Use the IdP's https issuer URL.", id="accounts.W001"))
    if settings.CLUSTER_OIDC_BIND_GROUPS and not settings.SSO_ENABLED:
        found.append(Warning(
            "CLUSTER_OIDC_BIND_GROUPS is on without OIDC_ISSUER: mapped IdP groups are bound on the "
            "cluster although nobody signs in here with that IdP.",
            hint="Set OIDC_ISSUER, or turn CLUSTER_OIDC_BIND_GROUPS off.", id="accounts.W002"))
    return found
