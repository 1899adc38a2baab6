"""The address a request comes from, one rule for login lockouts (django-axes) and API
throttling (DRF): ``REMOTE_ADDR``, or behind ``TRUSTED_PROXY_COUNT`` proxies the entry
they appended to ``X-Forwarded-For`` (anything further left the client could have typed)."""

from rest_framework.throttling import BaseThrottle


def client_ip(request) -> str:
    return BaseThrottle().get_ident(request)
