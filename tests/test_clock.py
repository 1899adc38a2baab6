"""The switch that runs the suite with the clock shifted ahead (tests/clock.py) keeps working:
without it, a test that depends on today's date would pass until the day it fails on CI."""

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.utils import timezone

from tests import clock

REPO = Path(__file__).resolve().parent.parent
YEAR = timedelta(days=365)
SLACK = timedelta(minutes=1)  # between reading one clock and the other


def _real_now():
    """The machine's clock, whatever time-machine makes the rest of the process see."""
    hatch = time_machine.escape_hatch
    return datetime.fromtimestamp(hatch.time.time() if hatch.is_travelling() else time.time(), tz=UTC)


@pytest.mark.parametrize(("value", "days"), [
    ("", 0),
    ("365", 365),
    (" 730 ", 730),
    ("0", 0),
])
def test_shift_days_reads_the_variable(value, days):
    assert clock.shift_days({clock.SHIFT_VARIABLE: value}) == days


def test_shift_days_is_zero_without_the_variable():
    assert clock.shift_days({}) == 0


def test_shift_days_refuses_what_is_not_a_whole_number_of_days():
    with pytest.raises(pytest.UsageError, match="expected a whole number of days"):
        clock.shift_days({clock.SHIFT_VARIABLE: "a year"})


def test_destination_is_that_many_days_after_now():
    assert clock.destination(365, 1_000.0) == 1_000.0 + 365 * 86_400
    assert clock.destination(0, 1_000.0) == 1_000.0


def test_this_session_runs_as_many_days_ahead_as_the_variable_says():
    """With the variable set (GPUPLATFORM_TEST_CLOCK_SHIFT_DAYS=365), the code under test sees
    the clock that far ahead, and ticking; without it, the real clock."""
    ahead = timedelta(days=clock.shift_days(os.environ))
    first = timezone.now()
    assert ahead - SLACK < first - _real_now() < ahead + SLACK
    assert timezone.now() > first  # ticking: durations measured in a test still mean something


def _run_pytest(tmp_path, shift: str) -> subprocess.CompletedProcess:
    """A pytest of its own (with that plugin only) whose one test asserts that its
    clock runs a year ahead of the machine's."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_ahead.py").write_text(
        "import time\nfrom datetime import datetime\nimport time_machine\n\n"
        "def test_a_year_ahead():\n"
        "    hatch = time_machine.escape_hatch\n"
        "    real = hatch.time.time() if hatch.is_travelling() else time.time()\n"
        f"    assert time.time() - real > {(YEAR - SLACK).total_seconds()}\n"
        f"    assert datetime.now().timestamp() - real > {(YEAR - SLACK).total_seconds()}\n"
    )
    env = {**os.environ, clock.SHIFT_VARIABLE: shift,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugin under test: quicker
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(tmp_path / "pytest.ini"), "-p", "tests.clock",
         "-p", "no:cacheprovider", "-q", str(tmp_path / "test_ahead.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )


def test_a_session_with_the_variable_set_runs_a_year_ahead(tmp_path):
    result = _run_pytest(tmp_path, "365")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_a_session_without_it_runs_on_the_real_clock(tmp_path):
    """The same test fails on the real clock: the one above passes because of the switch."""
    result = _run_pytest(tmp_path, "")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout and "AssertionError" in result.stdout


def test_a_session_with_a_bad_value_stops_before_any_test(tmp_path):
    result = _run_pytest(tmp_path, "next year")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert clock.SHIFT_VARIABLE in result.stderr
