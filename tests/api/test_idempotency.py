"""Idempotent submission: a retry with the same Idempotency-Key returns the same job;
concurrent duplicates create exactly one (on PostgreSQL, over real connections)."""

import json
import threading
import urllib.error
import urllib.request

import pytest

from jobs.models import Job
from jobs.models.idempotency import IdempotencyKey

from ..support.api import JOB_BODY, issue_token

pytestmark = pytest.mark.django_db


def test_a_retry_with_the_same_key_and_body_returns_the_same_job(client_as, member, team, flavor):
    client = client_as(token=issue_token(member))
    first = client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="ci-run-42")
    again = client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="ci-run-42")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert Job.objects.count() == 1


def test_the_same_key_with_another_body_is_a_409(client_as, member, team, flavor):
    client = client_as(token=issue_token(member))
    client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="k")
    response = client.post("/api/v1/jobs", {**JOB_BODY, "workers": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 409 and response.json()["code"] == "conflict"
    assert Job.objects.count() == 1


def test_key_order_in_the_body_does_not_matter(client_as, member, team, flavor):
    client = client_as(member)
    client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="k")
    reordered = dict(reversed(list(JOB_BODY.items())))
    assert client.post("/api/v1/jobs", reordered, format="json", HTTP_IDEMPOTENCY_KEY="k").status_code == 200


def test_keys_belong_to_one_token_so_two_pipelines_do_not_collide(client_as, member, team, flavor):
    one = client_as(token=issue_token(member))
    two = client_as(token=issue_token(member))
    assert one.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="build-1").status_code == 201
    response = two.post("/api/v1/jobs", {**JOB_BODY, "name": "train-2"}, format="json", HTTP_IDEMPOTENCY_KEY="build-1")
    assert response.status_code == 201
    assert Job.objects.count() == 2


def test_a_rejected_submission_does_not_use_up_its_key(client_as, member, team, flavor):
    client = client_as(member)
    bad = client.post("/api/v1/jobs", {**JOB_BODY, "gpus_per_worker": 9}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert bad.status_code == 400 and not IdempotencyKey.objects.exists()
    assert client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="k").status_code == 201


def test_an_overlong_key_is_refused(client_as, member, team, flavor):
    response = client_as(member).post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="k" * 256)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["fields"]


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_identical_submissions_create_exactly_one_job(live_server, member, team, flavor):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the race needs a real multi-connection database")
    secret = issue_token(member)
    barrier = threading.Barrier(20)
    answers = []

    def submit():
        request = urllib.request.Request(
            f"{live_server.url}/api/v1/jobs", data=json.dumps(JOB_BODY).encode(), method="POST",
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json",
                     "Idempotency-Key": "same-for-all"},
        )
        barrier.wait()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answers.append((response.status, json.loads(response.read())["id"]))
        except urllib.error.HTTPError as err:
            answers.append((err.code, err.read()))

    threads = [threading.Thread(target=submit) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert Job.objects.count() == 1
    job = Job.objects.get()
    assert sorted(status for status, _ in answers) == [200] * 19 + [201]
    assert {job_id for _, job_id in answers} == {job.pk}


def test_a_replay_answers_with_the_verdict_and_estimate_of_the_first_submit(client_as, member, team, flavor):
    """The team has no quota on h100: the first answer says "never", and so must the replay,
    or `gpuctl submit --wait` on a replay would wait for a job that cannot run."""
    client = client_as(token=issue_token(member))
    first = client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="ci-never")
    again = client.post("/api/v1/jobs", JOB_BODY, format="json", HTTP_IDEMPOTENCY_KEY="ci-never")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["feasibility"]["verdict"] == "never"
    assert again.json()["feasibility"] == first.json()["feasibility"]
    assert again.json()["eta"] == first.json()["eta"] and again.json()["eta"]["known"] is False
    assert again.json()["web_url"] == first.json()["web_url"]
