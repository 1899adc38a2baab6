"""Helpers of the ``gpuctl`` tests (tests/api/test_gpuctl*.py): a job file, and a thread that
plays the status watcher, moving a job through its states in the database (``job.observe``,
as the watcher does) while gpuctl polls. The fixtures: tests/api/conftest.py."""

import threading
import time

JOB_YAML = """\
team: vision
name: resnet
kind: training
flavor: h100
image: ghcr.io/example/train:1
command: [torchrun, train.py]
args: [--epochs, 3]
env:
  EPOCHS: 3
  DEBUG: true
workers: 2
gpus_per_worker: 4
"""


def in_own_connection(function):
    """A thread's database connection is its own: close it when the thread ends."""

    def run():
        from django.db import connection

        try:
            function()
        finally:
            connection.close()

    return run


def when_job_exists(name: str, then, *, delay: float = 0.3) -> threading.Thread:
    """Start a thread that waits for the job ``name`` to exist, then ``delay`` s, then calls
    ``then(job)``."""
    from jobs.models import Job

    def run():
        deadline = time.monotonic() + 20
        while not Job.objects.filter(name=name).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(delay)
        then(Job.objects.get(name=name))

    thread = threading.Thread(target=in_own_connection(run))
    thread.start()
    return thread


def move_job_later(name: str, states: list[str], delay: float = 0.3) -> threading.Thread:
    """Play the status watcher: once the job exists, walk it through ``states``."""
    from jobs.lifecycle import State

    def walk(job):
        for i, state in enumerate(states):
            if i:
                time.sleep(delay)
            job.observe(state, reason=State(state).label, message=f"now {state}")

    return when_job_exists(name, walk, delay=delay)


def job_page(job) -> str:
    """The job's page as gpuctl prints it (the API's web_url)."""
    from django.conf import settings

    return f"{settings.PUBLIC_URL}/jobs/{job.pk}/"
