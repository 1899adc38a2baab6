"""The pages fit a phone: at 390 px wide no page scrolls sideways
(``document.documentElement.scrollWidth <= 390``); wide tables and the usage chart scroll
inside their own box. Headless Chromium (Debian's package) through Playwright, each page
seen by the person who uses it, over demo-like data (the teams, flavors, people and
jobs of ``seed_demo``, a month of GPU time, requests, grants, history, a webhook's log:
the ``demo`` fixture, tests/fixtures/demo.py).

Screenshots go to $BROWSER_ARTIFACTS (default /tmp/gpuplatform-browser).
"""

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client

from ..support.browser import ARTIFACTS, TIMEOUT_MS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(demo, browser, live_server, monkeypatch):
    """A phone-sized page: ``open(person, path)`` signs the person in and loads the path."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport=PHONE, base_url=live_server.url, is_mobile=True, has_touch=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    refused = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)

    def open_as(person, path):
        client = Client()
        client.force_login(person)
        context.clear_cookies()
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                              "url": live_server.url}])
        response = page.goto(path)
        assert response.status == 200, f"{path}: HTTP {response.status}"
        return page

    yield open_as
    page.goto("about:blank")
    assert not refused, refused
    context.close()
    connections.close_all()


def width_of(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


PAGES = [
    # (who, path, screenshot)
    ("quinn", "/quotas/console/", "console-capacity"),
    ("quinn", "/quotas/console/requests/", "console-requests"),
    ("quinn", "/quotas/console/requests/{pending}/", "console-request"),
    ("quinn", "/quotas/console/grants/", "console-grants"),
    ("quinn", "/quotas/console/history/", "console-history"),
    ("quinn", "/quotas/usage/", "usage-manager"),
    ("alice", "/quotas/usage/", "usage-owner"),
    ("carol", "/quotas/usage/", "usage-viewer"),
    ("alice", "/notifications/teams/vision/webhooks/", "webhooks"),
    ("alice", "/notifications/teams/vision/webhooks/{hook}/", "webhook"),
    ("alice", "/", "dashboard-owner"),
    ("carol", "/teams/vision/", "team-viewer"),
    ("alice", "/teams/vision/", "team-owner"),
    ("quinn", "/quotas/", "quota-list"),
]


@pytest.mark.parametrize("who, path, name", PAGES, ids=[name for _, _, name in PAGES])
def test_the_page_fits_a_390_px_phone(phone, demo, who, path, name):
    page = phone(demo["people"][who], path.format(pending=demo["pending"].pk, hook=demo["hook"].pk))
    page.screenshot(path=str(ARTIFACTS / f"phone-{name}.png"), full_page=True)
    width = width_of(page)
    assert width <= PHONE["width"], f"{path} as {who} is {width}px wide on a {PHONE['width']}px phone"


def test_the_usage_chart_scrolls_in_its_card_and_keeps_its_size(phone, demo):
    page = phone(demo["people"]["quinn"], "/quotas/usage/")
    chart = page.locator("svg.usage-chart")
    box = chart.bounding_box()
    assert box["width"] == pytest.approx(float(chart.get_attribute("width")), abs=1)  # not squeezed
    wrap = page.locator(".chart-wrap")
    assert wrap.evaluate("el => el.scrollWidth > el.clientWidth")  # it scrolls inside its box
    assert width_of(page) <= PHONE["width"]
