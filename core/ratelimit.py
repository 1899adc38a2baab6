"""Fixed-window counters in the shared cache: the API throttle's and the webhooks' rates.

One counter per key and window of ``period`` seconds, so a rate costs one cache round trip
on Redis whatever its size; a caller may get up to twice the rate across a window's edge.
Every process counts in the same cache (Redis, or files shared on one machine).
"""

import time

from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.redis import RedisCache
from django.utils.connection import ConnectionProxy


def count(cache, key: str, *, timeout: int) -> int:
    """Add one to the counter ``key`` (made with ``timeout``) and return it. On Redis, one
    command (Django's ``add`` and ``incr`` take three round trips); the window's first
    request sets the expiry (were it lost, the key names a past window and is never read
    again)."""
    if isinstance(cache, ConnectionProxy):  # django.core.cache.cache, DRF's default
        cache = caches[DEFAULT_CACHE_ALIAS]
    if isinstance(cache, RedisCache):
        key = cache.make_and_validate_key(key)
        client = cache._cache.get_client(key, write=True)  # Django stores ints as they are
        value = client.incr(key)
        if value == 1:
            client.expire(key, timeout)
        return value
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between the two calls
        cache.add(key, 1, timeout=timeout)
        return 1


def take(key: str, *, limit: int, period: int, now: float | None = None) -> float:
    """Count one use of ``key``: 0 when it is within ``limit`` per ``period`` seconds, else
    the seconds until the window ends (the use is counted all the same)."""
    now = time.time() if now is None else now
    window = int(now // period)
    used = count(caches[DEFAULT_CACHE_ALIAS], f"rate:{key}:{period}:{window}", timeout=period + 1)
    return 0.0 if used <= limit else max((window + 1) * period - now, 0.001)
