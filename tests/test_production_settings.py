"""Production settings: no process starts with the public development key, HTTPS and proxy
settings come from the environment (on when DEBUG is off), and `check --deploy` is clean
with the production example of `.env.example`.

Settings are read once per process, so each case imports them in a fresh one.
"""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gpuplatform.env import env_header_pair

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
REFUSAL = "SECRET_KEY is not set while DEBUG is off"
OURS = ("SECRET_KEY", "DEBUG", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_PROXY_SSL_HEADER",
        "USE_X_FORWARDED_HOST", "TRUSTED_PROXY_COUNT")


def environment(**values) -> dict:
    """This suite's environment without a secret key, DEBUG or HTTPS settings, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    env.update(DJANGO_SETTINGS_MODULE="gpuplatform.settings", PYTHONPATH=str(ROOT), **values)
    return env


def run(args, env, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_gunicorn_without_secret_key_refuses_to_start():
    # What gunicorn does with gpuplatform.wsgi:application: import the module.
    result = run([sys.executable, "-c", "import gpuplatform.wsgi"], environment(DEBUG="false"))
    assert result.returncode != 0
    assert REFUSAL in result.stderr


def test_celery_without_secret_key_refuses_to_start():
    # `celery report` loads the app and its Django settings, as a worker or beat does first.
    result = run([str(VENV_BIN / "celery"), "-A", "gpuplatform", "report"], environment(DEBUG="false"))
    assert result.returncode != 0
    assert REFUSAL in result.stdout + result.stderr


def test_the_development_key_given_explicitly_is_refused_too():
    from gpuplatform.settings import DEV_SECRET_KEY

    result = run([sys.executable, "-c", "import gpuplatform.wsgi"],
                 environment(DEBUG="false", SECRET_KEY=DEV_SECRET_KEY))
    assert result.returncode != 0 and REFUSAL in result.stderr


def test_debugging_without_a_secret_key_still_starts_for_the_demo():
    result = run([sys.executable, "-c", "import gpuplatform.wsgi"], environment(DEBUG="true"))
    assert result.returncode == 0, result.stderr


SHOW = ("import django; django.setup(); from django.conf import settings as s; print(repr(["
        "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER, s.USE_X_FORWARDED_HOST, "
        "s.TRUSTED_PROXY_COUNT]))")


def https_settings(**values) -> list:
    result = run([sys.executable, "-c", SHOW], environment(**values))
    assert result.returncode == 0, result.stderr
    return eval(result.stdout)  # noqa: S307 - our own repr of plain values


def test_https_and_proxy_settings_are_on_by_default_when_debug_is_off():
    assert https_settings(DEBUG="false", SECRET_KEY="k" * 50) == [
        True, 31_536_000, True, True, True, True, ("HTTP_X_FORWARDED_PROTO", "https"), True, 1,
    ]


def test_https_and_proxy_settings_are_off_while_debugging():
    assert https_settings(DEBUG="true") == [False, 0, False, False, False, False, None, False, 0]


def test_each_https_and_proxy_setting_comes_from_the_environment():
    assert https_settings(
        DEBUG="false", SECRET_KEY="k" * 50, SECURE_SSL_REDIRECT="false", SECURE_HSTS_SECONDS="600",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="false", SECURE_HSTS_PRELOAD="false", SESSION_COOKIE_SECURE="false",
        CSRF_COOKIE_SECURE="false", SECURE_PROXY_SSL_HEADER="X-Scheme: https", USE_X_FORWARDED_HOST="false",
        TRUSTED_PROXY_COUNT="2",
    ) == [False, 600, False, False, False, False, ("HTTP_X_SCHEME", "https"), False, 2]


@pytest.mark.parametrize("value, expected", [
    ("X-Forwarded-Proto: https", ("HTTP_X_FORWARDED_PROTO", "https")),
    ("x-forwarded-ssl:on", ("HTTP_X_FORWARDED_SSL", "on")),
    ("", None),
])
def test_proxy_ssl_header_is_read_as_header_and_value(value, expected):
    assert env_header_pair("SECURE_PROXY_SSL_HEADER", "", environ={"SECURE_PROXY_SSL_HEADER": value}) == expected


@pytest.mark.parametrize("value", ["https", "X_Forwarded_Proto: https", "X-Forwarded-Proto:"])
def test_a_malformed_proxy_ssl_header_stops_the_settings(value):
    with pytest.raises(ImproperlyConfigured, match="SECURE_PROXY_SSL_HEADER="):
        env_header_pair("SECURE_PROXY_SSL_HEADER", "", environ={"SECURE_PROXY_SSL_HEADER": value})


def production_example() -> dict:
    """The commented ``# NAME=value`` lines of .env.example's production example; the
    secret key placeholder becomes a real random key."""
    text = (ROOT / ".env.example").read_text()
    block = text.split("# --- Production example", 1)[1].split("\n# ---", 1)[0]
    values = dict(re.findall(r"^# ([A-Z][A-Z0-9_]*)=(\S*)", block, re.MULTILINE))
    assert values["DEBUG"] == "false" and values["SECRET_KEY"].startswith("<")
    values["SECRET_KEY"] = secrets.token_urlsafe(50)
    return values


def test_deploy_check_is_clean_with_the_production_example_of_env_example():
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(ROOT),
           **production_example()}
    result = run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr
