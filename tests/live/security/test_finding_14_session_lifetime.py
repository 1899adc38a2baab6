"""Issue 29, finding 14 (sessions never re-checked with the IdP), against Ory Hydra: an IdP
that no longer signs the person in ends the session here. The finding, its fix and the
session lifetimes: tests/security/test_finding_14_session_lifetime.py."""

import time
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client

from ...security.test_finding_14_session_lifetime import stamp
from ...support.sso import CALLBACK, sign_in, signed_in_user

pytestmark = pytest.mark.django_db


@pytest.mark.idp
def test_finding_14_an_sso_session_is_rechecked_at_the_idp_and_ends_when_it_says_no(sso):
    client = Client()
    sign_in(client, sso)
    assert client.get("/").status_code == 200  # the ID token is fresh: no re-check
    stamp(client, oidc_id_token_expiration=time.time() - 1)
    response = client.get("/")
    assert response.status_code == 302
    target = urlparse(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{sso.issuer}/oauth2/auth"
    query = parse_qs(target.query)
    assert query["prompt"] == ["none"] and query["code_challenge_method"] == ["S256"]
    assert query["state"][0] in client.session["oidc_states"]
    # Hydra holds no session for this person (the tests' logins are not remembered), so it
    # answers login_required, and the callback ends the session here.
    callback = sso.follow(response["Location"], "ada-sub", {}, until=CALLBACK)
    assert "error=login_required" in callback
    page = client.get(callback.removeprefix("http://testserver"))
    assert page.status_code == 400 and b"Your sign-in at the identity provider has ended" in page.content
    assert signed_in_user(client) is None


@pytest.mark.idp
def test_finding_14_an_htmx_request_is_sent_to_the_idp_by_a_full_page_redirect(sso):
    client = Client()
    sign_in(client, sso)
    stamp(client, oidc_id_token_expiration=time.time() - 1)
    response = client.get("/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/jobs/")
    assert response.status_code == 204 and response["HX-Redirect"].startswith(f"{sso.issuer}/oauth2/auth?")
    assert client.session["oidc_login_next"] == "/jobs/"
