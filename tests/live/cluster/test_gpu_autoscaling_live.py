"""Inference scaling on GPU utilization on the local cluster: a server submitted through the
platform gets a ScaledObject the real API server accepts (KEDA's CRD), KEDA's operator makes
its HPA, KEDA's metrics server answers that HPA through the aggregation layer from the local
Prometheus, which scrapes the dcgm-format exporter, which reports what the pods' env says.
So the server goes from 1 to 3 replicas while its pods report 95 % and back to 1 at 10 %,
and never beyond what the team's quota can run; a reconcile between never takes back the
replicas KEDA's HPA set, nor prunes that HPA."""

import pytest

from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Job
from jobs.tasks import sync_job
from quotas.models import Quota
from quotas.tasks import sync_team_quotas
from workloads import autoscaling
from workloads.serving import SCALED_OBJECT

from ...support.cluster import reaches, stays_true, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

# Busy at first, idle after 90 s, counted from each pod's own start: the replicas KEDA adds
# are busy for their first 90 s too, so the server comes down once all of them are idle.
BUSY_THEN_IDLE = "0:95,90:10"


@pytest.fixture
def keda(keda_on_the_cluster, live, live_prometheus, settings):
    """KEDA asks the local Prometheus every 5 s; its HPA scales down after 10 s of low use."""
    settings.KEDA_POLLING_INTERVAL_SECONDS = 5
    settings.KEDA_SCALE_DOWN_WINDOW_SECONDS = 10
    assert autoscaling.unavailable(live) == "", autoscaling.unavailable(live)
    return live


def server(live, team, flavor, **fields) -> Job:
    fields = {"env": {"GPU_SIM_UTIL": BUSY_THEN_IDLE}, **fields}
    return submit(live, team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=3,
                  gpus_per_worker=1, autoscale_metric="gpu", target_gpu_utilization_percent=50, **fields)


def deployment(live, job) -> dict:
    return live.get("apps/v1", "Deployment", object_name(job), job.team.namespace_name)


def wanted(live, job) -> int:
    return deployment(live, job)["spec"]["replicas"]


def kedas_hpa(live, job) -> dict:
    return live.get("autoscaling/v2", "HorizontalPodAutoscaler", f"keda-hpa-{object_name(job)}",
                    job.team.namespace_name)


def test_a_server_scales_from_1_to_3_at_95_percent_and_back_to_1_at_10(keda, world, watcher):
    team, h100, _ = world
    job = server(keda, team, h100)
    reaches(job, State.RUNNING)
    so = keda.get(*SCALED_OBJECT, object_name(job), team.namespace_name)
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (1, 3)
    hpa = wait_until(lambda: kedas_hpa(keda, job), timeout=60, message="KEDA's HPA for the ScaledObject")
    assert hpa["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "keda-operator"

    seen = []

    def scaled_to(count):
        seen.append(wanted(keda, job))
        return seen[-1] == count

    wait_until(lambda: scaled_to(3), timeout=180, interval=2, message="3 replicas while the GPUs report 95 %")
    reaches(job, State.RUNNING)
    # A reconcile now sends nothing that would take back KEDA's replicas or its HPA.
    sync_job(keda, job)
    assert wanted(keda, job) == 3 and kedas_hpa(keda, job)
    wait_until(lambda: scaled_to(1), timeout=300, interval=2, message="back to 1 replica once they report 10 %")
    assert max(seen) == 3, seen


def test_a_server_never_scales_beyond_what_the_teams_quota_can_run(keda, world, watcher):
    team, h100, _ = world
    Quota.objects.filter(team=team, flavor=h100).update(nominal_gpus=2)
    sync_team_quotas(keda, team)
    job = server(keda, team, h100, env={"GPU_SIM_UTIL": "95"})
    reaches(job, State.RUNNING)
    so = keda.get(*SCALED_OBJECT, object_name(job), team.namespace_name)
    assert so["spec"]["maxReplicaCount"] == 2
    wait_until(lambda: wanted(keda, job) == 2, timeout=180, interval=2, message="2 replicas, all the quota runs")
    stays_true(lambda: wanted(keda, job) == 2, seconds=45, interval=2, message="at most 2 replicas")
    assert kedas_hpa(keda, job)["spec"]["maxReplicas"] == 2
