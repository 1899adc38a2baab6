"""The API side of a job's hardware: the GPU memory budget is a writable field read back as
sent, a budget over one unit of the flavor is a 400 on ``gpu_memory_gib`` in the stable error
shape (owner and member alike; an outsider's team does not exist for them), and multi-node
training on a flavor without a fabric is a 400 on ``workers``."""

import pytest

from ..builders import make_flavor
from ..quotas.test_hardware import T4_TIME_SLICED
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db


def test_the_budget_is_taken_and_read_back(client_as, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "gpu_memory_gib": 18}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["gpu_memory_gib"] == 18
    assert client_as(member).get(f"/api/v1/jobs/{response.json()['id']}").json()["gpu_memory_gib"] == 18


@pytest.mark.parametrize("person", ["owner", "member"])
def test_a_budget_over_a_time_sliced_share_is_a_field_error(client_as, team, person, request):
    make_flavor(**T4_TIME_SLICED, network_fabric="tcp")
    body = {**JOB_BODY, "flavor": "t4-shared", "workers": 1, "gpus_per_worker": 1, "gpu_memory_gib": 8}
    response = client_as(request.getfixturevalue(person)).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400
    [message] = response.json()["fields"]["gpu_memory_gib"]
    assert "no memory isolation" in message and "fewer pods per GPU" in message
    assert not team.jobs.exists()


def test_an_outsider_gets_no_further_than_the_team(client_as, outsider, team):
    make_flavor(**T4_TIME_SLICED, network_fabric="tcp")
    body = {**JOB_BODY, "flavor": "t4-shared", "workers": 1, "gpus_per_worker": 1, "gpu_memory_gib": 8}
    response = client_as(outsider).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400 and "gpu_memory_gib" not in response.json()["fields"]
    assert "team" in response.json()["fields"]


def test_multi_node_on_a_flavor_without_a_fabric_is_a_field_error(client_as, member, team):
    make_flavor("bare", network_fabric="")
    response = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "flavor": "bare"}, format="json")
    assert response.status_code == 400
    assert "declares no network fabric" in response.json()["fields"]["workers"][0]
