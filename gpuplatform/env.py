"""Typed readers for settings that come from environment variables.

Each helper returns a value of one type or raises ``ImproperlyConfigured`` naming the
variable and what was wrong with it, so a typo in a deployment fails at start-up instead
of turning into a silently wrong default.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str, environ) -> str | None:
    environ = os.environ if environ is None else environ
    value = environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str = "", *, environ=None) -> str:
    value = _raw(name, environ)
    return default if value is None else value


def env_bool(name: str, default: bool = False, *, environ=None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean; use one of true/false, yes/no, on/off, 1/0."
    )


def env_int(name: str, default: int, *, minimum: int | None = None, environ=None) -> int:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}.")
    return number


def env_list(name: str, default: list[str], *, environ=None) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    value = _raw(name, environ)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...], *, environ=None) -> str:
    value = env_str(name, default, environ=environ)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}.")
    return value


def env_path(name: str, default: str = "", *, environ=None) -> Path | None:
    """A filesystem path, with ``~`` expanded; ``None`` when unset and no default."""
    value = env_str(name, default, environ=environ)
    return Path(value).expanduser() if value else None


def env_header_pair(name: str, default: str, *, environ=None) -> tuple[str, str] | None:
    """``Header-Name: value`` as Django's ``(META key, value)`` pair, e.g.
    ``X-Forwarded-Proto: https`` -> ``("HTTP_X_FORWARDED_PROTO", "https")``; empty is ``None``."""
    value = env_str(name, default, environ=environ)
    if not value:
        return None
    header, sep, expected = (part.strip() for part in value.partition(":"))
    if not sep or not header or not expected or not all(c.isalnum() or c == "-" for c in header):
        raise ImproperlyConfigured(
            f"{name}={value!r} is not 'Header-Name: value' (e.g. 'X-Forwarded-Proto: https'), "
            "nor empty."
        )
    return "HTTP_" + header.upper().replace("-", "_"), expected


def env_url(name: str, default: str, *, schemes: tuple[str, ...], environ=None) -> str:
    value = env_str(name, default, environ=environ)
    scheme, sep, _ = value.partition("://")
    if not sep or scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a URL with one of the schemes: {', '.join(schemes)}."
        )
    return value


def database_config(name: str, default: str, *, environ=None) -> dict:
    """Parse a database URL (postgres://, sqlite:///) into a Django DATABASES entry."""
    import dj_database_url

    url = env_str(name, default, environ=environ)
    scheme = url.partition("://")[0]
    if scheme not in ("postgres", "postgresql", "pgsql", "sqlite"):
        raise ImproperlyConfigured(
            f"{name}={url!r}: use postgres://user:password@host:port/name or "
            "sqlite:///absolute/path.sqlite3."
        )
    try:
        config = dj_database_url.parse(url, conn_max_age=0)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={url!r} cannot be parsed: {exc}") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        if config["NAME"] not in ("", ":memory:"):
            Path(config["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # The demo runs web, worker and watcher on one SQLite file: WAL lets readers work
        # while one writes, and IMMEDIATE transactions queue writers instead of failing.
        config["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                             "init_command": "PRAGMA journal_mode=WAL;"}
    return config
