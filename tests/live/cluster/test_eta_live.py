"""On the local cluster: the start estimate of a queued job (docs/eta.md).

- A job queued behind a running job is given an estimate from the runtimes of the team's
  earlier jobs of that shape (capped by the running job's maximum runtime); the running job
  is ended (cancelled: its pods go from the fake nodes) at the estimate's p50, and the queued
  job starts inside its p10-p90 range.
- A job that waits for 4 GPUs while 2 are free is told it would start now with fewer GPUs;
  the clone with that change starts at once.
- Kueue's pending positions (its visibility API) are what the job page says.
"""

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import Job
from jobs.outlook import estimates, pending
from jobs.tasks import sync_job
from tenants.models import Membership

from ...builders import make_job
from ...support.cluster import OUTLIVES_THE_TEST, reaches, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

def cancel_all(live, jobs):
    """Cancel every job and wait for its pods to go (the shared cluster's GPUs are freed
    before the team is offboarded)."""
    for job in jobs:
        cancel(live, job)
    for job in jobs:
        wait_until(lambda job=job: not live.list("v1", "Pod", namespace=job.team.namespace_name,
                                                 label_selector=f"gpuplatform.io/job={job.pk}"),
                   timeout=120, message=f"the pods of {job.name} gone")


def cancel(live, job):
    job.refresh_from_db()
    while job.is_cancellable and not job.transition(State.CANCELLING, reason="CancelRequested"):
        job.refresh_from_db()
    sync_job(live, job)


def past_runs(team, flavor, gpus_per_worker, seconds):
    """The team's ended jobs of that shape, the history the estimate draws from."""
    now = timezone.now()
    for runtime in seconds:
        job = make_job(team, flavor, gpus_per_worker=gpus_per_worker)
        began = now - timedelta(hours=2)
        Job.objects.filter(pk=job.pk).update(state=State.SUCCEEDED, submitted_at=began, admitted_at=began,
                                             run_admitted_at=began, finished_at=began + timedelta(seconds=runtime))


def page_of(job) -> str:
    client = Client()
    client.force_login(job.team.memberships.get(role=Membership.Role.OWNER).user)
    return client.get(f"/jobs/{job.pk}/").content.decode()


def test_the_estimate_holds_when_the_running_job_ends_and_kueues_positions_are_the_pages(live, world, watcher,
                                                                                         submit):
    team, h100, _ = world
    past_runs(team, h100, 8, [40, 50, 55, 60, 65, 70, 75, 80, 90, 100])
    holder = submit(live, team, h100, workers=1, gpus_per_worker=8, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    reaches(holder, State.RUNNING)
    first = submit(live, team, h100, workers=1, gpus_per_worker=8, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    second = submit(live, team, h100, workers=1, gpus_per_worker=8, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    names = [pending.object_name(job) for job in (first, second)]
    wait_until(lambda: (o := pending.kueue_order(first, live)) and all(n in o for n in names),
               timeout=90, message="Kueue to list the two waiting jobs")
    # Kueue's positions are the page's (same-priority jobs: Kueue orders them by a creation time
    # of whole seconds, so which is first is Kueue's to say).
    positions = {job.pk: pending.position(job, live) for job in (first, second)}
    assert sorted(positions.values()) == [0, 1]
    first, second = sorted((first, second), key=lambda job: positions[job.pk])
    assert "Next in line in the team" in page_of(first)
    assert "1 job ahead in the team" in page_of(second)

    asked = time.monotonic()
    first.refresh_from_db()
    estimate = estimates.estimate(first)
    assert estimate.eta.known, estimate.sentence
    assert estimate.sentence in page_of(first)
    low, mid, high = estimate.eta.p10, estimate.eta.p50, estimate.eta.p90
    assert 0 < low < mid < high <= 600
    # The running job ends at the estimate's p50 (its pods deleted from the fake nodes).
    wait_until(lambda: time.monotonic() - asked >= mid, timeout=mid + 30, message="the estimate's p50")
    cancel(live, holder)
    reaches(first, State.RUNNING, timeout=120)
    waited = (first.run_admitted_at - timezone.now()).total_seconds() + (time.monotonic() - asked)
    assert low <= waited <= high, (low, waited, high)


def test_fewer_gpus_is_advised_when_they_fit_the_gap_and_the_clone_starts(live, world, watcher, submit):
    team, h100, _ = world
    holder = submit(live, team, h100, workers=1, gpus_per_worker=6, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    reaches(holder, State.RUNNING)
    waiting = submit(live, team, h100, workers=2, gpus_per_worker=2, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    wait_until(lambda: (waiting.refresh_from_db(), waiting.state == State.QUEUED)[1], timeout=60,
               message="the 4-GPU job to queue")
    advice = {a.change: a for a in estimates.estimate(waiting).sooner}
    fewer = advice["fewer_gpus"]
    assert fewer.message.startswith("With 2 GPUs instead of 4: starts within a minute")
    assert f"clone={waiting.pk}&workers=1" in fewer.clone_url
    assert "Clone with this change" in page_of(waiting)
    # The clone with the change: what the form would submit, one worker instead of two.
    clone = submit(live, team, h100, workers=1, gpus_per_worker=2, max_runtime_seconds=600, env=OUTLIVES_THE_TEST)
    reaches(clone, State.RUNNING, timeout=120)
    waiting.refresh_from_db()
    assert waiting.state == State.QUEUED
