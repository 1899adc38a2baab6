"""Runs the whole session with the clock shifted ahead (a pytest plugin, from tests/conftest.py).

No test may depend on today's date: code under test takes ``now``, or the test pins the
clock with time-machine. ``GPUPLATFORM_TEST_CLOCK_SHIFT_DAYS=365`` proves it: from the start
of the session (before collection, so dates computed at import move too) to its end, every
clock Python reads (``time.time``, ``datetime.now``, Django's ``timezone.now``) runs that
many days ahead and keeps ticking. A test that built a grant from a fixed date and let the
code ask the wall clock fails then, as main's CI did on the day that grant ended.
"""

import os
import time
from collections.abc import Mapping

import pytest
import time_machine

SHIFT_VARIABLE = "GPUPLATFORM_TEST_CLOCK_SHIFT_DAYS"
SECONDS_PER_DAY = 86_400
_traveller = pytest.StashKey[time_machine.travel]()


def shift_days(environ: Mapping[str, str]) -> int:
    """How many days ahead the session's clock runs (0: the real clock). Fails loudly on a
    value that is not a whole number of days, rather than testing on today's date unawares."""
    value = environ.get(SHIFT_VARIABLE, "").strip()
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(f"{SHIFT_VARIABLE}={value!r}: expected a whole number of days, e.g. 365") from None


def destination(days: int, now: float) -> float:
    """The POSIX time the session's clock starts from: ``days`` after ``now``."""
    return now + days * SECONDS_PER_DAY


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    days = shift_days(os.environ)
    if days:
        traveller = time_machine.travel(destination(days, time.time()), tick=True)
        traveller.start()
        config.stash[_traveller] = traveller


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    traveller = config.stash.get(_traveller, None)
    if traveller is not None:
        traveller.stop()


def pytest_report_header(config):
    days = shift_days(os.environ)
    return [f"clock: {days} days ahead ({SHIFT_VARIABLE})"] if days else []
