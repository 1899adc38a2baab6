"""The API throttle counts in the shared cache (Redis when REDIS_URL is set), so a token's
budget holds across gunicorn workers instead of being multiplied by their number."""

import os
import subprocess
import sys
import time
from pathlib import Path

from django.core.cache import cache

from tenants.auth import TokenRateThrottle
from tenants.tokens import ApiToken

from ..support.api import issue_token

ROOT = Path(__file__).resolve().parents[2]

# A second process, as another gunicorn worker would be: may this token send one more? On
# this process's clock, which tests/clock.py may run ahead (the throttle's window is the hour).
OTHER_WORKER = """
import time_machine
time_machine.travel({now!r}).start()
import django
django.setup()
from types import SimpleNamespace
from tenants.auth import TokenRateThrottle
from tenants.tokens import ApiToken
request = SimpleNamespace(auth=ApiToken(pk={pk}), user=None, META={{}})
print("allowed" if TokenRateThrottle().allow_request(request, None) else "refused")
"""


def test_api_throttle_is_shared_between_processes(client_as, member, team, settings, monkeypatch):
    # The cache as configured, without this test's own key prefix, as other processes see it.
    settings.CACHES = {name: {k: v for k, v in config.items() if k != "KEY_PREFIX"}
                       for name, config in settings.CACHES.items()}
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "3/hour"})
    secret = issue_token(member, team=team)
    pk = ApiToken.objects.get(user=member).pk
    # Counts of an earlier run of the suite, whose token had the same id.
    cache.delete(TokenRateThrottle.cache_format % {"scope": "api", "ident": f"token-{pk}"}
                 + f":{int(time.time() // 3600)}")

    api = client_as(token=secret)
    assert [api.get("/api/v1/flavors").status_code for _ in range(3)] == [200, 200, 200]

    env = {**os.environ, "API_THROTTLE_RATE": "3/hour", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", OTHER_WORKER.format(pk=pk, now=time.time())], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "refused"


def test_a_window_counts_in_one_command_and_expires_after_it():
    from django.core.cache import caches

    from tenants.auth import _count

    backend = caches["default"]
    assert [_count(cache, "window", timeout=61) for _ in range(3)] == [1, 2, 3]  # DRF passes the proxy
    key = backend.make_and_validate_key("window")
    assert 0 < backend._cache.get_client(key).ttl(key) <= 61
    assert backend.get("window") == 3  # what Django reads back


def test_without_redis_the_window_counts_the_same():
    from django.core.cache.backends.locmem import LocMemCache

    from tenants.auth import _count

    backend = LocMemCache("throttle-test", {})
    assert [_count(backend, "window", timeout=61) for _ in range(3)] == [1, 2, 3]
