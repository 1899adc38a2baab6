"""On the local cluster, over the life of the jobs: a flavor that reserves for the first waiting
job (docs/eta.md, "Start sooner").

The 8-GPU head waits for a 6-GPU job that Kueue stops at its maximum runtime. A 2-GPU job with
no maximum runtime fits the 2 free GPUs, but would still hold them when the head needs them:
the platform keeps it back (created behind the platform's admission gate, so Kueue does not
admit it) and tells it which maximum runtime starts it now. The clone with that runtime goes to the cluster and Kueue admits it at once;
Kueue stops the holder at its limit, admits the head, and the kept-back job, the first that
does not fit now, is let go (its gate taken off) to wait in Kueue's queue. The triggers run as a worker would
run them (the receivers' on-commit tasks, here in the watcher's thread).
"""

import uuid

import pytest

from jobs.lifecycle import BEHIND_RESERVATION, FINAL_STATES, State
from jobs.models import Job
from jobs.outlook import estimates, reservations
from jobs.tasks import reconcile_job, release_reserved, sync_job
from tenants.models import Membership
from workloads import gates

from ...support.cluster import OUTLIVES_THE_TEST, reaches, wait_until
from .test_eta_live import cancel_all

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

HOLDER_LIMIT = 150  # seconds: Kueue stops the holder then, and the head's GPUs are free


@pytest.fixture
def workers_here(monkeypatch):
    """What a Celery worker would do with the tasks the receivers send, done where they are sent."""
    monkeypatch.setattr("jobs.tasks.release_reserved.delay", lambda *args: release_reserved(*args))
    monkeypatch.setattr("jobs.tasks.reconcile_job.delay", lambda pk: reconcile_job(pk))


@pytest.fixture
def submit(live, world):
    """Submit as `jobs.actions.submit` does (the reservation asked, `reservations.verdict`), and
    at the end cancel every job and wait for its pods to go."""
    submitted = []
    team = world[0]
    owner = team.memberships.get(role=Membership.Role.OWNER).user

    def make(flavor, **fields):
        fields = {"cpu_per_worker": 4, "memory_per_worker_gib": 2, "image": "ghcr.io/x/train:1", "workers": 1,
                  "env": OUTLIVES_THE_TEST, **fields}
        job = Job.objects.submit(team=team, submitter=owner, flavor=flavor, name=f"j{uuid.uuid4().hex[:6]}",
                                 hold=reservations.verdict, **fields)
        submitted.append(job)
        sync_job(live, job)
        return job

    yield make
    cancel_all(live, submitted)


def gates_on_the_cluster(live, job) -> list[str] | None:
    """The admission gates of the job's batch Job; None when it is not on the cluster."""
    found = live.list("batch/v1", "Job", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    return gates.gates_of(found[0]) if found else None


def test_a_job_that_would_delay_the_head_is_kept_back_and_its_shorter_clone_starts_now(
        live, world, watcher, workers_here, submit):
    team, h100, _ = world
    h100.backfill = True
    h100.save()
    holder = submit(h100, gpus_per_worker=6, max_runtime_seconds=HOLDER_LIMIT)
    reaches(holder, State.RUNNING)
    head = submit(h100, workers=2, gpus_per_worker=4, max_runtime_seconds=600)
    assert head.reason != BEHIND_RESERVATION  # the first that does not fit: it waits in Kueue
    wait_until(lambda: (head.refresh_from_db(), head.state == State.QUEUED)[1], timeout=60,
               message="the 8-GPU head to queue behind the holder")

    kept = submit(h100, gpus_per_worker=2, max_runtime_seconds=None)
    kept.refresh_from_db()
    assert kept.behind_reservation, kept.message
    assert "8 GPUs are reserved for job" in kept.message and "it would start now" in kept.message
    # Kueue would admit it at once, ahead of the head: it waits behind the platform's gate
    assert gates_on_the_cluster(live, kept) == [gates.RESERVATION]

    advice = {a.change: a for a in estimates.estimate(kept).sooner}["shorter_max_runtime"]
    gap = int(advice.clone_url.rsplit("max_runtime_seconds=", 1)[1])
    assert 60 <= gap < HOLDER_LIMIT and advice.message.endswith("starts within a minute.")
    clone = submit(h100, gpus_per_worker=2, max_runtime_seconds=gap)
    assert clone.reason != BEHIND_RESERVATION
    reaches(clone, State.RUNNING, timeout=120)  # it does start now, in the gap
    head.refresh_from_db()
    kept.refresh_from_db()
    assert head.state == State.QUEUED and kept.behind_reservation

    # Kueue stops the holder (and the clone) at their limits; the head gets its GPUs, and the
    # kept-back job, first in line now, is let onto the cluster to wait there
    reaches(holder, State.FAILED, timeout=HOLDER_LIMIT + 120)
    reaches(head, State.RUNNING, timeout=180)
    clone.refresh_from_db()
    assert clone.state in FINAL_STATES, clone.state
    wait_until(lambda: (kept.refresh_from_db(), not kept.behind_reservation)[1], timeout=60,
               message="the kept-back job to be let go once the head is admitted")
    wait_until(lambda: gates_on_the_cluster(live, kept) == [], timeout=60, message="the kept-back job's gate off")
    kept.refresh_from_db()
    assert kept.state in (State.SUBMITTED, State.QUEUED), kept.state
