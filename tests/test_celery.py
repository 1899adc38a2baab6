"""The Celery app talks to the real Redis broker configured for the suite."""

import pytest
from django.conf import settings

from gpuplatform.celery import app, ping


@pytest.mark.skipif(not settings.CELERY_BROKER_URL.startswith("redis"), reason="needs a Redis broker")
def test_task_round_trip_through_redis():
    from celery.contrib.testing.worker import start_worker

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        result = ping.delay()
        assert result.get(timeout=20) == "pong"
