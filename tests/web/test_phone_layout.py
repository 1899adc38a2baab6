"""The pages fit a phone: at 390 px wide no page scrolls sideways
(``document.documentElement.scrollWidth <= 390``); wide tables and the usage chart scroll
inside their own box. Headless Chromium (Debian's package) through Playwright, each page
seen by the person who uses it, over demo-like data (the teams, flavors, people and
jobs of ``seed_demo``, a month of GPU time, requests, grants, history, a webhook's log).

Screenshots go to $BROWSER_ARTIFACTS (default /tmp/gpuplatform-browser).
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client
from django.utils import timezone

from jobs.lifecycle import State
from notifications.models import Event, Kind, Webhook, WebhookDelivery
from quotas import actions
from quotas.models import Cohort, QuotaRequest
from tenants.models import Membership

from ..builders import make_flavor, make_job, make_quota, make_team, make_user
from ..support.browser import ARTIFACTS, TIMEOUT_MS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
LONG_URL = "https://hooks.example.org/gpuplatform/computer-vision/deliveries/incoming-webhook-endpoint"


def _jobs(team, flavor, submitter, now):
    """Jobs in many states, some holding GPUs since earlier this month (the chart's days)."""
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    span = max(1, (now - month_start).days)
    for index, path in enumerate([
        [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.SUCCEEDED],
        [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING],
        [State.SUBMITTED, State.QUEUED],
        [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.FAILED],
    ]):
        job = make_job(team, flavor, name=f"{team.slug}-experiment-with-a-long-name-{index}", submitter=submitter,
                       workers=1 + index % 2, gpus_per_worker=2)
        started = month_start + timedelta(days=index * span / 4, hours=1)
        for step, state in enumerate(path):
            job.transition(state, reason=state.label, message=f"Now {state.label.lower()}.",
                           at=min(now, started + timedelta(hours=3 * step)))


@pytest.fixture
def demo(db):
    """seed_demo's world, built with the builders: vision (alice owner, bob member, carol
    viewer) and nlp (bob owner, alice viewer), four flavors in a cohort, quinn the quota
    manager; jobs, an open request, an approved one with its grant, a denied one, and a
    webhook of vision with its delivery log."""
    now = timezone.now()
    people = {name: make_user(name, first_name=name.title(), email=f"{name}@example.org")
              for name in ("alice", "bob", "carol")}
    people["quinn"] = make_user("quinn", quota_manager=True)
    flavors = [make_flavor("h100", display_name="NVIDIA H100 80GB", cost_per_gpu_hour=Decimal("3.50")),
               make_flavor("a100", display_name="NVIDIA A100 40GB", cost_per_gpu_hour=Decimal("1.80")),
               make_flavor("mig-1g-10gb", display_name="A100 MIG 1g.10gb", gpus_per_node=7),
               make_flavor("t4-shared", display_name="T4 time-sliced", gpus_per_node=4)]
    research = Cohort.objects.create(name="research")
    vision = make_team("vision", display_name="Computer Vision", members={
        people["alice"]: Membership.Role.OWNER, people["bob"]: Membership.Role.MEMBER,
        people["carol"]: Membership.Role.VIEWER})
    nlp = make_team("nlp", display_name="Language Models", members={
        people["bob"]: Membership.Role.OWNER, people["alice"]: Membership.Role.VIEWER})
    for team in (vision, nlp):
        for index, flavor in enumerate(flavors):
            make_quota(team, flavor, nominal_gpus=16 - 4 * index, cohort=research if index < 2 else None)
        _jobs(team, flavors[0], people["alice" if team is vision else "bob"], now)
    today = timezone.localdate()
    QuotaRequest.objects.submit(
        team=vision, requested_by=people["alice"], flavor=flavors[0], gpus=8, borrowing_limit_gpus=8,
        starts_on=today + timedelta(days=3), ends_on=today + timedelta(days=16),
        justification="Two weeks of extra H100s for the CVPR camera-ready ablations (ViT-L, 3 seeds).")
    approved = QuotaRequest.objects.submit(
        team=nlp, requested_by=people["bob"], flavor=flavors[1], gpus=4, starts_on=today,
        ends_on=today + timedelta(days=5), justification="Llama fine-tuning sprint for the workshop demo.")
    actions.approve(approved, people["quinn"], gpus=4, borrowing_limit_gpus=None, starts_on=today,
                    ends_on=today + timedelta(days=5), cpu_cores=48, memory_gib=480,
                    reason="Approved for the sprint; ask again if the demo moves.")
    QuotaRequest.objects.submit(team=nlp, requested_by=people["bob"], flavor=flavors[0], gpus=32, starts_on=today,
                                justification="Pretraining run.").deny(people["quinn"], "Not with this month's H100s.")
    hook = Webhook.objects.create(team=vision, url=LONG_URL, kinds=[Kind.JOB_SUCCEEDED, Kind.JOB_FAILED,
                                                                    Kind.GRANT_ENDING], created_by=people["alice"])
    event = Event.objects.create(kind=Kind.JOB_FAILED, key="demo:1", team=vision,
                                 title="vision/vision-experiment-with-a-long-name-3 failed: BackoffLimitExceeded")
    WebhookDelivery.objects.create(
        webhook=hook, event=event, status=WebhookDelivery.Status.FAILED, attempts=2, status_code=502,
        error="HTTPSConnectionPool(host='hooks.example.org', port=443): Read timed out. (read timeout=10)",
        log=[{"at": now.isoformat(), "status_code": 502, "error": "Bad gateway"}])
    return {"people": people, "vision": vision, "hook": hook, "pending": QuotaRequest.objects.pending().get()}


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
