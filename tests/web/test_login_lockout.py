"""Password guessing on /login/ and /admin/login/ (django-axes, accounts.lockout): after
LOGIN_FAILURE_LIMIT failures from an address, or LOGIN_USERNAME_FAILURE_LIMIT for a user name
from all addresses, even the right password is refused, with a page that says why; an admin
lifts the lock; API tokens are not affected."""

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from ..support.api import issue_token

pytestmark = pytest.mark.django_db

RIGHT = "pw-for-tests-1"


def guess(client, url, username, password, address="203.0.113.7"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_forty_wrong_passwords_then_right_one_is_refused(client, owner):
    for n in range(40):
        guess(client, reverse("login"), "olivia", f"wrong-{n}")
    response = guess(client, reverse("login"), "olivia", RIGHT)
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    text = response.content.decode()
    assert "Too many failed logins" in text and "even the right password is refused" in text
    assert client.get(reverse("dashboard")).status_code == 302  # still not logged in


def test_admin_login_is_locked_the_same_way(client, quota_manager):
    url = reverse("admin:login")
    for n in range(40):
        guess(client, url, "quinn", f"wrong-{n}")
    response = guess(client, url, "quinn", RIGHT)
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_guessing_from_one_address_locks_the_address_not_the_username(client, owner, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        guess(client, reverse("login"), "olivia", f"wrong-{n}", address="203.0.113.7")
    assert guess(client, reverse("login"), "olivia", RIGHT, address="203.0.113.7").status_code == 429
    assert guess(client, reverse("login"), "olivia", RIGHT, address="198.51.100.9").status_code == 302


def test_a_username_guessed_from_many_addresses_stays_locked_from_another_one(client, owner, settings):
    for n in range(settings.LOGIN_USERNAME_FAILURE_LIMIT):
        guess(client, reverse("login"), "olivia", f"wrong-{n}", address=f"203.0.{n // 200}.{n % 200 + 1}")
    assert guess(client, reverse("login"), "olivia", RIGHT, address="198.51.100.9").status_code == 429


def test_one_address_guessing_many_usernames_is_locked(client, owner, member, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        guess(client, reverse("login"), f"nobody-{n}", "wrong")
    assert guess(client, reverse("login"), "max", RIGHT).status_code == 429
    # Someone else, from another address, logs in as usual.
    assert guess(client, reverse("login"), "olivia", RIGHT, address="198.51.100.9").status_code == 302


def test_a_few_typos_then_the_right_password_logs_in(client, owner, settings):
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        assert guess(client, reverse("login"), "olivia", f"typo-{n}").status_code == 200
    assert guess(client, reverse("login"), "olivia", RIGHT).status_code == 302


def test_an_admin_unlocks_a_username(client, owner, settings):
    settings.LOGIN_USERNAME_FAILURE_LIMIT = settings.AXES_FAILURE_LIMIT
    for n in range(settings.AXES_FAILURE_LIMIT):
        guess(client, reverse("login"), "olivia", f"wrong-{n}", address=f"203.0.113.{n + 1}")
    assert guess(client, reverse("login"), "olivia", RIGHT, address="198.51.100.9").status_code == 429
    call_command("axes_reset_username", "olivia")
    assert guess(client, reverse("login"), "olivia", RIGHT, address="198.51.100.9").status_code == 302


def test_api_tokens_keep_working_for_a_locked_out_person(client, member, team, settings):
    for n in range(settings.AXES_FAILURE_LIMIT + 5):
        guess(client, reverse("login"), "max", f"wrong-{n}", address="127.0.0.1")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(member, team=team)}")
    assert api.get("/api/v1/flavors", REMOTE_ADDR="127.0.0.1").status_code == 200
