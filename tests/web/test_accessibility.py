"""axe-core on every page of the site (tests/support/pages.py) in headless Chromium, each page
seen by the person who uses it over demo-like data (`every_page`, tests/fixtures/demo.py): no
violation of WCAG 2.x A and AA (colour contrast included, which only a browser can compute)
nor of axe's best practices (issue 52). axe is vendored for the tests alone
(tests/support/axe/, README.md there), never served, and loaded as an init script, so the
page's Content-Security-Policy stays as strict as ever. Unique ids without a browser:
tests/web/test_page_ids.py."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.db import connections
from django.test import Client

from ..support.browser import ARTIFACTS, TIMEOUT_MS
from ..support.pages import PAGES, PANELS, path_of

AXE = Path(__file__).resolve().parents[1] / "support" / "axe" / "axe.min.js"
AXE_VERSION = "4.14.1"  # tests/support/axe/README.md
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
RUN = """tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
  .then(result => result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                               targets: v.nodes.map(n => n.target.join(' '))})))"""


@pytest.fixture
def axe_on(every_page, browser, live_server, monkeypatch):
    """``axe_on(person, path)``: signs the person in (None: signed out), loads the path, lets
    htmx load the page's panels, and returns axe's violations there."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(path=str(AXE))  # by the browser, before the page's own scripts: no CSP exception
    page = context.new_page()
    refused = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)

    def run(person, path):
        context.clear_cookies()
        if person is not None:
            client = Client()
            client.force_login(person)
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                                  "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
        response = page.goto(path)
        assert response.status == 200, f"{path}: HTTP {response.status}"
        page.wait_for_load_state("networkidle")  # the panels htmx loads on "load"
        return page.evaluate(RUN, TAGS)

    yield run
    page.goto("about:blank")  # stop htmx polling before the live server goes away
    assert not refused, refused
    context.close()
    connections.close_all()


def described(violations) -> str:
    return "\n".join(f"{v['id']} ({v['impact']}): {v['help']} at {', '.join(v['targets'][:5])}" for v in violations)


@pytest.mark.parametrize("name", sorted(set(PAGES) - PANELS))
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_axe_finds_no_violation_on_the_page(axe_on, every_page, name):
    who = PAGES[name][0]
    violations = axe_on(who and every_page["people"][who], path_of(name, every_page))
    assert violations == [], f"{name}:\n{described(violations)}"


@pytest.mark.parametrize("who", ["bob", "carol", "quinn"])  # alice, the owner, is above
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_axe_finds_no_violation_on_the_team_page_whoever_reads_it(axe_on, every_page, who):
    violations = axe_on(every_page["people"][who], path_of("console:team", every_page))
    assert violations == [], described(violations)


# --- the vendored file (no browser) ---------------------------------------------------------
def test_axe_is_the_pinned_version_and_never_a_static_file_of_the_site():
    assert re.match(rf"/\*! axe v{re.escape(AXE_VERSION)}\b", AXE.read_text()[:40])
    assert (AXE.parent / "LICENSE").read_text().startswith("Mozilla Public License, version 2.0")
    assert finders.find("axe.min.js") is None and finders.find("axe/axe.min.js") is None
