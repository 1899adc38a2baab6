"""Scaling on GPU utilization over the API: taken where the cluster has KEDA (owner and member
alike), refused with a field error in the stable shape where it has none, and a team's server
never submitted by an outsider whatever it scales on."""

import pytest

from cluster import FakeCluster
from jobs.models import Job
from workloads.serving import SCALED_OBJECT

from ..builders import make_quota
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db

SERVER = {**JOB_BODY, "kind": "inference", "name": "serve", "workers": 1, "gpus_per_worker": 1, "port": 8000,
          "min_replicas": 1, "max_replicas": 3, "autoscale_metric": "gpu", "target_gpu_utilization_percent": 60}


@pytest.fixture
def prometheus(settings):
    settings.PROMETHEUS_URL = "http://prometheus.monitoring.svc:9090"


@pytest.fixture
def without_keda(monkeypatch, prometheus):
    from core import reconcile

    cluster = FakeCluster(missing_kinds=[SCALED_OBJECT])
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    return cluster


@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_submit_a_server_scaling_on_gpu(request, client_as, fake, prometheus, team, flavor, who):
    make_quota(team, flavor)
    response = client_as(request.getfixturevalue(who)).post("/api/v1/jobs", SERVER, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["autoscale_metric"], body["target_gpu_utilization_percent"]) == ("gpu", 60)
    job = Job.objects.get()
    assert (job.autoscale_metric, job.target_gpu_utilization_percent) == ("gpu", 60)


def test_without_keda_gpu_scaling_is_a_400_field_error_and_nothing_is_made(client_as, without_keda, member, team,
                                                                           flavor, scheduled_reconciles):
    make_quota(team, flavor)
    response = client_as(member).post("/api/v1/jobs", SERVER, format="json")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert list(fields) == ["autoscale_metric"] and "KEDA" in fields["autoscale_metric"][0]
    assert not Job.objects.exists() and scheduled_reconciles == []
    cpu = client_as(member).post("/api/v1/jobs", {**SERVER, "autoscale_metric": "cpu"}, format="json")
    assert cpu.status_code == 201, cpu.json()


def test_an_unknown_metric_is_a_400_field_error(client_as, fake, prometheus, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", {**SERVER, "autoscale_metric": "tpu"}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["autoscale_metric"]


def test_a_target_beyond_100_is_a_400_field_error(client_as, fake, prometheus, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", {**SERVER, "target_gpu_utilization_percent": 101},
                                      format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["target_gpu_utilization_percent"]


def test_an_outsider_cannot_submit_a_server_to_the_team(client_as, fake, prometheus, outsider, team, flavor):
    response = client_as(outsider).post("/api/v1/jobs", SERVER, format="json")
    assert response.status_code in (400, 403, 404)
    assert not Job.objects.filter(team=team).exists()
