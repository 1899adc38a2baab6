"""core.redis_cache: Django's Redis cache, one client per server instead of one per call."""

import threading

from django.core.cache import caches

from core.redis_cache import RedisCache


def test_the_cache_keeps_one_client_and_works_as_djangos():
    backend = caches["default"]
    assert isinstance(backend, RedisCache)
    assert backend._cache.get_client() is backend._cache.get_client(write=True)
    backend.set("answer", {"x": 1}, timeout=30)
    assert backend.get("answer") == {"x": 1}
    assert backend.add("answer", "other") is False
    assert backend.add("counter", 0) is True
    assert backend.incr("counter") == 1 and backend.get("counter") == 1


def test_threads_have_their_own_backend_as_in_django():
    mine = caches["default"]
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(caches["default"]))
    thread.start()
    thread.join()
    assert theirs[0] is not mine
