"""Jobs, teams and flavors over the API: what each endpoint answers."""

import pytest

from jobs.lifecycle import State
from jobs.manifests import render_job
from jobs.models import Job

from ..builders import make_job, make_quota
from ..support.api import JOB_BODY, add_pod, issue_token

pytestmark = pytest.mark.django_db


def test_submitting_creates_a_submitted_job_and_schedules_its_reconcile(client_as, member, team, flavor, scheduled_reconciles):
    response = client_as(member).post("/api/v1/jobs", JOB_BODY, format="json")
    assert response.status_code == 201
    job = Job.objects.get()
    assert response["Location"].endswith(f"/api/v1/jobs/{job.pk}")
    body = response.json()
    assert body["state"] == "submitted" and body["submitter"] == "max" and body["total_gpus"] == 8
    assert (job.workers, job.gpus_per_worker, job.env) == (2, 4, {"EPOCHS": "3"})
    assert scheduled_reconciles == [job.pk]


def test_an_inference_job_is_submitted_with_its_serving_fields(client_as, member, team, flavor):
    body = {**JOB_BODY, "kind": "inference", "workers": 1, "gpus_per_worker": 1, "port": 8080,
            "min_replicas": 1, "max_replicas": 3, "readiness_path": "/healthz"}
    response = client_as(member).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["total_gpus"] == 3


def test_the_job_list_uses_the_shared_job_filter(client_as, owner, team, flavor):
    running = make_job(team, flavor, name="alpha")
    running.submit()
    running.observe(State.RUNNING, reason="Running", message="")
    make_job(team, flavor, name="beta")
    client = client_as(owner)
    names = lambda **params: [j["name"] for j in client.get("/api/v1/jobs", params).json()["results"]]  # noqa: E731
    assert names(state="running") == ["alpha"]
    assert names(state=["running", "draft"]) == ["beta", "alpha"]
    assert names(q="bet") == ["beta"]
    assert names(team="vision", kind="training") == ["beta", "alpha"]
    assert client.get("/api/v1/jobs", {"team": "other-team"}).status_code == 400


def test_the_job_list_orders_and_pages_with_a_cursor(client_as, owner, team, flavor):
    ids = [make_job(team, flavor, name=f"job-{i}").pk for i in range(5)]
    client = client_as(owner)
    first = client.get("/api/v1/jobs", {"page_size": 2}).json()
    assert [j["id"] for j in first["results"]] == ids[::-1][:2]
    assert "cursor=" in first["next"] and first["previous"] is None
    second = client.get(first["next"]).json()
    assert [j["id"] for j in second["results"]] == ids[::-1][2:4]
    oldest_first = client.get("/api/v1/jobs", {"ordering": "id", "page_size": 2}).json()
    assert [j["id"] for j in oldest_first["results"]] == ids[:2]


@pytest.mark.parametrize("jobs", [3, 30])
def test_listing_jobs_costs_the_same_queries_whatever_the_page_size(client_as, owner, team, flavor, jobs, django_assert_num_queries):
    for i in range(jobs):
        make_job(team, flavor, name=f"job-{i}", submitter=owner)
    client = client_as(owner)
    # session + user + the visibility subquery's permission checks + one list query.
    with django_assert_num_queries(5):
        assert len(client.get("/api/v1/jobs", {"page_size": 50}).json()["results"]) == jobs


def test_cancelling_moves_the_job_to_cancelling_and_schedules_its_removal(client_as, member, job, scheduled_reconciles):
    response = client_as(member).post(f"/api/v1/jobs/{job.pk}/cancel")
    assert response.status_code == 202 and response.json()["state"] == "cancelling"
    assert scheduled_reconciles == [job.pk]
    assert "Cancelled by max" in Job.objects.get().message


def test_events_list_every_state_change_oldest_first(client_as, viewer, job):
    job.observe(State.RUNNING, reason="Running", message="Pods started.")
    events = client_as(viewer).get(f"/api/v1/jobs/{job.pk}/events").json()
    assert [(e["from_state"], e["to_state"]) for e in events] == [
        ("draft", "submitted"), ("submitted", "admitted"), ("admitted", "running")
    ]
    assert events[-1]["message"] == "Pods started."


def test_manifests_are_exactly_what_the_renderer_produces(client_as, viewer, job):
    body = client_as(viewer).get(f"/api/v1/jobs/{job.pk}/manifests").json()
    assert body["objects"] == render_job(Job.objects.select_related("team", "flavor").get(pk=job.pk))
    assert {o["kind"] for o in body["objects"]} == {"Job"}  # one worker: no rendezvous Service


def test_logs_come_from_each_pod_of_the_job(client_as, viewer, job, fake, flavor):
    add_pod(fake, job, "existing-1-1", "w1 line 1\nw1 line 2\n")
    add_pod(fake, job, "existing-1-0", "w0 line 1\nw0 line 2\n")
    other = make_job(job.team, flavor, name="other")
    add_pod(fake, other, "other-2-0", "not mine\n")
    body = client_as(viewer).get(f"/api/v1/jobs/{job.pk}/logs", {"tail": 1}).json()
    assert body == {"message": "", "pods": [
        {"pod": "existing-1-0", "log": "w0 line 2\n"}, {"pod": "existing-1-1", "log": "w1 line 2\n"},
    ]}


def test_logs_of_a_job_without_pods_say_so(client_as, viewer, job, fake):
    body = client_as(viewer).get(f"/api/v1/jobs/{job.pk}/logs").json()
    assert body["pods"] == [] and "no pods" in body["message"]


