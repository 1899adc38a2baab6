"""On the local cluster: what a job is charged is what its pods held on nodes, and a job that
can never start is nobody's "ahead".

- An inference server of 1-3 replicas x 2 GPUs that runs one replica uses 2 GPUs (the
  dashboard, the console and the GPU intervals the usage CSV sums), not its maximum of 6;
  when its replicas change (what the HPA does, through the scale subresource) the watcher
  sees the pods placed and the count follows.
- A 32-GPU job of a team that can use at most 8 is said never to start (Kueue keeps it among
  the inadmissible); a 1-GPU job submitted after it is told it starts now, with nobody ahead,
  and does; Kueue's own order (its visibility API, through the aggregation layer) is read
  without the jobs that never start."""

import pytest

from console.capacity import overview
from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import GpuInterval, Job
from jobs.outlook import feasibility, pending
from jobs.outlook.feasibility import Feasibility
from jobs.use.usage import usage_for
from quotas.models import PriorityClass
from quotas.tasks import sync_cluster_objects
from workloads import EXCEEDS_QUOTA

from ...builders import build_job
from ...support.cluster import OUTLIVES_THE_TEST, reaches, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

def in_use_everywhere(team, flavor) -> tuple[int, int, int]:
    """(the job rows' count, the dashboard's, the console's) GPUs in use by ``team`` on ``flavor``."""
    held = sum(Job.objects.filter(team=team, flavor=flavor).values_list("gpus_in_use", flat=True))
    [line] = [line for line in overview()["teams"] if line.label == team.slug and line.flavor == flavor]
    return held, usage_for([team])[(team.pk, flavor.pk)].in_use, line.in_use


def open_interval_gpus(job) -> int | None:
    return GpuInterval.objects.filter(job=job, ended_at__isnull=True).values_list("gpus", flat=True).first()


def test_a_server_running_one_of_three_replicas_is_charged_one_and_then_what_it_scales_to(
        live, world, watcher, api_client, submit):
    from kubernetes import client

    team, h100, _ = world
    serve = submit(live, team, h100, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=3,
                   gpus_per_worker=2, readiness_path="/healthz", readiness_initial_delay_seconds=0,
                   env=OUTLIVES_THE_TEST)
    reaches(serve, State.RUNNING)
    wait_until(lambda: open_interval_gpus(serve) == 2, timeout=60, message="an open interval of 2 GPUs")
    assert in_use_everywhere(team, h100) == (2, 2, 2)

    # What the HPA does: write replicas through the scale subresource, as its own field manager.
    client.AppsV1Api(api_client).patch_namespaced_deployment_scale(
        object_name(serve), team.namespace_name, {"spec": {"replicas": 2}}, field_manager="horizontal-pod-autoscaler")
    wait_until(lambda: open_interval_gpus(serve) == 4, timeout=120, message="the second replica counted")
    assert in_use_everywhere(team, h100) == (4, 4, 4)
    assert list(GpuInterval.objects.filter(job=serve).order_by("started_at", "id")
                .values_list("gpus", flat=True)) == [2, 4]


def test_a_job_that_can_never_start_is_not_ahead_of_a_job_that_runs(live, world, watcher, submit):
    team, h100, _ = world
    big = submit(live, team, h100, workers=4, gpus_per_worker=8, env=OUTLIVES_THE_TEST)  # 32 > 8, ever
    wait_until(lambda: (big.refresh_from_db(), big.reason == EXCEEDS_QUOTA)[1], timeout=90,
               message=f"Kueue to say {big.name} can never start (is {big.reason}: {big.message})")
    assert big.message.startswith("Can never start: this job needs 32")
    assert (big.state, big.get_state_display(), feasibility.queue_position(big)) == (State.QUEUED, "Cannot start", None)

    small = build_job(team, h100, workers=1, gpus_per_worker=1)
    verdict = feasibility.assess(small)
    assert (verdict.verdict, verdict.jobs_ahead) == (Feasibility.NOW, 0), verdict.message
    ran = submit(live, team, h100, workers=1, gpus_per_worker=1, env=OUTLIVES_THE_TEST)
    reaches(ran, State.RUNNING)
    wait_until(lambda: open_interval_gpus(ran) == 1, timeout=60, message="the small job's GPU counted")
    big.refresh_from_db()
    assert (big.state, big.reason, big.gpus_in_use) == (State.QUEUED, EXCEEDS_QUOTA, 0)
    [line] = [line for line in overview()["teams"] if line.label == team.slug and line.flavor == h100]
    assert (line.in_use, line.queued) == (1, 0)  # the 32 GPUs are no one's queued demand


def test_positions_come_from_kueues_visibility_api_without_the_jobs_that_never_start(live, world, watcher,
                                                                                     submit):
    """Kueue's pending workloads, read through the API server's aggregation layer: Kueue lists
    the never-starting job first (it counts its inadmissible workloads too); the platform
    takes Kueue's order and leaves that job out. Priorities give the order (Kueue orders
    same-priority jobs by a creation time of whole seconds)."""
    team, h100, _ = world
    top, high, mid, low = (PriorityClass.objects.create(name=f"{n}-{team.slug}", value=v)
                           for n, v in (("top", 300), ("high", 200), ("mid", 100), ("low", 50)))
    sync_cluster_objects(live)
    holder = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=top, env=OUTLIVES_THE_TEST)
    reaches(holder, State.RUNNING)  # the whole quota, by a job nobody here may preempt
    big = submit(live, team, h100, workers=4, gpus_per_worker=8, priority=high, env=OUTLIVES_THE_TEST)
    first = submit(live, team, h100, workers=1, gpus_per_worker=2, priority=mid, env=OUTLIVES_THE_TEST)
    second = submit(live, team, h100, workers=1, gpus_per_worker=2, priority=low, env=OUTLIVES_THE_TEST)
    names = [object_name(job) for job in (big, first, second)]
    order = wait_until(lambda: (o := pending.kueue_order(first, live)) and all(n in o for n in names) and o,
                       timeout=90, message="Kueue to list the three waiting jobs")
    assert [order.index(name) for name in names] == sorted(order.index(name) for name in names)
    wait_until(lambda: (big.refresh_from_db(), big.reason == EXCEEDS_QUOTA)[1], timeout=90,
               message="the big job said never to start")
    assert [pending.position(job, live) for job in (big, first, second)] == [None, 0, 1]
    assert [feasibility.queue_position(job, live) for job in (big, first, second)] == [None, 0, 1]
