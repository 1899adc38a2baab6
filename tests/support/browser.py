"""Plain helpers of the browser tests (headless Chromium driven by Playwright): where the
binary and the screenshots are, logging in and taking a screenshot. The fixtures:
tests/fixtures/browser.py (`browser`) and tests/web/conftest.py (`page`)."""

import os
import re
import shutil
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("BROWSER_ARTIFACTS", "/tmp/gpuplatform-browser"))
TIMEOUT_MS = 15_000


def log_in(page, username="olivia", password="pw-for-tests-1"):
    page.goto("/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/$"))


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
