"""The Celery application; tasks live in each app's ``tasks.py``."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuplatform.settings")

app = Celery("gpuplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def keep_database_connections(task=None, **_) -> None:
    """Around each task, what Django does around each request: close connections that are
    older than CONN_MAX_AGE or broken, keep the rest (settings.CELERY_DB_REUSE_MAX stops
    Celery closing them all). Not for a task run eagerly, inside its caller's transaction."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    close_old_connections()


@app.task(name="gpuplatform.ping")
def ping() -> str:
    """Round-trip probe used by health checks and tests of the broker wiring."""
    return "pong"
