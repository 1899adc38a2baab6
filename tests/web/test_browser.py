"""A researcher in a real browser: headless Chromium (Debian's package) driven by Playwright
against the live test server. Log in, submit from a preset, see the YAML preview and the
feasibility verdict, watch the job's state change live, cancel it; and a bad submission
that shows field errors and keeps what was typed.

Screenshots go to $BROWSER_ARTIFACTS (default /tmp/gpuplatform-browser).
"""

import re

import pytest

from jobs.lifecycle import State
from jobs.models import Job

from ..support.browser import TIMEOUT_MS, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_submits_from_a_preset_watches_it_live_and_cancels_it(page):
    from playwright.sync_api import expect

    log_in(page)
    assert page.get_by_role("heading", name="Your teams").is_visible()
    page.get_by_text("0 in use / 16 quota").wait_for()
    shot(page, "dashboard")

    # 1. A preset fills the form; the preview renders the objects and the verdict.
    page.get_by_role("link", name="Submit", exact=True).click()
    page.get_by_role("link", name="Multi-node PyTorch DDP").click()
    assert page.get_by_label("Name:").input_value() == "train-ddp"
    page.get_by_text("Starts now: 16 GPUs fit in the free quota (0 of 16 GPUs in use).").wait_for()
    assert "kind: Job" in page.locator("#yaml-preview").inner_text()
    assert "name: train-ddp-0" in page.locator("#yaml-preview").inner_text()

    # Changing a field refreshes the preview.
    page.get_by_label("Workers:").fill("4")
    page.get_by_label("Workers:").press("Tab")
    page.get_by_text("Can never run: it needs 32 GPUs but team vision can use at most 16").wait_for()
    page.get_by_label("Workers:").fill("2")
    page.get_by_label("Workers:").press("Tab")
    page.get_by_text("Starts now: 16 GPUs").wait_for()
    shot(page, "submit-preview")

    # 2. Submit: the job page shows it submitted, polling for news.
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    page.get_by_text("Submitted train-ddp to vision.").wait_for()
    job = Job.objects.get(name="train-ddp")
    assert job.state == State.SUBMITTED and job.workers == 2
    # The pods and logs panels each say "Asking the cluster…" until their first answer is in.
    expect(page.get_by_text("Asking the cluster")).to_have_count(0, timeout=TIMEOUT_MS)

    # 3. The status watcher moves it on; the page follows without a reload.
    job.transition(State.QUEUED, reason="Queued", message="Waiting for the scheduler.")
    job.transition(State.ADMITTED, reason="Admitted", message="Quota reserved; pods are being created.")
    job.transition(State.RUNNING, reason="Running", message="All workers are running.")
    page.locator("#job-status h2").get_by_text("Running").wait_for()
    page.get_by_text("All workers are running.").first.wait_for()
    shot(page, "job-running")

    # 4. Cancel, with confirmation; then the reconciler finishes it and polling stops.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel job").click()
    page.locator("#job-status h2").get_by_text("Cancelling").wait_for()
    page.get_by_text("Cancelling train-ddp").wait_for()
    job.refresh_from_db()
    assert job.state == State.CANCELLING
    job.transition(State.CANCELLED, reason="Cancelled", message="Stopped and removed from the cluster.")
    page.get_by_text("This job has ended; the page no longer refreshes.").wait_for()
    assert page.locator("#job-status").get_attribute("hx-trigger") is None
    shot(page, "job-cancelled")

    # 5. The jobs list finds it through the filters, swapped in by htmx.
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.wait_for_url(re.compile(r"/jobs/$"))
    page.wait_for_load_state()  # htmx is loaded (deferred) before the filters are used
    page.get_by_label("State").select_option("running")
    page.get_by_text("No jobs match.").wait_for()
    page.get_by_label("State").select_option("cancelled")
    page.locator("#job-table").get_by_role("link", name="train-ddp").wait_for()
    assert "state=cancelled" in page.url


def test_a_bad_submission_shows_field_errors_and_keeps_the_input(page):
    log_in(page)
    page.goto("/jobs/new/?preset=single")
    page.get_by_label("Name:").fill("Bad_Name")
    page.get_by_label("GPUs per worker:").fill("12")
    page.get_by_label("Environment:").fill("NOT A PAIR")
    page.get_by_label("Environment:").press("Tab")
    page.get_by_role("heading", name="Fix these first").wait_for()
    page.get_by_role("button", name="Submit job").click()
    page.get_by_text("The job was not submitted: fix the fields marked below.").wait_for()
    assert page.get_by_label("Name:").input_value() == "Bad_Name"
    assert page.get_by_label("GPUs per worker:").input_value() == "12"
    assert page.get_by_label("Environment:").input_value() == "NOT A PAIR"
    page.get_by_text("Use lowercase letters, digits and").first.wait_for()
    page.get_by_text("Line 1 should look like NAME=value.").first.wait_for()
    shot(page, "submit-errors")
    assert not Job.objects.exists()


def test_the_dashboard_fits_a_phone(page):
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways ({width}px)"
    shot(page, "dashboard-phone")


def test_the_api_docs_render_from_vendored_files_under_the_csp(page):
    page.goto("/api/docs/")
    page.get_by_role("heading", name=re.compile("GPU Platform API")).wait_for()
    page.get_by_text("/api/v1/jobs", exact=True).first.wait_for()
    shot(page, "api-docs")
