"""Fixtures for the web UI tests: a quota, a running job, no broker; and for the browser
tests, the page of a signed-out browser on the live server and the world it shows."""

import pytest
from django.db import connections
from playwright.sync_api import expect

from jobs.lifecycle import State

from ..builders import make_flavor, make_job, make_quota
from ..support.browser import ARTIFACTS, TIMEOUT_MS


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


@pytest.fixture
def running_job(team, flavor, quota, member):
    job = make_job(team, flavor, name="running-job", submitter=member, workers=1, gpus_per_worker=4)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        job.transition(state, reason=state.label, message=f"Now {state.label.lower()}.")
    return job


@pytest.fixture
def no_reconcile(monkeypatch):
    """Record reconcile requests instead of sending them to a broker."""
    sent = []
    from jobs import tasks

    monkeypatch.setattr(tasks.reconcile_job, "delay", lambda pk: sent.append(pk))
    return sent


@pytest.fixture
def world(team, owner, flavor):
    """What the browser tests' ``page`` shows: the team with a 16-GPU quota, and a T4 flavor."""
    make_quota(team, flavor, nominal_gpus=16)
    make_flavor("t4", gpus_per_node=4, display_name="T4 small")
    return team


@pytest.fixture
def page(world, browser, live_server, monkeypatch, no_reconcile):
    # Playwright's sync API keeps an event loop around; the ORM calls this test makes
    # between browser steps are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)  # the same patience for assertions as for waits (a busy CI)
    page = context.new_page()
    # The Content-Security-Policy allows no inline script or style: anything the pages still
    # tried is a console error, and fails the test; so does any request to another host.
    refused = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.on("request", lambda req: None if req.url.startswith((live_server.url, "data:", "about:"))
            else refused.append(f"request to {req.url}"))
    yield page
    page.goto("about:blank")  # stop htmx polling before the live server goes away
    assert not refused, refused
    context.close()
    # ORM calls made while Playwright runs use a connection of their own context: close
    # it here, or it outlives the test and the test database cannot be dropped.
    connections.close_all()
