"""OpenID Connect with mozilla-django-oidc: the provider's endpoints from its discovery
document, the ID token checked in full, and accounts created or updated from its claims.

The library checks state, nonce and PKCE; its ID token check does not look at the audience
or the issuer, so ``OidcBackend.verify_token`` checks signature, ``iss``, ``aud`` (and
``azp``), ``exp``/``iat`` and ``nonce`` itself. People are found by their IdP account
(issuer + ``sub``, ``tenants.OidcIdentity``), never by a claim they might change: an
account made before SSO is linked only on a verified email and as
``OIDC_LINK_EXISTING_ACCOUNTS`` allows, else a new account is made; at each login their
memberships follow their groups (``GroupMapping.objects.apply``).
"""

import logging
import re
import time
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.shortcuts import resolve_url
from django.urls import reverse
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from tenants.models.identities import GroupMapping, OidcIdentity

log = logging.getLogger(__name__)

DISCOVERY_TTL_SECONDS = 3600
# The library's endpoint settings, and the discovery document's names for them.
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
USERNAME_CHARACTERS = re.compile(r"[\w.@+-]{1,150}")  # fullmatch: "$" would let a final newline through
_discovered: dict[str, tuple[float, dict]] = {}


class SignInError(SuspiciousOperation):
    """A sign-in answer we refuse; the message is shown to the person as is."""


def discovery() -> dict:
    """``$OIDC_ISSUER/.well-known/openid-configuration``, kept an hour per process."""
    issuer = settings.OIDC_ISSUER
    cached = _discovered.get(issuer)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    response = requests.get(f"{issuer}/.well-known/openid-configuration",
                            verify=settings.OIDC_VERIFY_SSL, timeout=settings.OIDC_TIMEOUT)
    response.raise_for_status()
    document = response.json()
    if document.get("issuer", "").rstrip("/") != issuer:
        raise SignInError(f"The identity provider calls itself {document.get('issuer')!r}, not {issuer!r} "
                          "(OIDC_ISSUER); check the setting.")
    _discovered[issuer] = (time.monotonic() + DISCOVERY_TTL_SECONDS, document)
    return document


def oidc_setting(attr: str, *default):
    """The library's settings, with the endpoints read from discovery."""
    if attr in ENDPOINTS:
        return discovery().get(ENDPOINTS[attr])
    return import_from_settings(attr, *default)


def provider_logout_url(request) -> str:
    """RP-initiated logout: where to send the browser so the IdP ends its session too
    (``end_session_endpoint`` with the ID token as hint), then back to our login page."""
    back = request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL))
    id_token = request.session.get("oidc_id_token")
    try:
        end_session = discovery().get("end_session_endpoint")
    except (requests.RequestException, SuspiciousOperation):
        end_session = None
    if not (id_token and end_session):
        return back
    query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": back,
                       "client_id": settings.OIDC_CLIENT_ID})
    return f"{end_session}?{query}"


def _claim(claims: dict, name: str) -> str:
    value = claims.get(name)
    return value.strip() if isinstance(value, str) else ""


def groups_of(claims: dict) -> list[str]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return sorted({g for g in value if isinstance(g, str) and g})


