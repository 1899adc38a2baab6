"""The API side of a Volcano gang kept in one rack or block (docs/topology.md): taken on a
Volcano flavor that declares a topology and rendered as `spec.networkTopology`; a 400 on
``placement`` in the stable error shape on a Volcano flavor without one (owner and member
alike); an outsider's team does not exist for them."""

import pytest

from ..builders import make_quota
from ..jobs.test_topology_volcano import RACKED, vcjob, volcano
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("person", ["owner", "member"])
def test_the_api_takes_a_rack_on_a_racked_volcano_flavor(client_as, team, person, request):
    make_quota(team, volcano(**RACKED))
    body = {**JOB_BODY, "flavor": "a100", "gpus_per_worker": 8, "placement": "rack"}
    response = client_as(request.getfixturevalue(person)).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["placement"] == "rack"
    job = team.jobs.get(pk=response.json()["id"])
    assert vcjob(job)["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


@pytest.mark.parametrize("person", ["owner", "member"])
def test_the_api_refuses_a_rack_on_a_bare_volcano_flavor_on_its_field(client_as, team, person, request):
    make_quota(team, volcano())
    body = {**JOB_BODY, "flavor": "a100", "placement": "block-preferred"}
    response = client_as(request.getfixturevalue(person)).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400
    [message] = response.json()["fields"]["placement"]
    assert "declares no network topology" in message
    assert not team.jobs.exists()


def test_an_outsider_gets_no_further_than_the_team(client_as, outsider, team):
    make_quota(team, volcano(**RACKED))
    response = client_as(outsider).post("/api/v1/jobs", {**JOB_BODY, "flavor": "a100", "placement": "rack"},
                                        format="json")
    assert response.status_code == 400 and "team" in response.json()["fields"]
    assert not team.jobs.exists()
