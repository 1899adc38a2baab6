"""Sign-in and sign-out pages (local password and SSO), the OIDC views the library routes
under /oidc/, personal API tokens, IdP group mappings, and a team's access page."""

import requests
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, SuspiciousOperation, ValidationError
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from tenants.models import Team
from tenants.models.identities import GroupMapping
from tenants.roles import is_quota_manager
from tenants.tokens import ApiToken

from .access import team_access
from .forms import GroupMappingForm, TokenForm
from .oidc import oidc_setting, provider_logout_url

# What an IdP answers a prompt=none re-check (accounts.sessions) when it no longer signs the
# person in without asking them.
SIGNED_OUT_AT_THE_IDP = {"login_required", "interaction_required", "consent_required", "account_selection_required"}


def _sso_failed(request, reason: str, status: int = 400):
    """The one answer to any refused sign-in: a plain page, and no session left."""
    if request.user.is_authenticated:
        auth.logout(request)
    response = render(request, "accounts/sso_failed.html", {"reason": reason}, status=status)
    add_never_cache_headers(response)
    return response


class LoginView(auth_views.LoginView):
    """The login page: "Sign in with SSO" when OIDC_ISSUER is set; the password form unless
    LOCAL_LOGIN_ENABLED is off (then only at /login/?local=1, for superusers)."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = settings.SSO_ENABLED
        context["local_login"] = settings.LOCAL_LOGIN_ENABLED or "local" in self.request.GET
        return context


class LogoutView(auth_views.LogoutView):
    """Sign out here and, after an SSO login, at the identity provider too."""

    def post(self, request, *args, **kwargs):
        if settings.SSO_ENABLED and request.session.get("oidc_id_token"):
            target = provider_logout_url(request)
            auth.logout(request)
            return HttpResponseRedirect(target)
        return super().post(request, *args, **kwargs)


class AuthenticateView(OIDCAuthenticationRequestView):
    """Start an SSO sign-in: state, nonce and a PKCE challenge kept in the session."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args, **kwargs):
        View.__init__(self, *args, **kwargs)  # endpoints are read in get(), not per instance

    def get(self, request):
        if not settings.SSO_ENABLED:
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except (requests.RequestException, ValueError, SuspiciousOperation) as err:
            return _sso_failed(request, f"The identity provider cannot be reached ({err}).", status=502)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """The IdP's answer. Whatever is wrong with it (an error, an unknown or reused state, a
    refused code, an ID token for someone or something else, an expired one) ends on the
    same page, with the reason and without a session."""

    get_settings = staticmethod(oidc_setting)

    def get(self, request):
        if not settings.SSO_ENABLED:
            raise Http404("Single sign-on is not configured.")
        pending = _take_state(request)
        refusal = _refusal(request, pending)
        if refusal:
            return _sso_failed(request, refusal)
        # A fresh copy of the session, as the library does: parallel tabs may change it.
        request.session = request.session.__class__(request.session.session_key)
        failure = self._authenticate(request, pending)
        if failure is not None:
            return failure
        if self.user is None or not self.user.is_active:
            return _sso_failed(request, getattr(request, "sso_error", None)
                               or "The identity provider's answer did not sign anyone in.")
        response = self.login_success()
        for change in getattr(request, "sso_changes", []):
            messages.info(request, f"Your access changed: {change}.")
        return response

    def _authenticate(self, request, pending):
        """Trade the code for tokens and a user (self.user); a failure page when that fails."""
        try:
            self.user = auth.authenticate(request=request, nonce=pending.get("nonce"),
                                          code_verifier=pending.get("code_verifier"))
        except requests.HTTPError as err:
            code = err.response.status_code if err.response is not None else "?"
            return _sso_failed(request, "The identity provider refused the sign-in code (used already, "
                                        f"expired, or not issued to this browser; HTTP {code}).")
        except requests.RequestException as err:
            return _sso_failed(request, f"The identity provider cannot be reached ({err}).", status=502)
        except SuspiciousOperation as err:
            return _sso_failed(request, str(err))
        return None