class OidcBackend(OIDCAuthenticationBackend):
    """The library's backend, configured by discovery and checking the ID token in full."""

    def __init__(self, *args, **kwargs):
        # The library reads every endpoint here; Django builds a backend for each request
        # of a signed-in person, so they are read lazily (properties below) instead.
        self.UserModel = get_user_model()

    get_settings = staticmethod(oidc_setting)
    OIDC_OP_TOKEN_ENDPOINT = property(lambda self: oidc_setting("OIDC_OP_TOKEN_ENDPOINT"))
    OIDC_OP_USER_ENDPOINT = property(lambda self: oidc_setting("OIDC_OP_USER_ENDPOINT"))
    OIDC_OP_JWKS_ENDPOINT = property(lambda self: oidc_setting("OIDC_OP_JWKS_ENDPOINT"))
    OIDC_RP_CLIENT_ID = property(lambda self: settings.OIDC_RP_CLIENT_ID)
    OIDC_RP_CLIENT_SECRET = property(lambda self: settings.OIDC_RP_CLIENT_SECRET)
    OIDC_RP_SIGN_ALGO = property(lambda self: settings.OIDC_RP_SIGN_ALGO)
    OIDC_RP_IDP_SIGN_KEY = None

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None

    def authenticate(self, request, **kwargs):
        if request is None or "nonce" not in kwargs or "password" in kwargs:
            return None  # a password login: not ours (only CallbackView passes a nonce)
        return super().authenticate(request, **kwargs)

    def retrieve_matching_jwk(self, token):
        try:
            return super().retrieve_matching_jwk(token)
        except (KeyError, jwt.PyJWTError) as err:
            raise SignInError(f"The ID token's signing key is unknown to the identity provider ({err}).") from None

    def verify_token(self, token, **kwargs):
        """Signature, issuer, audience, expiry and nonce of the ID token."""
        try:
            header = jwt.get_unverified_header(token or "")
        except jwt.PyJWTError:
            raise SignInError("The identity provider's answer holds no valid ID token.") from None
        if header.get("alg") != settings.OIDC_RP_SIGN_ALGO:
            raise SignInError(f"The ID token is signed with {header.get('alg')!r}, not {settings.OIDC_RP_SIGN_ALGO}.")
        key = self.retrieve_matching_jwk(token)
        client_id = settings.OIDC_CLIENT_ID
        try:
            payload = jwt.decode(
                token, key, algorithms=[settings.OIDC_RP_SIGN_ALGO], audience=client_id,
                issuer=discovery()["issuer"], leeway=settings.OIDC_CLOCK_SKEW_SECONDS,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise SignInError("The sign-in answer has expired; please sign in again.") from None
        except jwt.InvalidAudienceError:
            raise SignInError("The ID token was issued to another application (wrong audience).") from None
        except jwt.InvalidIssuerError:
            raise SignInError("The ID token comes from another issuer.") from None
        except jwt.PyJWTError as err:
            raise SignInError(f"The ID token is not valid: {err}.") from None
        audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
        if len(audiences) > 1 and payload.get("azp") != client_id:
            raise SignInError("The ID token was issued to another application (azp).")
        nonce = kwargs.get("nonce")
        if not nonce or payload.get("nonce") != nonce:
            raise SignInError("The ID token does not answer this sign-in (nonce mismatch); please sign in again.")
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims, completed by the userinfo endpoint when there is one
        (claims of the signed ID token win)."""
        claims = dict(payload)
        if access_token and oidc_setting("OIDC_OP_USER_ENDPOINT"):
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload["sub"]:
                raise SignInError("The identity provider's userinfo answer is about someone else.")
            claims = {**info, **payload}
        return claims

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("sub"))

    def get_or_create_user(self, access_token, id_token, payload):
        try:
            return self._get_or_create_user(access_token, id_token, payload)
        except SignInError as err:
            # The library turns this into "nobody signed in"; the callback page says why.
            self.request.sso_error = str(err)
            raise

    def _get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        if not self.verify_claims(claims):
            raise SignInError("The ID token names nobody (no sub claim).")
        with transaction.atomic():
            user, how = self._find_or_create(claims)
            if not user.is_active:
                raise SignInError(f"The account {user.get_username()} is deactivated here; ask a quota manager.")
            self._update(user, claims)
            groups = groups_of(claims)
            identity = OidcIdentity.objects.filter(user=user).first() or OidcIdentity(user=user)
            identity.issuer, identity.subject, identity.groups = claims["iss"], claims["sub"], groups
            identity.cluster_username = _claim(claims, settings.CLUSTER_OIDC_USERNAME_CLAIM)
            identity.last_login_at = timezone.now()
            if how:  # the audit trail says how an account got its IdP account
                identity._history_user, identity._change_reason = user, how[:100]
            identity.save()
            changes = GroupMapping.objects.apply(user, groups)
        if how:
            log.warning("sso: %s: %s", user.get_username(), how)
        if changes:
            log.info("sso: %s: %s", user.get_username(), "; ".join(changes))
        self.request.sso_changes = changes
        return user

    def _find_or_create(self, claims) -> tuple:
        """The account of this IdP account, and how it was found ('' when already linked)."""
        identity = (OidcIdentity.objects.select_related("user")
                    .filter(issuer=claims["iss"], subject=claims["sub"]).first())
        if identity is not None:
            return identity.user, ""
        email = _claim(claims, settings.OIDC_EMAIL_CLAIM)
        linked = self._linkable(email, claims)
        if linked is not None:
            return linked, f"linked to the existing account {linked.get_username()} by the verified email {email}"
        username = self._free_username(_claim(claims, settings.OIDC_USERNAME_CLAIM) or email or claims["sub"])
        user = self.UserModel.objects.create_user(username, email=email)
        return user, f"new account {username} for {claims['sub']} at {claims['iss']}"

    def _linkable(self, email: str, claims):
        """The account made before SSO that this IdP account may take, under
        ``OIDC_LINK_EXISTING_ACCOUNTS``: with ``verified_email``, the one unlinked account with
        the same address when the IdP says the address is verified (an address a person
        can type at the IdP proves nothing). Never a privileged account (superusers, staff:
        quota managers), which an operator links by hand, nor with ``never``."""
        if settings.OIDC_LINK_EXISTING_ACCOUNTS != "verified_email" or not email:
            return None
        if claims.get("email_verified") not in (True, "true"):
            return None
        same = list(self.UserModel.objects.filter(email__iexact=email, oidc_identity__isnull=True)[:2])
        if len(same) != 1 or same[0].is_superuser or same[0].is_staff:
            return None
        return same[0]

    def _free_username(self, wanted: str) -> str:
        """``wanted``, or ``wanted-2``, ``wanted-3``... when an account has it already: a
        name never finds an account (only issuer + subject, or a verified email, do)."""
        if not USERNAME_CHARACTERS.fullmatch(wanted):
            raise SignInError(f"The user name {wanted!r} from the identity provider has characters this "
                              "platform does not allow (letters, digits and @.+-_ only).")
        taken = {name.lower() for name in self.UserModel.objects.filter(username__istartswith=wanted[:140])
                 .values_list("username", flat=True)}
        number = 1
        candidate = wanted
        while candidate.lower() in taken:
            number += 1
            suffix = f"-{number}"
            candidate = wanted[: 150 - len(suffix)] + suffix
        return candidate

    def _update(self, user, claims) -> None:
        fields = {
            "email": _claim(claims, settings.OIDC_EMAIL_CLAIM) or user.email,
            "first_name": (_claim(claims, "given_name") or _claim(claims, settings.OIDC_NAME_CLAIM))[:150],
            "last_name": _claim(claims, "family_name")[:150],
        }
        changed = [name for name, value in fields.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)


def callback_url(request) -> str:
    return request.build_absolute_uri(reverse("oidc_authentication_callback"))
