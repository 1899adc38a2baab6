"""Every MCP test records the reconciles its jobs schedule instead of needing a broker (the
fixtures: tests/fixtures/api.py)."""

import pytest


@pytest.fixture(autouse=True)
def _no_broker(scheduled_reconciles):
    """``scheduled_reconciles`` for every test here, asked for or not."""
