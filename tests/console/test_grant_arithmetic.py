"""The grant arithmetic: which grants are active when, and what they add up to."""

from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from quotas.grants import Effective, effective, window

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def g(gpus, start, end=None, *, borrow=None, cpu=None, mem=None):
    return SimpleNamespace(pk=None, gpus=gpus, starts_at=start, ends_at=end, borrowing_limit_gpus=borrow,
                           cpu_cores=gpus * 10 if cpu is None else cpu, memory_gib=gpus * 100 if mem is None else mem)


CASES = [
    ("no grants give nothing", [], T0, Effective()),
    ("a grant counts from its first instant", [g(8, T0, T0 + H)], T0, Effective(8, None, 80, 800)),
    ("a grant no longer counts at its end", [g(8, T0 - H, T0)], T0, Effective()),
    ("a grant counts until just before its end", [g(8, T0 - H, T0)], T0 - timedelta(microseconds=1), Effective(8, None, 80, 800)),
    ("a grant that has not started counts nothing", [g(8, T0 + H, None)], T0, Effective()),
    ("a grant without end counts forever", [g(4, T0 - H)], T0 + timedelta(days=3650), Effective(4, None, 40, 400)),
    ("overlapping grants add up", [g(8, T0 - H), g(4, T0 - H, T0 + H), g(2, T0, T0 + 2 * H)], T0,
     Effective(14, None, 140, 1400)),
    ("back-to-back grants never count together", [g(8, T0 - H, T0), g(4, T0, T0 + H)], T0, Effective(4, None, 40, 400)),
    ("a negative grant takes GPUs away", [g(8, T0 - H), g(-3, T0 - H, T0 + H)], T0, Effective(5, None, 50, 500)),
    ("nothing makes a quota negative", [g(2, T0 - H), g(-8, T0 - H, T0 + H)], T0, Effective(0, None, 0, 0)),
    ("the floor lifts when the negative grant ends", [g(2, T0 - H), g(-8, T0 - H, T0)], T0, Effective(2, None, 20, 200)),
    ("borrowing limits named by active grants add up", [g(8, T0 - H, borrow=4), g(2, T0 - H, borrow=2), g(1, T0 - H)], T0,
     Effective(11, 6, 110, 1100)),
    ("no named borrowing limit means none", [g(8, T0 - H), g(2, T0 - H)], T0, Effective(10, None, 100, 1000)),
    ("a lapsed grant's borrowing limit is gone", [g(8, T0 - H), g(2, T0 - 2 * H, T0 - H, borrow=2)], T0,
     Effective(8, None, 80, 800)),
    ("instants compare across time zones", [g(8, datetime(2026, 11, 1, 13, 0, tzinfo=BERLIN), T0 + H)],
     datetime(2026, 11, 1, 12, 0, tzinfo=UTC), Effective(8, None, 80, 800)),
    ("an end in New York is an instant too", [g(8, T0 - H, datetime(2026, 11, 1, 7, 0, tzinfo=NEW_YORK))],
     T0, Effective()),
]


@pytest.mark.parametrize("case, grants, at, expected", CASES, ids=[c[0] for c in CASES])
def test_effective_quota(case, grants, at, expected):
    assert effective(grants, at) == expected


WINDOWS = [
    ("a day in UTC starts at midnight UTC", date(2026, 12, 1), date(2026, 12, 31), UTC,
     datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
    ("the last day is included", date(2026, 12, 1), date(2026, 12, 1), UTC,
     datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)),
    ("days follow the platform's time zone", date(2026, 12, 1), date(2026, 12, 1), BERLIN,
     datetime(2026, 11, 30, 23, 0, tzinfo=UTC), datetime(2026, 12, 1, 23, 0, tzinfo=UTC)),
    ("a day across the spring DST change has 23 hours", date(2027, 3, 28), date(2027, 3, 28), BERLIN,
     datetime(2027, 3, 27, 23, 0, tzinfo=UTC), datetime(2027, 3, 28, 22, 0, tzinfo=UTC)),
    ("no last day means no end", date(2026, 12, 1), None, NEW_YORK, datetime(2026, 12, 1, 5, 0, tzinfo=UTC), None),
]


@pytest.mark.parametrize("case, first, last, tz, start, end", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_grant_window_from_calendar_days(case, first, last, tz, start, end):
    assert window(first, last, tz) == (start, end)


def test_the_window_uses_the_platform_time_zone_by_default(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    start, end = window(date(2026, 7, 1), date(2026, 7, 1))
    assert start == datetime(2026, 6, 30, 22, 0, tzinfo=UTC) and end == datetime(2026, 7, 1, 22, 0, tzinfo=UTC)
