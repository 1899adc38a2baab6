"""One look at a team's queue: within `one_look()`, what a page or an answer reads about it
(Kueue's pending list, `jobs.outlook.pending`; the reservation's walk, `jobs.outlook.reservations`) is read
once, however many of its parts ask (the position, the verdict, the estimate, the naive figure
beside it, the start-sooner advice). Outside a look every read is fresh."""

from contextlib import contextmanager
from contextvars import ContextVar

_read: ContextVar[dict | None] = ContextVar("jobs_look", default=None)


@contextmanager
def one_look():
    """A look (usable as a decorator); nested looks share the outer one's reads."""
    if _read.get() is not None:
        yield
        return
    token = _read.set({})
    try:
        yield
    finally:
        _read.reset(token)


def remembered(key, read):
    """``read()``, or what it gave for ``key`` earlier in this look."""
    seen = _read.get()
    if seen is None:
        return read()
    if key not in seen:
        seen[key] = read()
    return seen[key]
