"""A waiting job's place in Kueue's own order (its visibility API's pending workloads), with the
jobs that can never start left out; counted from the database when Kueue cannot say."""

import pytest
from django.urls import reverse

from jobs.lifecycle import State
from jobs.models import Job
from jobs.outlook import feasibility
from jobs.outlook.pending import pending_path
from quotas.models import Scheduler
from workloads import EXCEEDS_QUOTA, queue_name
from workloads.pods import object_name

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


def queued(team, flavor, gpus=1, *, reason="Queued", **fields):
    job = make_job(team, flavor, gpus_per_worker=gpus, **fields)
    job.transition(State.SUBMITTED)
    job.transition(State.QUEUED, reason=reason)
    return job


def workload(owner_kind: str, owner_name: str, position: int) -> dict:
    return {"metadata": {"name": f"wl-{position}", "ownerReferences": [
        {"apiVersion": "batch/v1" if owner_kind == "Job" else "v1", "kind": owner_kind, "name": owner_name}]},
        "positionInClusterQueue": position, "positionInLocalQueue": position, "priority": 0}


def kueue_lists(fake, team, flavor, *entries) -> None:
    """Kueue's pending workloads of the team's ClusterQueue: ``entries`` are jobs (their batch
    Job) or (job, pod suffix) pairs (a server's replica pods), in Kueue's order."""
    items = []
    for position, entry in enumerate(entries):
        if isinstance(entry, tuple):
            job, suffix = entry
            items.append(workload("Pod", f"{object_name(job)}-5d8f7c9b4-{suffix}", position))
        else:
            items.append(workload("Job", object_name(entry), position))
    fake.set_path(pending_path(queue_name(team.namespace_name, flavor)), {"items": items})


def test_kueues_order_decides_where_the_database_would_say_otherwise(fake, team, flavor, quota):
    first, second = queued(team, flavor), queued(team, flavor)
    kueue_lists(fake, team, flavor, second, first)  # e.g. the first was evicted and requeued behind
    assert (feasibility.queue_position(first), feasibility.queue_position(second)) == (1, 0)


def test_a_job_kueue_lists_first_but_that_can_never_start_is_not_ahead(fake, team, flavor):
    make_quota(team, flavor, nominal_gpus=24)
    big = queued(team, flavor, 8, workers=4, reason=EXCEEDS_QUOTA)  # Kueue lists its inadmissible too
    small = queued(team, flavor, 1)
    kueue_lists(fake, team, flavor, big, small)
    assert (feasibility.queue_position(big), feasibility.queue_position(small)) == (None, 0)


def test_a_servers_replicas_count_once_where_the_first_stands(fake, team, flavor, quota):
    server = queued(team, flavor, 1, kind=Job.Kind.INFERENCE, port=8000, min_replicas=2, max_replicas=2)
    batch = queued(team, flavor, 1)
    kueue_lists(fake, team, flavor, (server, "abcde"), (server, "fghij"), batch)
    assert (feasibility.queue_position(server), feasibility.queue_position(batch)) == (0, 1)


def test_without_kueues_answer_the_position_is_counted_from_the_database(fake, team, flavor, quota):
    first, second = queued(team, flavor), queued(team, flavor)  # no visibility API: a 404
    assert (feasibility.queue_position(first), feasibility.queue_position(second)) == (0, 1)
    kueue_lists(fake, team, flavor, first)  # the second not listed by Kueue yet
    assert feasibility.queue_position(second) == 1


def test_without_a_cluster_the_position_is_counted_from_the_database(team, flavor, quota):
    first, second = queued(team, flavor), queued(team, flavor)
    assert (feasibility.queue_position(first), feasibility.queue_position(second)) == (0, 1)


def test_kueue_is_not_asked_about_a_job_another_scheduler_governs(fake, team):
    a100 = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    make_quota(team, a100, nominal_gpus=8)
    job = queued(team, a100)
    fake.reset_counts()
    assert feasibility.queue_position(job) == 0
    assert sum(fake.requests.values()) == 0


def test_a_waiting_jobs_page_asks_kueue_for_its_pending_list_once(client, fake, team, flavor, quota, owner):
    holding = make_job(team, flavor, gpus_per_worker=8, max_runtime_seconds=3600)
    holding.transition(State.SUBMITTED)
    holding.transition(State.ADMITTED)
    waiting = queued(team, flavor, 8, max_runtime_seconds=3600)
    kueue_lists(fake, team, flavor, waiting)
    path = pending_path(queue_name(team.namespace_name, flavor))
    asked = []
    get_path = fake.get_path
    fake.get_path = lambda p, **query: asked.append(p) or get_path(p, **query)
    client.force_login(owner)

    page = client.get(reverse("jobs:detail", args=[waiting.pk]))
    assert page.status_code == 200 and page.context["queue_position"] == 0 and page.context["eta"].eta.known
    assert asked.count(path) == 1  # the position, the estimate's queue order and its naive figure: one list
    feasibility.queue_position(waiting)  # outside a page: asked afresh
    assert asked.count(path) == 2
