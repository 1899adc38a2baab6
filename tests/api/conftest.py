"""Every API test records the reconciles it schedules instead of needing a broker (the
fixtures: tests/fixtures/api.py)."""

import pytest


@pytest.fixture(autouse=True)
def _no_broker(scheduled_reconciles):
    """``scheduled_reconciles`` for every test here, asked for or not."""
