"""Kueue's own words for a waiting job in the API, beside the platform's: the job's
``kueue_reason`` and ``kueue_message`` (verbatim), its place in the queue (Kueue's position,
the platform's count), and a feasibility verdict that is Kueue's once Kueue has said why."""

import pytest

from jobs.lifecycle import State
from jobs.outlook import feasibility
from jobs.outlook.pending import pending_path
from workloads import queue_name
from workloads.pods import object_name

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db

MORE = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "8 more needed")
UNAVAILABLE = "couldn't assign flavors to pod set main: resource example.com/gpu unavailable in ClusterQueue"


def waiting(team, flavor, kueue_reason="WaitingForQuota", kueue_message=MORE, reason="WaitingForQuota",
            message="Waiting for quota: team vision has too few free h100 GPUs for this job (8 needed, 8 more must "
                    "free up)."):
    job = make_job(team, flavor, name=f"w-{kueue_reason.lower()}", gpus_per_worker=8)
    job.submit()
    job.observe(State.QUEUED, reason=reason, message=message)
    job.hear_kueue(kueue_reason, kueue_message)
    return job


@pytest.mark.parametrize("who, sees", [("owner", True), ("member", True), ("outsider", False)])
def test_kueues_words_are_shown_verbatim_to_the_team_only(client_as, request, team, flavor, who, sees):
    make_quota(team, flavor, nominal_gpus=8)
    job = waiting(team, flavor)
    response = client_as(request.getfixturevalue(who)).get(f"/api/v1/jobs/{job.pk}")
    if not sees:
        assert response.status_code == 404
        return
    body = response.json()
    assert (body["kueue_reason"], body["kueue_message"]) == ("WaitingForQuota", MORE)
    assert body["reason"] == "WaitingForQuota" and body["message"].startswith("Waiting for quota: team vision")
    assert body["queue"] == {"kueue_position": None, "jobs_ahead": 0, "in_kueue_order": False}


def test_the_list_carries_kueues_words_and_no_other_teams(client_as, member, outsider, team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    waiting(team, flavor)
    theirs = client_as(outsider).get("/api/v1/jobs").json()["results"]
    ours = client_as(member).get("/api/v1/jobs").json()["results"]
    assert theirs == [] and [(j["kueue_reason"], j["kueue_message"]) for j in ours] == [("WaitingForQuota", MORE)]


def test_kueues_position_is_given_verbatim_beside_the_platforms_count(client_as, member, fake, team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    job = waiting(team, flavor)
    # Kueue lists another workload first (one that is not the platform's, or can never start).
    items = [{"metadata": {"name": "wl-x", "ownerReferences": [{"kind": "Job", "name": "someone-else"}]},
              "positionInClusterQueue": 0},
             {"metadata": {"name": "wl-y", "ownerReferences": [{"kind": "Job", "name": object_name(job)}]},
              "positionInClusterQueue": 1}]
    fake.set_path(pending_path(queue_name(team.namespace_name, flavor)), {"items": items})
    body = client_as(member).get(f"/api/v1/jobs/{job.pk}").json()
    assert body["queue"] == {"kueue_position": 1, "jobs_ahead": 0, "in_kueue_order": True}


def test_kueue_saying_no_flavor_matches_makes_the_verdict_never(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)  # the platform's model alone would say it starts now
    job = waiting(team, flavor, "NoMatchingFlavor", UNAVAILABLE, reason="NoMatchingFlavor",
                  message="Can never start as it is: team vision's h100 queue offers nothing that fits it.")
    verdict = feasibility.assess(job)
    assert (verdict.verdict, verdict.kueue_reason, verdict.kueue_message) == ("never", "NoMatchingFlavor", UNAVAILABLE)
    assert verdict.message.startswith("Can never start as it is")


def test_kueue_saying_it_waits_makes_the_verdict_queue_where_the_model_says_now(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    job = waiting(team, flavor)
    assert feasibility._by_model(job).verdict == "now"
    verdict = feasibility.assess(job)
    assert (verdict.verdict, verdict.kueue_reason) == ("queue", "WaitingForQuota")
    assert verdict.message == job.message  # the model disagreed: the platform's reading of Kueue's words


def test_before_kueue_has_said_anything_the_verdict_is_the_models(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    job = make_job(team, flavor, gpus_per_worker=8)
    job.submit()
    verdict = feasibility.assess(job)
    assert (verdict.verdict, verdict.kueue_reason) == ("now", "")


def test_the_schema_documents_kueues_words_apart_from_the_platforms():
    from drf_spectacular.generators import SchemaGenerator

    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    job = components["JobDetail"]["properties"]
    assert {"kueue_reason", "kueue_message", "reason", "message", "queue"} <= set(job)
    assert "Kueue's own reason" in job["kueue_reason"]["description"]
    assert "GPU Platform" in job["message"]["description"]
    assert {"kueue_reason", "kueue_message"} <= set(components["Feasibility"]["properties"])
