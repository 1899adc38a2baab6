"""Container logs from the local cluster, read through the job page: kwok serves them as a
kubelet would (deploy/local-cluster/config/kwok-logs.yaml), the API server reaches it at the
fake node's address and kubelet port, and a failed job keeps its last lines after its pods
are gone."""

import pytest
from django.test import Client
from django.urls import reverse

from jobs.lifecycle import State
from jobs.watch.logs import job_pods
from tenants.models import Membership

from ...support.cluster import reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def owner_client(team) -> Client:
    client = Client()
    client.force_login(team.memberships.get(role=Membership.Role.OWNER).user)
    return client


def test_a_running_job_shows_its_training_log_lines_on_its_page(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    reaches(job, State.RUNNING, timeout=120)
    pod = wait_until(lambda: job_pods(live, job), timeout=60, message="the job's pod")[0]["metadata"]["name"]
    # kubectl logs, as the API server answers it
    assert "training finished" in live.pod_logs(team.namespace_name, pod, container="main", tail_lines=3)
    client = owner_client(team)
    html = client.get(reverse("jobs:logs", args=[job.pk])).content.decode()
    assert "epoch 3/3 validation top1" in html and "step 4500/4500 loss" in html, html
    assert "dial tcp" not in html and "No logs yet" not in html
    html = client.get(reverse("jobs:logs", args=[job.pk]), {"pod": pod, "previous": "1"}).content.decode()
    assert "torch.OutOfMemoryError: CUDA out of memory" in html  # kwok's previous run (previousLogsFile)
    response = client.get(reverse("jobs:log_download", args=[job.pk]), {"pod": pod})
    assert response.status_code == 200 and response.content.decode().count("\n") >= 50


def test_a_failed_job_keeps_its_last_lines_after_its_pods_are_gone(live, world, watcher, api_client):
    from kubernetes import client as k8s

    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=1,
                 env={"GPUPLATFORM_FAKE_DURATION": "2s", "GPUPLATFORM_FAKE_OUTCOME": "fail"})
    wait_until(lambda: job.log_tails.exists(), timeout=120, message="the failed container's kept lines")
    tail = job.log_tails.first()
    assert tail.exit_code == 1 and "failed on purpose" in tail.message
    assert "training finished" in tail.text and len(tail.text.splitlines()) <= 200
    reaches(job, State.FAILED, timeout=240)
    core = k8s.CoreV1Api(api_client)
    core.delete_collection_namespaced_pod(team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}",
                                          grace_period_seconds=0)
    wait_until(lambda: not job_pods(live, job), timeout=60, message="the job's pods to be gone")
    html = owner_client(team).get(reverse("jobs:logs", args=[job.pk])).content.decode()
    assert "Kept from" in html and "when it failed (exit code 1 (Error)" in html
    assert "training finished: 3 epochs" in html
