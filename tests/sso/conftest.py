"""Fixtures for single sign-on against a real OpenID Connect provider: Ory Hydra from
deploy/local-idp/idp.sh (built on first use, like the local cluster; then cached), on
loopback, with an https issuer and its own CA.

`hydra` runs `idp.sh up` once per session (several sessions share the provider; `up` is
idempotent and locked) and registers this session's OAuth2 clients, so parallel sessions
never see each other's. `sso` turns SSO on in the settings for one test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from accounts import oidc
from tenants import tasks as team_tasks
from tenants.models import Membership
from tenants.models.identities import GroupMapping

from ..builders import make_team
from .hydra import Hydra

REPO = Path(__file__).resolve().parents[2]
IDP_SH = REPO / "deploy" / "local-idp" / "idp.sh"
# A cold build of Hydra takes minutes (see docs/sso.md); a warm start takes a second.
UP_TIMEOUT_SECONDS = int(os.environ.get("GPUPLATFORM_IDP_UP_TIMEOUT", "3600"))
CALLBACK = "http://testserver/oidc/callback/"
LOGIN_PAGE = "http://testserver/login/"


@pytest.fixture(scope="session")
def hydra() -> Hydra:
    done = subprocess.run([str(IDP_SH), "up"], capture_output=True, text=True, timeout=UP_TIMEOUT_SECONDS)
    if done.returncode != 0:
        pytest.fail(f"idp.sh up failed ({done.returncode}):\n{done.stderr[-4000:]}")
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return Hydra(env["OIDC_ISSUER"], env["IDP_ADMIN_URL"], env["OIDC_CA_BUNDLE"])


@pytest.fixture(scope="session")
def rp_client(hydra):
    """The platform's OAuth2 client at the IdP (the Django test client's callback)."""
    return hydra.create_client([CALLBACK], post_logout_redirect_uris=[LOGIN_PAGE])


def use_sso(settings, hydra: Hydra, client) -> None:
    settings.OIDC_ISSUER = hydra.issuer
    settings.SSO_ENABLED = True
    settings.OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = client.client_id
    settings.OIDC_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET = client.client_secret
    settings.OIDC_VERIFY_SSL = hydra.ca_bundle
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "accounts.oidc.OidcBackend"]
    settings.SECURE_CSP = {**settings.SECURE_CSP, "form-action": [*settings.SECURE_CSP["form-action"], hydra.issuer]}
    oidc._discovered.clear()


@pytest.fixture
def sso(settings, hydra, rp_client):
    use_sso(settings, hydra, rp_client)
    return hydra


@pytest.fixture
def reconciles(monkeypatch):
    """The teams whose reconcile was asked for (after commit)."""
    asked = []
    monkeypatch.setattr(team_tasks.reconcile_team, "delay", asked.append)
    return asked


@pytest.fixture
def mapped(db):
    """Teams vision and nlp, and the IdP groups that give roles in them or make quota managers."""
    vision, nlp = make_team("vision"), make_team("nlp")
    for group, team, role in [
        ("ml-vision", vision, Membership.Role.OWNER),
        ("ml-vision-readers", vision, Membership.Role.VIEWER),
        ("ml-nlp", nlp, Membership.Role.MEMBER),
        ("platform-admins", None, GroupMapping.Role.QUOTA_MANAGER),
    ]:
        GroupMapping.objects.create(group=group, team=team, role=role)
    return vision, nlp


def claims(groups=(), *, email="ada@example.org", username="ada", name="Ada Lovelace") -> dict:
    return {"email": email, "email_verified": True, "preferred_username": username, "name": name,
            "groups": list(groups)}


def start(client) -> str:
    """Begin an SSO login in the Django test client; returns the authorization URL."""
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302, response.content
    return response["Location"]


def sign_in(client, hydra: Hydra, *, subject="ada-sub", groups=(), **claim_values):
    """The whole code flow: our /oidc/authenticate/, Hydra's login and consent answered for
    ``subject`` with these claims, then our callback. Returns the callback's response."""
    callback = hydra.follow(start(client), subject, claims(groups, **claim_values), until=CALLBACK)
    return client.get(callback.removeprefix("http://testserver"))


def signed_in_user(client):
    pk = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=pk) if pk else None
