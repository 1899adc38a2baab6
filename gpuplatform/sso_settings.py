"""Single sign-on settings (docs/sso.md), star-imported by ``gpuplatform.settings``.

OpenID Connect login through mozilla-django-oidc, configured from the issuer's discovery
document: only the issuer, the client's id and secret and the claim names are set here;
the endpoints are read from ``$OIDC_ISSUER/.well-known/openid-configuration`` when first
needed (``accounts.oidc``). Without ``OIDC_ISSUER`` nothing of SSO is active and the
platform signs people in with local passwords only.
"""

from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_choice, env_int, env_path, env_str, env_url

OIDC_ISSUER = env_str("OIDC_ISSUER").rstrip("/")
if OIDC_ISSUER:
    OIDC_ISSUER = env_url("OIDC_ISSUER", "", schemes=("https", "http")).rstrip("/")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
SSO_ENABLED = bool(OIDC_ISSUER)
if SSO_ENABLED and not (OIDC_CLIENT_ID and OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured("OIDC_ISSUER is set: OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are needed too.")

# Which claims of the ID token (merged with the userinfo answer) say what.
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_EMAIL_CLAIM = env_str("OIDC_EMAIL_CLAIM", "email")
OIDC_NAME_CLAIM = env_str("OIDC_NAME_CLAIM", "name")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
# A CA bundle to trust for the issuer (a private CA, the local test IdP); empty: the system's.
OIDC_CA_BUNDLE = env_path("OIDC_CA_BUNDLE")
# Tolerated clock difference with the IdP when checking the ID token's exp/iat.
OIDC_CLOCK_SKEW_SECONDS = 30
# An account made before SSO, with the address of a first SSO sign-in: "verified_email"
# links it when the IdP says the address is verified (never a superuser's or staff's);
# "never" makes a new account every time. An unverified address never links.
OIDC_LINK_EXISTING_ACCOUNTS = env_choice("OIDC_LINK_EXISTING_ACCOUNTS", "verified_email",
                                         ("verified_email", "never"))
# IdP memberships (and the IdP's quota-manager role) last this long after the person's last
# SSO sign-in (a silent re-check counts, OIDC_SESSION_RECHECK_MINUTES); then the beat task
# tenants.tasks.expire_idp_access removes them, and with them their RoleBindings.
OIDC_MEMBERSHIP_TTL_HOURS = env_int("OIDC_MEMBERSHIP_TTL_HOURS", 24, minimum=1)
# A signed-in SSO session is re-checked at the IdP (prompt=none) this often: a person the
# IdP no longer signs in is signed out here, and groups changed there apply.
OIDC_SESSION_RECHECK_MINUTES = env_int("OIDC_SESSION_RECHECK_MINUTES", 15, minimum=1)

# Local password login (/login/). Off: only SSO signs in, except superusers, who keep the
# break-glass path /admin/login/ (and /login/?local=1) with their password.
LOCAL_LOGIN_ENABLED = env_bool("LOCAL_LOGIN_ENABLED", True)
if not LOCAL_LOGIN_ENABLED and not SSO_ENABLED:
    raise ImproperlyConfigured("LOCAL_LOGIN_ENABLED=false needs OIDC_ISSUER: nobody else could sign in.")

# How the cluster's OIDC authenticator (kube-apiserver --authentication-config) names people:
# RoleBindings name SSO users as prefix + the value of this claim, stored at each login.
CLUSTER_OIDC_USERNAME_CLAIM = env_str("CLUSTER_OIDC_USERNAME_CLAIM", "email")
CLUSTER_OIDC_USERNAME_PREFIX = env_str("CLUSTER_OIDC_USERNAME_PREFIX", "oidc:")
# Also bind the IdP groups mapped to a team (Group subjects, prefix + group name), so
# group members have their rights on the cluster before they ever sign in here.
CLUSTER_OIDC_BIND_GROUPS = env_bool("CLUSTER_OIDC_BIND_GROUPS", False)
CLUSTER_OIDC_GROUPS_PREFIX = env_str("CLUSTER_OIDC_GROUPS_PREFIX", "oidc:")

# --- mozilla-django-oidc, under its own names -----------------------------------------------
# Endpoints (OIDC_OP_*) come from discovery: accounts.oidc resolves them in get_settings.
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_USE_NONCE = True
OIDC_VERIFY_SSL = str(OIDC_CA_BUNDLE) if OIDC_CA_BUNDLE else True
OIDC_TIMEOUT = 10
OIDC_TOKEN_USE_BASIC_AUTH = True  # client_secret_basic, the OIDC default
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of RP-initiated logout
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = OIDC_SESSION_RECHECK_MINUTES * 60  # accounts.sessions.SsoSessionRefresh
OIDC_CALLBACK_CLASS = "accounts.views.CallbackView"
OIDC_AUTHENTICATE_CLASS = "accounts.views.AuthenticateView"
OIDC_OP_LOGOUT_URL_METHOD = "accounts.oidc.provider_logout_url"
LOGIN_REDIRECT_URL_FAILURE = "/login/"

SSO_AUTHENTICATION_BACKENDS = ["accounts.oidc.OidcBackend"] if SSO_ENABLED else []
# Logging out is a form POST answered by a redirect to the IdP's end_session_endpoint, and
# the Content-Security-Policy's form-action also covers where a form's answer redirects.
SSO_FORM_ACTION = [OIDC_ISSUER] if SSO_ENABLED else []