def _take_state(request) -> dict | None:
    """The sign-in this answer's state belongs to, removed from the session at once: each
    state answers once, so an answer cannot be replayed."""
    state = request.GET.get("state", "")
    states = request.session.get("oidc_states")
    pending = states.pop(state, None) if isinstance(states, dict) else None
    if pending is not None:
        request.session.modified = True
        request.session.save()
    return pending


def _refusal(request, pending) -> str | None:
    """Why the IdP's answer cannot sign anyone in before its code is even tried, or None."""
    if request.GET.get("error") in SIGNED_OUT_AT_THE_IDP:  # a re-check (prompt=none) said no
        return ("Your sign-in at the identity provider has ended, so your session "
                "here has too. Please sign in again.")
    if request.GET.get("error"):
        detail = request.GET.get("error_description") or request.GET["error"]
        return f"The identity provider refused the sign-in: {detail[:300]}"
    if not request.GET.get("code") or pending is None:
        return ("This sign-in answer does not belong to a sign-in started in this "
                "browser, or it was used already. Please sign in again.")
    return None


# --- personal API tokens ------------------------------------------------------------------

def _token_page(request, form, created=None, secret=None, status=200):
    tokens = ApiToken.objects.filter(user=request.user).select_related("team")
    response = render(request, "accounts/tokens.html",
                      {"form": form, "tokens": tokens, "created": created, "secret": secret}, status=status)
    add_never_cache_headers(response)  # the secret must stay in no cache
    return response


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request):
    """Your API tokens: create one (one team, scopes, expiry; the secret shown once), list
    them, revoke them. For CI pipelines and gpuctl, now that SSO accounts have no password."""
    if request.method == "GET":
        return _token_page(request, TokenForm(user=request.user))
    form = TokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return _token_page(request, form, status=400)
    try:
        token, secret = form.save()
    except ValidationError as err:  # one token more than a person may hold (MAX_API_TOKENS_PER_USER)
        form.add_error(None, err)
        return _token_page(request, form, status=400)
    return _token_page(request, TokenForm(user=request.user), created=token, secret=secret, status=201)


@login_required
@require_POST
def token_revoke(request, pk):
    token = get_object_or_404(ApiToken.objects.filter(user=request.user), pk=pk)
    if token.revoke():
        messages.success(request, f"Revoked {token.prefix}… ({token.name}).")
    return redirect("accounts:tokens")


# --- IdP group mappings (quota managers) ------------------------------------------------------

def _require_quota_manager(request):
    if not is_quota_manager(request.user):
        raise PermissionDenied("Only quota managers map IdP groups.")


def _mapping_page(request, form, status=200):
    mappings = GroupMapping.objects.select_related("team")
    return render(request, "accounts/group_mappings.html",
                  {"form": form, "mappings": mappings, "sso_enabled": settings.SSO_ENABLED,
                   "groups_claim": settings.OIDC_GROUPS_CLAIM}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def group_mappings(request):
    """Which IdP groups make people owners, members or viewers of which team, or quota
    managers. Takes effect at each person's next SSO login."""
    _require_quota_manager(request)
    if request.method == "GET":
        return _mapping_page(request, GroupMappingForm())
    form = GroupMappingForm(request.POST)
    if not form.is_valid():
        return _mapping_page(request, form, status=400)
    mapping = form.save(user=request.user)
    messages.success(request, f"Mapped: {mapping}. It applies at each member's next sign-in.")
    return redirect("accounts:group-mappings")


@login_required
@require_POST
def group_mapping_delete(request, pk):
    _require_quota_manager(request)
    mapping = get_object_or_404(GroupMapping, pk=pk)
    mapping._history_user = request.user
    mapping.delete()
    messages.success(request, f"Removed the mapping {mapping}; memberships it gave end at each member's next sign-in.")
    return redirect("accounts:group-mappings")


# --- who can do what in a team ------------------------------------------------------------------

@login_required
def access(request, slug):
    """Who can do what in the team, and why: each person's role and where it comes from
    (an IdP group or a hand-made membership), the quota managers, the mapped groups."""
    team = get_object_or_404(Team.objects.visible_to(request.user), slug=slug)
    return render(request, "accounts/access.html", {"team": team, "access": team_access(team)})
