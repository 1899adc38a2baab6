"""Issue 29, finding 8: anyone could lock any account, the break-glass superuser included,
with 10 wrong passwords every 15 minutes. Now the address is locked first (the guesser's,
not the account), and a user-name lock, which only guessing from many addresses reaches,
is cleared by the right password together with a one-time unlock code from the console
(``manage.py login_unlock_code``)."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from ..builders import make_user

pytestmark = pytest.mark.django_db

RIGHT = "pw-for-tests-1"
ATTACKER = "203.0.113.66"
OPERATOR = "198.51.100.10"


@pytest.fixture
def root(db):
    return make_user("root", is_superuser=True, is_staff=True)


def login(client, username, password, address, url=None, **extra):
    return client.post(url or reverse("login"), {"username": username, "password": password, **extra},
                       REMOTE_ADDR=address)


def unlock_code(username) -> str:
    out = StringIO()
    call_command("login_unlock_code", username, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


@pytest.mark.parametrize("url", ["login", "admin:login"])
def test_finding_08_wrong_passwords_from_one_address_do_not_lock_the_break_glass_account(client, root, url):
    for n in range(40):
        login(client, "root", f"wrong-{n}", ATTACKER, url=reverse(url))
    assert login(client, "root", RIGHT, ATTACKER, url=reverse(url)).status_code == 429  # the guesser is locked
    assert login(client, "root", RIGHT, OPERATOR, url=reverse(url)).status_code == 302  # the account is not


def test_finding_08_a_user_name_lock_is_cleared_by_the_right_password_and_an_unlock_code(client, root, settings):
    settings.LOGIN_USERNAME_FAILURE_LIMIT = 6
    for n in range(6):  # one guess each from six addresses: no address reaches its limit
        login(client, "root", f"wrong-{n}", f"203.0.113.{n + 1}")
    locked = login(client, "root", RIGHT, OPERATOR)
    assert locked.status_code == 429 and "login_unlock_code" in locked.content.decode()
    code = unlock_code("root")
    assert login(client, "root", "wrong", OPERATOR, unlock_code=code).status_code == 200  # the code is no password
    assert login(client, "nobody", RIGHT, OPERATOR, unlock_code=code).status_code == 200
    assert "_auth_user_id" not in client.session
    assert login(client, "root", RIGHT, OPERATOR, unlock_code=code.lower()).status_code == 302
    assert client.session["_auth_user_id"] == str(root.pk)


def test_finding_08_an_unlock_code_lets_in_once_and_no_other_name(client, root, settings):
    settings.LOGIN_USERNAME_FAILURE_LIMIT = 3
    make_user("ada")
    code = unlock_code("root")
    for name in ("root", "ada"):
        for n in range(3):
            login(client, name, f"wrong-{n}", f"203.0.113.{n + 1}")
    assert login(client, "ada", RIGHT, OPERATOR, unlock_code=code).status_code == 429
    assert login(client, "root", RIGHT, OPERATOR, unlock_code=code).status_code == 302
    client.logout()
    for n in range(3):
        login(client, "root", f"wrong-again-{n}", f"203.0.113.{n + 10}")
    assert login(client, "root", RIGHT, OPERATOR, unlock_code=code).status_code == 429  # spent


def test_finding_08_the_login_page_offers_the_unlock_code(client):
    page = client.get(reverse("login")).content.decode()
    assert 'name="unlock_code"' in page
