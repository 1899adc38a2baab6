"""The Celery app talks to the real Redis broker configured for the suite."""

import pytest
from django.conf import settings

from gpuplatform.celery import app, ping


@pytest.mark.skipif(not settings.CELERY_BROKER_URL.startswith("redis"), reason="needs a Redis broker")
def test_task_round_trip_through_redis():
    """On a queue of its own: a worker of another test run sharing the Redis server (a
    second checkout, the demo) would otherwise take the ping off the default queue."""
    import uuid

    from celery.contrib.testing.worker import start_worker

    queue = f"round-trip-{uuid.uuid4().hex[:12]}"
    # A worker given queues selects them for the app itself, and for good: every later worker
    # of this process would consume that queue alone, never the default (the live tests'
    # workers after this one saw no task at all). Put the app's selection back.
    selected = app.amqp.queues._consume_from
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING", queues=[queue]):
            result = ping.apply_async(queue=queue)
            assert result.get(timeout=20) == "pong"
    finally:
        app.amqp.queues._consume_from = selected
    assert app.conf.task_default_queue in app.amqp.queues.consume_from


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not settings.CELERY_BROKER_URL.startswith("redis"), reason="needs a Redis broker")
def test_a_worker_keeps_its_database_connection_from_task_to_task():
    """Celery's Django fixup closes the database connection around every task; the worker
    keeps it as a web process does (CONN_MAX_AGE), so a run of reconciles opens no new
    PostgreSQL session per task (each one a backend fork, its prepared statements lost),
    and a connection the server dropped is replaced without a failed task."""
    import os
    import subprocess
    import sys
    import time
    import uuid
    from pathlib import Path

    from django.db import connection

    from jobs.tasks import reconcile_job

    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL sessions")
    root = Path(__file__).resolve().parent.parent
    test_database = connection.settings_dict["NAME"]
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + test_database

    def sessions() -> int:
        time.sleep(1.5)  # a backend reports its session counts within a second
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", [test_database])
            return cursor.fetchone()[0]

    queue, tasks = f"connections-{uuid.uuid4().hex[:12]}", 20
    env = {**os.environ, "DATABASE_URL": url, "DATABASE_CONN_MAX_AGE": "60", "CELERY_WORKER_POOL": "threads",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "gpuplatform", "worker", "-Q", queue, "--concurrency", "1",
         "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert ping.apply_async(queue=queue).get(timeout=60) == "pong"
        reconcile_job.apply_async((0,), queue=queue)  # the worker's thread opens its connection
        assert ping.apply_async(queue=queue).get(timeout=60) == "pong"
        before = sessions()
        for _ in range(tasks):
            reconcile_job.apply_async((0,), queue=queue)  # one query each: no such job
        assert ping.apply_async(queue=queue).get(timeout=60) == "pong"  # one thread: all ran
        opened = sessions() - before
        with connection.cursor() as cursor:  # PostgreSQL restarts, or an admin kills the session
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = %s AND pid <> pg_backend_pid()", [test_database])
        reconcile_job.apply_async((0,), queue=queue)  # a health check finds it gone and reconnects
        assert ping.apply_async(queue=queue).get(timeout=60) == "pong"
    finally:
        worker.terminate()
        _, errors = worker.communicate(timeout=30)
    assert "Traceback" not in errors, errors
    assert opened <= 1, f"{opened} new database sessions for {tasks} tasks"
