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


def test_filesystem_broker_keeps_control_folder_in_spool(tmp_path):
    """The embedded broker (filesystem://) writes its exchange tables into its spool under
    var/, not into a control/ folder in whatever directory the worker was started from."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = """
from gpuplatform.celery import app
with app.connection_for_write() as conn:
    channel = conn.default_channel
    channel.exchange_declare("control-folder-probe", type="direct")
    channel.queue_declare("control-folder-probe")
    channel.queue_bind("control-folder-probe", exchange="control-folder-probe", routing_key="probe")
    table = channel.control_folder / "control-folder-probe.exchange"
    print(table.resolve())
    table.unlink()
    channel.queue_delete("control-folder-probe")
"""
    env = {**os.environ, "CELERY_BROKER_URL": "filesystem://", "CELERY_RESULT_BACKEND": "cache+memory://",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "control").exists()
    assert Path(result.stdout.strip()).parent == root / "var" / "celery-spool" / "control"
