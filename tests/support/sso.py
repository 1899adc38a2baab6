"""Plain helpers of single sign-on tests: the settings that turn SSO on, the claims an IdP
sends, and the code flow in the Django test client (the IdP's fixtures: tests/fixtures/idp.py)."""

from django.contrib.auth import get_user_model

from accounts import oidc

CALLBACK = "http://testserver/oidc/callback/"
LOGIN_PAGE = "http://testserver/login/"


def use_sso(settings, hydra, client) -> None:
    settings.OIDC_ISSUER = hydra.issuer
    settings.SSO_ENABLED = True
    settings.OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = client.client_id
    settings.OIDC_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET = client.client_secret
    settings.OIDC_VERIFY_SSL = hydra.ca_bundle
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "accounts.oidc.OidcBackend"]
    settings.SECURE_CSP = {**settings.SECURE_CSP, "form-action": [*settings.SECURE_CSP["form-action"], hydra.issuer]}
    oidc._discovered.clear()


def claims(groups=(), *, email="ada@example.org", username="ada", name="Ada Lovelace") -> dict:
    return {"email": email, "email_verified": True, "preferred_username": username, "name": name,
            "groups": list(groups)}


def start(client) -> str:
    """Begin an SSO login in the Django test client; returns the authorization URL."""
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302, response.content
    return response["Location"]


def sign_in(client, hydra, *, subject="ada-sub", groups=(), **claim_values):
    """The whole code flow: our /oidc/authenticate/, Hydra's login and consent answered for
    ``subject`` with these claims, then our callback. Returns the callback's response."""
    callback = hydra.follow(start(client), subject, claims(groups, **claim_values), until=CALLBACK)
    return client.get(callback.removeprefix("http://testserver"))


def signed_in_user(client):
    pk = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=pk) if pk else None
