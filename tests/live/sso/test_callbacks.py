"""Forged and replayed answers at /oidc/callback/ are refused with a clear page and leave no
session: an unknown state, a replayed callback, an ID token answering another sign-in
(nonce), one issued to another application (audience), an expired one, an IdP error.
The codes and tokens are real ones from the IdP (Ory Hydra)."""

import time
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client

from accounts.oidc import OidcBackend

from ...support.hydra import pkce_pair
from ...support.sso import CALLBACK, claims, sign_in, signed_in_user, start, use_sso

pytestmark = [pytest.mark.idp, pytest.mark.django_db]


def refused(response, reason: bytes, client) -> None:
    assert response.status_code == 400, response.content[:300]
    page = response.content
    assert b"Sign-in failed" in page and reason in page, page.decode()[:2000]
    assert signed_in_user(client) is None


def code_of(url: str) -> str:
    return parse_qs(urlparse(url).query)["code"][0]


def test_unknown_state_is_refused(sso):
    client = Client()
    start(client)
    response = client.get("/oidc/callback/", {"code": "anything", "state": "forged-state"})
    refused(response, b"does not belong to a sign-in started in this browser", client)


def test_callback_without_any_sign_in_started_is_refused(sso):
    client = Client()
    refused(client.get("/oidc/callback/", {"code": "x", "state": "y"}), b"does not belong", client)


def test_replayed_callback_is_refused_and_signs_nobody_in(sso):
    client = Client()
    callback = sso.follow(start(client), "ada-sub", claims(), until=CALLBACK)
    path = callback.removeprefix("http://testserver")
    assert client.get(path).status_code == 302 and signed_in_user(client) is not None
    client.post("/logout/")
    refused(client.get(path), b"used already", client)
    # Nor in another browser that started a sign-in of its own.
    other = Client()
    start(other)
    refused(other.get(path), b"does not belong", other)


def test_code_injected_with_another_nonce_is_refused(sso, rp_client):
    """An attacker's own code (same client, the victim's public code challenge, their own
    nonce) pasted into the victim's callback: the ID token answers another sign-in."""
    victim = Client()
    query = parse_qs(urlparse(start(victim)).query)
    state, challenge = query["state"][0], query["code_challenge"][0]
    attacker_url = sso.authorization_url(rp_client, CALLBACK, state="attackers-state", nonce="attackers-nonce-123",
                                         code_challenge=challenge)
    code = code_of(sso.follow(attacker_url, "mallory-sub", claims(email="mallory@example.org", username="mallory"),
                              until=CALLBACK))
    refused(victim.get("/oidc/callback/", {"code": code, "state": state}), b"nonce mismatch", victim)


def test_id_token_for_another_application_is_refused(sso, hydra, monkeypatch):
    """The token endpoint's answer carries an ID token issued to another client (right
    issuer, signature and nonce): the audience is wrong."""
    other = hydra.create_client([CALLBACK])
    client = Client()
    query = parse_qs(urlparse(start(client)).query)
    state, nonce = query["state"][0], query["nonce"][0]
    verifier, challenge = pkce_pair()
    code = code_of(sso.follow(sso.authorization_url(other, CALLBACK, state="s" * 20, nonce=nonce,
                                                    code_challenge=challenge), "ada-sub", claims(), until=CALLBACK))
    tokens = hydra.exchange(other, code, CALLBACK, verifier)
    monkeypatch.setattr(OidcBackend, "get_token", lambda self, payload: tokens)
    refused(client.get("/oidc/callback/", {"code": "whatever", "state": state}), b"wrong audience", client)


def test_expired_id_token_is_refused(settings, hydra, monkeypatch):
    short_lived = hydra.create_client([CALLBACK], id_token_lifespan="1s")
    use_sso(settings, hydra, short_lived)
    settings.OIDC_CLOCK_SKEW_SECONDS = 0
    real_get_token = OidcBackend.get_token

    def slow_get_token(self, payload):  # the token spends its whole life on the way to us
        tokens = real_get_token(self, payload)
        time.sleep(2.1)
        return tokens

    monkeypatch.setattr(OidcBackend, "get_token", slow_get_token)
    client = Client()
    refused(sign_in(client, hydra), b"has expired", client)


def test_code_from_a_replayed_but_fresh_state_is_refused_by_the_idp(sso):
    """The same code twice, each time under a state of its own: Hydra refuses the second."""
    client = Client()
    callback = sso.follow(start(client), "ada-sub", claims(), until=CALLBACK)
    code = code_of(callback)
    assert client.get(callback.removeprefix("http://testserver")).status_code == 302
    second = Client()
    state = parse_qs(urlparse(start(second)).query)["state"][0]
    refused(second.get("/oidc/callback/", {"code": code, "state": state}), b"refused the sign-in code", second)


def test_an_error_from_the_idp_is_shown_and_the_state_is_spent(sso):
    client = Client()
    state = parse_qs(urlparse(start(client)).query)["state"][0]
    response = client.get("/oidc/callback/", {"error": "access_denied", "error_description": "The user said no",
                                              "state": state})
    refused(response, b"The user said no", client)
    assert state not in client.session.get("oidc_states", {})
