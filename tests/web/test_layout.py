"""Login, logout, the layout's navigation by role, CSRF for htmx, and login on every page."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

PAGES = ["dashboard", "jobs:list", "jobs:submit", "console:quotas"]


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_people_are_sent_to_the_login_page(client, page):
    response = client.get(reverse(page))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login") + "?next=")


def test_logging_in_leads_to_the_dashboard(client, owner):
    page = client.get(reverse("login"))
    assert b'<label for="id_username">' in page.content
    response = client.post(reverse("login"), {"username": "olivia", "password": "pw-for-tests-1"})
    assert response.status_code == 302 and response.url == reverse("dashboard")


def test_a_wrong_password_says_so_and_keeps_the_username(client, owner):
    response = client.post(reverse("login"), {"username": "olivia", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert b'value="olivia"' in response.content


def test_logging_out_is_a_post_and_ends_the_session(client_for, owner):
    client = client_for(owner)
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response.url == reverse("login")
    assert client.get(reverse("dashboard")).status_code == 302


def test_the_layout_sends_the_csrf_token_with_every_htmx_request(client_for, owner):
    html = client_for(owner).get(reverse("dashboard")).content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in html
    assert "vendor/htmx/htmx.min.js" in html
    assert 'name="viewport"' in html


def test_only_quota_managers_see_the_admin_console_link(client_for, owner, quota_manager):
    assert b"Admin console" not in client_for(owner).get(reverse("dashboard")).content
    assert b"Admin console" in client_for(quota_manager).get(reverse("dashboard")).content


def test_htmx_is_vendored_from_its_package():
    from django.contrib.staticfiles import finders

    assert finders.find("vendor/htmx/htmx.min.js")
    assert finders.find("css/app.css")
