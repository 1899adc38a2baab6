"""The tokens a process authenticated lately, so a CI request does not pay for the token's
lookup every time.

Finding a token is one query over four tables (the token, its user, and the user's
permissions and groups for the quota-manager flag): about a quarter of a list request's
time. A process keeps what it found, keyed by the secret's digest, and reuses it while the
*generation* in the shared cache (Redis) is the one it was found under. Anything that can
change what a token may do bumps the generation, in every process at once:

- a token saved, deleted or revoked (``ApiToken.revoke`` updates in SQL, so it bumps itself);
- a user saved (deactivated, made superuser; a login's ``last_login`` alone does not) or deleted;
- group or permission changes of users and groups (the quota-manager flag).

The bump happens at once and again after the transaction commits, so a request that read
the old rows while the change was in flight cannot keep them. ``API_TOKEN_CACHE_SECONDS``
bounds what a change made behind Django's back (raw SQL, ``QuerySet.update`` on users) can
leave stale.
Every request still checks revocation, expiry and the user's ``is_active`` on what it gets,
and gets its own copies of the token and user, so nothing one request sets leaks into another.
"""

import copy
import hashlib
import logging
import threading
import time
import uuid
from collections import OrderedDict

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

GENERATION_KEY = "api-tokens:generation"
SIZE = 1024
ORIGINAL = "_recent_original"


def max_age() -> float:
    return settings.API_TOKEN_CACHE_SECONDS


class RecentTokens:
    def __init__(self, size: int = SIZE):
        self._size = size
        self._found: OrderedDict[str, tuple[str, float, object]] = OrderedDict()
        self._lock = threading.Lock()

    def find(self, secret: str, lookup):
        """``lookup(secret)`` (the token or None), or a copy of what it gave under the current
        generation, at most ``max_age()`` seconds ago. Unknown secrets are not remembered."""
        if max_age() <= 0:
            return lookup(secret)
        key = hashlib.sha256(secret.encode()).hexdigest()  # the secret itself is not kept
        generation = current_generation()
        now = time.monotonic()
        with self._lock:
            entry = self._found.get(key)
            if entry is not None:
                self._found.move_to_end(key)
        if entry is not None and entry[0] == generation and now - entry[1] < max_age():
            return _copy(entry[2])
        token = lookup(secret)
        if token is None:
            return None
        with self._lock:
            self._found[key] = (generation, now, token)
            self._found.move_to_end(key)
            while len(self._found) > self._size:
                self._found.popitem(last=False)
        return _copy(token)

    @staticmethod
    def used(token) -> None:
        """``token.touch()``, and keep the new ``last_used_at`` (else every copy writes it)."""
        token.touch()
        kept = getattr(token, ORIGINAL, None)
        if kept is not None:
            kept.last_used_at = token.last_used_at


def _copy(token):
    mine = copy.copy(token)  # Django copies the instance's state and its related-object cache
    mine.user = copy.copy(token.user)
    mine.scopes = list(token.scopes)
    setattr(mine, ORIGINAL, token)
    return mine


def current_generation() -> str:
    generation = cache.get(GENERATION_KEY)
    if generation is None:  # first use, or the cache lost it: every process starts afresh
        cache.add(GENERATION_KEY, uuid.uuid4().hex, timeout=None)
        generation = cache.get(GENERATION_KEY)
    return generation


def bump(**signal_arguments) -> None:
    """Forget every process's tokens: now, and once the current transaction commits."""
    _new_generation()
    transaction.on_commit(_new_generation)


def user_saved(sender, instance, update_fields=None, **kwargs) -> None:
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return
    bump()


def _new_generation() -> None:
    try:
        cache.set(GENERATION_KEY, uuid.uuid4().hex, timeout=None)
    except (RedisError, OSError) as exc:
        # The change itself must not fail for it (a migration, an admin save while Redis
        # restarts): what the processes found then stays at most max_age() seconds.
        log.warning("could not tell the web processes to look their API tokens up again: %s", exc)


RECENT = RecentTokens()
