"""How the API knows who calls and what they may do: bearer tokens (CI), sessions
(browser, with CSRF), token scopes, and throttling keyed by token.

A request made with a token acts as the token's user, narrowed to the token's team and
scopes; every viewset still starts from the same ``visible_to(user)`` querysets as the UI.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, permissions, throttling
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from core.ratelimit import count as _count

from .models import Team
from .recent_tokens import RECENT
from .tokens import ApiToken, Scope

KEYWORD = "Bearer"


class TokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer gpp_…``. Sets ``request.auth`` to the ``ApiToken``."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() != KEYWORD.lower():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Send the token as 'Authorization: Bearer <token>'.")
        token = RECENT.find(header[1].decode(errors="replace"), ApiToken.objects.find)
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown API token.")
        if token.is_revoked:
            raise exceptions.AuthenticationFailed("This API token was revoked.")
        if token.is_expired:
            raise exceptions.AuthenticationFailed(
                f"This API token expired on {token.expires_at:%Y-%m-%d %H:%M} UTC; create a new one."
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token's user is inactive.")
        RECENT.used(token)
        return token.user, token

    def authenticate_header(self, request):
        # Makes DRF answer 401 (not 403) to requests without credentials.
        return f'{KEYWORD} realm="api"'


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = TokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API token: `Bearer gpp_…`."}

    def get_security_requirement(self, auto_schema):
        # Operations no token may call (session only) offer only the session cookie.
        return {self.name: []} if token_may(auto_schema.view, auto_schema.method) else None


def token_of(request) -> ApiToken | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


# What a token needs for each kind of request; a browser session has every scope.
SAFE_SCOPE = Scope.READ


class TokenScope(permissions.BasePermission):
    """A token may only do what its scopes allow: ``read`` for GET, and the scope an
    action names in ``required_scope`` (``submit``, ``cancel``) for writes."""

    message = "This token lacks the scope for this request."

    def has_permission(self, request, view):
        token = token_of(request)
        if token is None:
            return True
        method = request.method.lower()
        if method not in view.http_method_names or not hasattr(view, method):
            return True  # no such operation: 405, whoever asks
        needed = _needed_scope(view, request.method)
        if needed is None or not token.has_scope(needed):
            self.message = f"This token lacks the '{needed or 'session'}' scope for this request."
            return False
        return True


class SessionOnly(permissions.BasePermission):
    """Token management needs a person in a browser session: a leaked CI token must not
    be able to mint or list tokens."""

    message = "Manage API tokens from a signed-in session, not with a token."

    def has_permission(self, request, view):
        return token_of(request) is None


def _needed_scope(view, method: str) -> str | None:
    """The scope a token needs for ``method`` on ``view``; None when only a session may."""
    if method.upper() in permissions.SAFE_METHODS:
        return SAFE_SCOPE
    return getattr(view, "required_scopes", {}).get(getattr(view, "action", None))


def token_may(view, method: str) -> bool:
    """Whether a token with the right scope may make this request at all (the schema's
    security of each operation says the same)."""
    if any(isinstance(permission, SessionOnly) for permission in view.get_permissions()):
        return False
    return _needed_scope(view, method) is not None


class TokenRateThrottle(throttling.SimpleRateThrottle):
    """One bucket per token (so two CI pipelines of one person do not starve each other),
    per user for sessions, per address for anonymous requests.

    Counted in fixed windows of the rate's period: one counter per bucket and window, one
    cache round trip a request whatever the rate (DRF's throttle reads and rewrites the
    list of every request's time in the period: 600 floats a request at 600/minute). A
    client may send up to twice the rate across a window's edge."""

    scope = "api"

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_ends = (window + 1) * self.duration
        count = _count(self.cache, f"{self.key}:{window}", timeout=self.duration + 1)
        return count <= self.num_requests

    def wait(self) -> float:
        return max(self.window_ends - self.now, 1)

    def get_cache_key(self, request, view):
        token = token_of(request)
        if token is not None:
            ident = f"token-{token.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"anon-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


def visible_teams(request):
    """``Team.objects.visible_to`` narrowed to the request's token team, if any."""
    teams = Team.objects.visible_to(request.user)
    token = token_of(request)
    return token.narrow(teams, team_field="") if token else teams
