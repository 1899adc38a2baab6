"""The whole SSO round trip in headless Chromium: our login page, "Sign in with SSO", the
real IdP (Ory Hydra, https with its own CA), back to the dashboard with the team the IdP
group gives, the team page saying so, then logging out at the IdP too.

Hydra sends the browser to its login and consent app with a challenge; the test serves that
app (``LoginApp``: accept the challenge through Hydra's admin API, redirect on), so the
browser walks the real redirects, with Hydra's and our cookies, end to end.
"""


import pytest
from django.db import connections

from tenants.models import Membership
from tenants.models.identities import GroupMapping

from ...builders import make_team
from ...support.browser import ARTIFACTS, TIMEOUT_MS, shot
from ...support.hydra import LoginApp
from ...support.sso import claims, use_sso

pytestmark = [pytest.mark.idp, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sso_page(browser, live_server, hydra, settings, monkeypatch, reconciles):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client = hydra.create_client([f"{live_server.url}/oidc/callback/"],
                                 post_logout_redirect_uris=[f"{live_server.url}/login/"])
    use_sso(settings, hydra, client)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url,
                                  ignore_https_errors=True)  # Hydra's certificate is from the local test CA
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    refused = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    try:
        with LoginApp(hydra, "ada-sub", claims(["ml-vision"])) as login_app:
            yield page, login_app.answered
            page.goto("about:blank")
    finally:
        context.close()
        # ORM calls made while Playwright runs use a connection of their own: close it, or
        # the test database cannot be dropped.
        connections.close_all()
    assert not refused, refused


def test_sign_in_with_sso_in_a_browser_and_out_again(sso_page, live_server):
    page, answered = sso_page
    team = make_team("vision")
    GroupMapping.objects.create(group="ml-vision", team=team, role=Membership.Role.OWNER)

    page.goto("/login/")
    page.get_by_role("link", name="Sign in with SSO").click()
    page.wait_for_url(f"{live_server.url}/")
    assert answered == ["login", "consent"]
    assert page.locator(".logout .who").inner_text() == "ada"
    shot(page, "sso-dashboard")

    page.goto(f"/teams/{team.slug}/")
    assert "IdP group ml-vision" in page.locator("#members").inner_text()
    page.get_by_role("link", name="Who can do what, and why").click()
    assert "IdP group ml-vision" in page.locator("main").inner_text()

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{live_server.url}/login/")
    assert page.get_by_role("link", name="Sign in with SSO").is_visible()
    page.goto("/")
    page.wait_for_url(f"{live_server.url}/login/?next=/")