def test_logs_say_when_the_cluster_does_not_answer(client_as, viewer, job, fake):
    from cluster import TransientError

    fake.fail_next("LIST", TransientError("connection refused"))
    response = client_as(viewer).get(f"/api/v1/jobs/{job.pk}/logs")
    assert response.status_code == 503 and "did not answer" in response.json()["message"]


def test_a_team_shows_its_quotas_with_what_its_jobs_use(client_as, viewer, team, flavor):
    from tests.builders import make_flavor

    make_quota(team, flavor, nominal_gpus=16)
    t4 = make_flavor("t4", gpus_per_node=4)
    make_quota(team, t4, nominal_gpus=4)
    running = make_job(team, flavor, name="big", workers=2, gpus_per_worker=4)
    running.submit()
    running.observe(State.RUNNING, reason="Running", message="")
    waiting = make_job(team, flavor, name="small", gpus_per_worker=2)
    waiting.submit()
    done = make_job(team, flavor, name="done", gpus_per_worker=8)
    done.submit()
    done.observe(State.SUCCEEDED, reason="Finished", message="")
    body = client_as(viewer).get("/api/v1/teams/vision").json()
    assert body["role"] == "viewer" and body["namespace"] == "team-vision"
    assert [(q["flavor"], q["nominal_gpus"], q["ceiling_gpus"], q["running_gpus"], q["pending_gpus"]) for q in body["quotas"]] == [
        ("h100", 16, 16, 8, 2), ("t4", 4, 4, 0, 0),
    ]


def test_flavors_are_listed_by_name_and_filterable_by_scheduler(client_as, outsider, flavor):
    from tests.builders import make_flavor

    make_flavor("a100-volcano", scheduler="volcano")
    client = client_as(outsider)
    assert [f["name"] for f in client.get("/api/v1/flavors").json()["results"]] == ["a100-volcano", "h100"]
    assert [f["name"] for f in client.get("/api/v1/flavors", {"scheduler": "kueue"}).json()["results"]] == ["h100"]


def test_the_schema_and_the_docs_are_served(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/jobs", "/api/v1/jobs/{id}/cancel", "/api/v1/tokens", "/api/v1/teams/{slug}"} <= set(paths)
    assert paths["/api/v1/jobs"]["post"]["responses"]["409"]["content"]["application/json"]["schema"]
    assert client.get("/api/docs/").status_code == 200


def test_other_teams_never_leak_into_a_teams_usage(client_as, owner, team, flavor, outsider):
    make_quota(team, flavor)
    other = outsider.memberships.get().team
    theirs = make_job(other, flavor, name="theirs", gpus_per_worker=8)
    theirs.submit()
    quota = client_as(owner).get("/api/v1/teams/vision").json()["quotas"][0]
    assert quota["pending_gpus"] == 0


def test_ping_answers_without_credentials(client):
    assert client.get("/api/v1/ping").json() == {"ok": True}


def test_a_job_cannot_ask_the_gpu_runtime_for_every_gpu_on_its_node(client_as, member, team, flavor):
    body = {**JOB_BODY, "env": {"EPOCHS": "3", "NVIDIA_VISIBLE_DEVICES": "all"}}
    response = client_as(member).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400
    assert "NVIDIA_VISIBLE_DEVICES would be read by the GPU runtime" in str(response.json()["fields"]["env"])
    assert not Job.objects.exists()


def test_a_token_reads_jobs_in_one_query(client_as, owner, team, flavor, django_assert_num_queries):
    """The page alone, a retrieve with its preemptions one more: the process found the token (with its user and
    whether they manage quotas) on its first use, and nothing is written once the token's
    last use is recorded."""
    job = make_job(team, flavor, name="one", submitter=owner)
    api = client_as(token=issue_token(owner, team=team))
    api.get("/api/v1/jobs")  # the token's first use: found, and its last_used_at written
    with django_assert_num_queries(1):
        assert api.get("/api/v1/jobs").status_code == 200
    api.get(f"/api/v1/jobs/{job.pk}")  # the idle-GPU policies, read once per CACHE_SECONDS
    with django_assert_num_queries(2):  # and its preemptions (docs/preemption.md)
        assert api.get(f"/api/v1/jobs/{job.pk}").status_code == 200


def test_without_the_token_cache_a_request_looks_its_token_up(client_as, owner, team, settings, django_assert_num_queries):
    settings.API_TOKEN_CACHE_SECONDS = 0
    api = client_as(token=issue_token(owner, team=team))
    api.get("/api/v1/jobs")
    with django_assert_num_queries(2):  # the token with its user and flag, then the page
        assert api.get("/api/v1/jobs").status_code == 200


def test_a_submit_reads_nothing_back(client_as, owner, team, flavor, django_assert_num_queries):
    """What a submit costs, pinned: the team and flavor named; in one transaction
    the key (in a savepoint), the membership, the live-name check, the team's row locked
    and then its live jobs counted (MAX_LIVE_JOBS_PER_TEAM), the submitter's cap looked up
    (none here; with one, their holding is counted too: jobs.queue.caps), the job (inserted as submitted,
    no draft to update), its event, the key's job; then the feasibility answer's usage and
    quota (no other job waits, so the queue is not read); and the flavor's open drain, asked by
    the job's validation and by the verdict (docs/drain.md)."""
    make_quota(team, flavor, nominal_gpus=8)
    api = client_as(token=issue_token(owner, team=team))
    api.get("/api/v1/jobs")
    with django_assert_num_queries(19):
        response = api.post("/api/v1/jobs", {**JOB_BODY, "team": team.slug}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert response.status_code == 201, response.json()
