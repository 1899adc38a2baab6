"""How long a signed-in session lasts, and the re-check of SSO sessions at the IdP.

``SessionLifetimeMiddleware``: a session ends after ``SESSION_IDLE_TIMEOUT_MINUTES`` without
a request, and ``SESSION_MAX_AGE_HOURS`` after its sign-in whatever its activity (password
and SSO sessions alike; the cookie and the stored session expire then too). The last-seen
stamp is written at most once a minute, so a busy session costs one session write a minute.

``SsoSessionRefresh``: mozilla-django-oidc's ``SessionRefresh``, which sends an SSO session
back to the IdP with ``prompt=none`` once its ID token is ``OIDC_SESSION_RECHECK_MINUTES``
old. The IdP answers at once: signed in still (the callback signs the person in again,
their groups applied anew) or not (the callback ends the session here). Endpoints come
from discovery when first needed (the library reads them at start-up), and an htmx
request is sent there by a full-page redirect (``HX-Redirect``), never inside a fragment.
"""

import logging
import time

import requests
from django.conf import settings
from django.contrib import auth
from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponse
from django.utils.deprecation import MiddlewareMixin
from mozilla_django_oidc.middleware import SessionRefresh

from .oidc import oidc_setting

log = logging.getLogger(__name__)

STARTED = "_session_started_at"  # epoch seconds of the sign-in
SEEN = "_session_seen_at"  # epoch seconds of the last request (to the minute)
SEEN_RESOLUTION_SECONDS = 60


def session_started(sender, request, user, **kwargs) -> None:
    """``user_logged_in``: a sign-in starts the absolute lifetime afresh (an SSO re-check is
    a sign-in too, and renews it: the IdP said yes again)."""
    now = int(time.time())
    request.session[STARTED] = request.session[SEEN] = now


def why_ended(session, now: int) -> str | None:
    """Why this signed-in session is over, or ``None``."""
    started, seen = session.get(STARTED), session.get(SEEN)
    if started is not None and now - started > settings.SESSION_MAX_AGE_HOURS * 3600:
        return f"signed in more than {settings.SESSION_MAX_AGE_HOURS} h ago"
    if seen is not None and now - seen > settings.SESSION_IDLE_TIMEOUT_MINUTES * 60:
        return f"idle for more than {settings.SESSION_IDLE_TIMEOUT_MINUTES} min"
    return None


class SessionLifetimeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            now = int(time.time())
            reason = why_ended(request.session, now)
            if reason is not None:
                log.info("session of %s ended: %s", request.user.get_username(), reason)
                auth.logout(request)  # the request goes on as anonymous: pages ask for a sign-in
            else:
                request.session.setdefault(STARTED, now)  # a session from before these settings
                if now - request.session.get(SEEN, 0) >= SEEN_RESOLUTION_SECONDS:
                    request.session[SEEN] = now
        return self.get_response(request)


class SsoSessionRefresh(SessionRefresh):
    OIDC_EXEMPT_URLS: list = []
    OIDC_STATE_SIZE = 32
    OIDC_NONCE_SIZE = 32
    OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
    get_settings = staticmethod(oidc_setting)

    def __init__(self, get_response):
        MiddlewareMixin.__init__(self, get_response)  # the library reads every endpoint here

    OIDC_OP_AUTHORIZATION_ENDPOINT = property(lambda self: oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT"))
    OIDC_RP_CLIENT_ID = property(lambda self: settings.OIDC_RP_CLIENT_ID)
    OIDC_RP_SCOPES = property(lambda self: settings.OIDC_RP_SCOPES)
    OIDC_USE_NONCE = property(lambda self: settings.OIDC_USE_NONCE)

    def process_request(self, request):
        if not settings.SSO_ENABLED:
            return None
        try:
            response = super().process_request(request)
        except (requests.RequestException, SuspiciousOperation, ValueError) as err:
            # The IdP cannot say; the session keeps its own lifetime (SessionLifetimeMiddleware).
            log.warning("sso: cannot re-check the session of %s: %s", request.user, err)
            return None
        if response is not None and getattr(request, "htmx", False):
            # Back to the page the fragment belongs to, not to the fragment.
            current = request.htmx.current_url_abs_path
            if current:
                request.session["oidc_login_next"] = current
            redirect = HttpResponse(status=204)
            redirect["HX-Redirect"] = response["Location"]
            return redirect
        return response
