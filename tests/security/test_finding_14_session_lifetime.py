"""Issue 29, finding 14: sessions lasted 14 days with no idle timeout, and SSO sessions were
never re-checked with the IdP. Now a session ends after SESSION_IDLE_TIMEOUT_MINUTES without
a request and SESSION_MAX_AGE_HOURS after its sign-in (accounts.sessions), and an SSO
session goes back to the IdP with prompt=none every OIDC_SESSION_RECHECK_MINUTES: an IdP
that no longer signs the person in ends the session here (against Ory Hydra:
tests/live/security/test_finding_14_session_lifetime.py)."""

import time

import pytest
from django.conf import settings
from django.test import Client

from accounts.sessions import SEEN, STARTED

from ..builders import make_user
from ..support.sso import signed_in_user

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def stamp(client, **values) -> None:
    session = client.session
    session.update(values)
    session.save()


def test_finding_14_the_lifetimes_come_from_settings_and_are_no_longer_two_weeks():
    assert settings.SESSION_COOKIE_AGE == settings.SESSION_MAX_AGE_HOURS * 3600 < 14 * 24 * 3600
    assert settings.SESSION_IDLE_TIMEOUT_MINUTES * 60 < settings.SESSION_COOKIE_AGE


def test_finding_14_a_session_idle_longer_than_the_timeout_is_signed_out(settings):
    settings.SESSION_IDLE_TIMEOUT_MINUTES = 30
    client = signed_in(make_user("ada"))
    assert client.get("/").status_code == 200
    stamp(client, **{SEEN: int(time.time()) - 31 * 60})
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert signed_in_user(client) is None


def test_finding_14_activity_keeps_a_session_until_its_absolute_lifetime(settings):
    settings.SESSION_IDLE_TIMEOUT_MINUTES, settings.SESSION_MAX_AGE_HOURS = 30, 8
    client = signed_in(make_user("ada"))
    now = int(time.time())
    stamp(client, **{SEEN: now - 29 * 60, STARTED: now - 7 * 3600})
    assert client.get("/").status_code == 200
    assert client.session[SEEN] >= now  # the request counted as activity
    stamp(client, **{STARTED: now - 8 * 3600 - 1})
    assert client.get("/").status_code == 302
    assert signed_in_user(client) is None


def test_finding_14_a_fresh_sign_in_starts_both_clocks():
    client = Client()
    make_user("ada")
    assert client.post("/login/", {"username": "ada", "password": "pw-for-tests-1"}).status_code == 302
    now = time.time()
    assert now - 5 <= client.session[STARTED] <= now and now - 5 <= client.session[SEEN] <= now


