"""Login lockouts that cannot be turned against an account, the break-glass one included
(django-axes, ``AXES_HANDLER``).

Two limits, counted over ``LOGIN_LOCKOUT_MINUTES``:

- per address first: ``LOGIN_FAILURE_LIMIT`` failed password logins from one address, for
  any user names, lock that address (even the right password is refused from it). Someone
  guessing from their own address locks only themselves, not the account they guess at.
- per user name, from every address together: ``LOGIN_USERNAME_FAILURE_LIMIT`` failures lock
  the name against guessing spread over many addresses. This lock the right password
  clears together with an unlock code from the console (``manage.py login_unlock_code
  NAME``: one-time, ``LOGIN_UNLOCK_CODE_MINUTES``, typed into the login form), so whoever
  holds both the password and a shell on the platform gets in while the guessing goes on.

The codes live in the shared cache as a hash, one per user name, and end at their first
successful use (or when a new one is made).
"""

import hashlib
import hmac
import secrets

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from axes.signals import user_locked_out
from django.conf import settings
from django.core.cache import cache
from django.db.models import Sum

CODE_FIELD = "unlock_code"


def _key(username: str) -> str:
    return "login-unlock:" + hashlib.sha256(username.lower().encode()).hexdigest()


def _digest(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def issue_unlock_code(username: str) -> str:
    """A new one-time code that, with the right password, clears ``username``'s lock."""
    code = "-".join(secrets.token_hex(3).upper() for _ in range(3))
    cache.set(_key(username), _digest(code), timeout=settings.LOGIN_UNLOCK_CODE_MINUTES * 60)
    return code


def holds_unlock_code(request, username: str | None) -> bool:
    code = getattr(request, "POST", {}).get(CODE_FIELD, "") if request is not None else ""
    if not (code and username):
        return False
    stored = cache.get(_key(username))
    return stored is not None and hmac.compare_digest(stored, _digest(code))


def code_used(sender, request, user, **kwargs) -> None:
    """``user_logged_in``: a code that let someone in is spent."""
    if request is not None and holds_unlock_code(request, user.get_username()):
        cache.delete(_key(user.get_username()))


class LockoutHandler(AxesDatabaseHandler):
    """Axes' database handler with the two limits above (axes compares one number,
    ``get_failures``, with ``AXES_FAILURE_LIMIT``: the address's)."""

    @staticmethod
    def _failures(request, **match) -> int:
        attempts = AccessAttempt.objects.filter(attempt_time__gte=get_cool_off_threshold(request), **match)
        return attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0

    def get_failures(self, request, credentials=None) -> int:
        return self._failures(request, ip_address=request.axes_ip_address)

    def username_locked(self, request, credentials=None) -> bool:
        username = get_client_username(request, credentials)
        if not username or holds_unlock_code(request, username):
            return False
        return self._failures(request, username=username) >= settings.LOGIN_USERNAME_FAILURE_LIMIT

    def is_locked(self, request, credentials=None) -> bool:
        return super().is_locked(request, credentials) or self.username_locked(request, credentials)

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs):
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is not None and not request.axes_locked_out and self.username_locked(request, credentials):
            request.axes_locked_out = True
            request.axes_credentials = credentials
            user_locked_out.send("axes", request=request, username=get_client_username(request, credentials),
                                 ip_address=request.axes_ip_address)
