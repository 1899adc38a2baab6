"""The job page's logs: who may read them, which pod they come from, plain words instead of
transport errors, follow until the job ends, the previous container, download, and what is
kept of a failed container once its pod is gone."""

import pytest
from django.urls import reverse

from cluster import PermanentError, TransientError
from jobs.lifecycle import State
from jobs.models import LogTail

from ..builders import make_job
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db


def logs(job, **params):
    return reverse("jobs:logs", args=[job.pk]), params


def download(job):
    return reverse("jobs:log_download", args=[job.pk])


def pod(job, name, phase="Running", *, exit_code=None, last_exit_code=None, job_label=None):
    status = {"name": "main", "restartCount": 0, "state": {"running": {}}}
    if exit_code is not None:
        status["state"] = {"terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-01-05T09:01:00Z"}}
    if last_exit_code is not None:
        status.update(restartCount=1, lastState={"terminated": {"exitCode": last_exit_code, "reason": "OOMKilled",
                                                                "finishedAt": "2026-01-05T09:00:30Z"}})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": job.team.namespace_name, "uid": f"uid-{name}",
                     "labels": {"app.kubernetes.io/managed-by": "gpuplatform",
                                "gpuplatform.io/job": str(job_label or job.pk)}},
        "spec": {"containers": [{"name": "main", "image": "x"}], "nodeName": "h100-0"},
        "status": {"phase": phase, "containerStatuses": [status]},
    }


def training_log(lines):
    return "".join(f"epoch 1 step {i} loss {5 - i / 1000:.4f}\n" for i in range(1, lines + 1))


@pytest.fixture
def pods(fake, running_job):
    """Two pods of the running job with logs, and a pod of another job in the same namespace."""
    namespace = running_job.team.namespace_name
    fake.put(pod(running_job, "running-job-1-0-abc"))
    fake.put(pod(running_job, "running-job-1-1-def"))
    fake.set_pod_logs(namespace, "running-job-1-0-abc", training_log(300), container="main")
    fake.set_pod_logs(namespace, "running-job-1-1-def", "rank 1 ready\n", container="main")
    fake.put(pod(running_job, "someone-elses-0", job_label=running_job.pk + 1000))
    fake.set_pod_logs(namespace, "someone-elses-0", "SECRET of another job\n", container="main")
    return fake


# --- who may read ---------------------------------------------------------------------------------
@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_the_team_reads_pods_logs_and_downloads(request, client_for, running_job, pods, who):
    client = client_for(request.getfixturevalue(who))
    assert client.get(reverse("jobs:pods", args=[running_job.pk])).status_code == 200
    url, params = logs(running_job)
    response = client.get(url, params)
    assert response.status_code == 200 and "loss 4.7000" in response.content.decode()
    response = client.get(download(running_job), {"pod": "running-job-1-0-abc"})
    assert response.status_code == 200 and b"epoch 1 step 1 loss" in response.content


def test_an_outsider_gets_404_for_pods_logs_and_downloads(client_for, outsider, running_job, pods):
    client = client_for(outsider)
    url, _ = logs(running_job)
    assert client.get(reverse("jobs:pods", args=[running_job.pk])).status_code == 404
    assert client.get(url, {"pod": "running-job-1-0-abc"}).status_code == 404
    assert client.get(download(running_job), {"pod": "running-job-1-0-abc"}).status_code == 404
    tail = LogTail.objects.create(job=running_job, pod="gone-0", container="main", text="kept")
    assert client.get(download(running_job), {"tail": tail.pk}).status_code == 404


def test_a_pod_of_another_job_cannot_be_read_through_this_job(client_for, owner, running_job, pods):
    client = client_for(owner)
    url, _ = logs(running_job)
    html = client.get(url, {"pod": "someone-elses-0"}).content.decode()
    assert "SECRET" not in html and "This pod is gone from the cluster" in html
    response = client.get(download(running_job), {"pod": "someone-elses-0"})
    assert response.status_code == 404 and b"SECRET" not in response.content


# --- which pod, and in plain words ------------------------------------------------------------------
def test_the_logs_open_on_the_first_pod_with_its_last_200_lines(client_for, owner, running_job, pods):
    url, _ = logs(running_job)
    html = client_for(owner).get(url).content.decode()
    assert "epoch 1 step 300 loss 4.7000" in html and "epoch 1 step 101 loss" in html
    assert "epoch 1 step 100 loss" not in html  # the 201st line from the end
    assert '<option value="running-job-1-0-abc" selected>' in html and "running-job-1-1-def" in html
    assert "someone-elses-0" not in html


def test_the_logs_open_on_a_failed_pod_first(client_for, owner, running_job, fake):
    namespace = running_job.team.namespace_name
    fake.put(pod(running_job, "running-job-1-0-abc"))
    fake.put(pod(running_job, "running-job-1-1-def", phase="Failed", exit_code=1))
    fake.set_pod_logs(namespace, "running-job-1-0-abc", "fine\n", container="main")
    fake.set_pod_logs(namespace, "running-job-1-1-def", "RuntimeError: NCCL timeout\n", container="main")
    url, _ = logs(running_job)
    html = client_for(owner).get(url).content.decode()
    assert "RuntimeError: NCCL timeout" in html and "fine\n" not in html


@pytest.mark.parametrize("error, said", [
    (TransientError("dial tcp 127.0.0.1:10250: connect: connection refused"), "The cluster did not answer just now"),
    (PermanentError('container "main" in pod "p" is waiting to start: ContainerCreating', status=400),
     "The container has not started yet"),
    (PermanentError("Forbidden: pods/log", status=403), "does not let the platform read"),
])
def test_a_log_that_cannot_be_read_is_said_in_plain_words(client_for, owner, running_job, pods, error, said):
    pods.fail_next("GET", error)
    url, _ = logs(running_job)
    html = client_for(owner).get(url, {"pod": "running-job-1-0-abc"}).content.decode()
    assert said in html
    assert error.message not in html and "dial tcp" not in html and "ContainerCreating" not in html


def test_the_previous_container_is_shown_or_said_to_be_missing(client_for, owner, running_job, pods):
    namespace = running_job.team.namespace_name
    pods.set_pod_logs(namespace, "running-job-1-0-abc", "torch.OutOfMemoryError: CUDA out of memory\n",
                      container="main", previous=True)
    url, _ = logs(running_job)
    client = client_for(owner)
    html = client.get(url, {"pod": "running-job-1-0-abc", "previous": "1"}).content.decode()
    assert "CUDA out of memory" in html and "loss 4.7000" not in html
    html = client.get(url, {"pod": "running-job-1-1-def", "previous": "1"}).content.decode()
    assert "This container has not restarted, so there is no earlier run to show." in html
    assert "previous terminated container" not in html


def test_a_job_with_no_pods_yet_says_so_and_keeps_asking(client_for, owner, running_job, fake):
    url, _ = logs(running_job)
    client = client_for(owner)
    html = client.get(url, **htmx("job-logs")).content.decode()
    assert "This job has no pods on the cluster yet." in html
    assert html.lstrip().startswith('<div id="job-logs" hx-get=') and 'hx-trigger="every 3s, job-ended from:body"' in html
    fake.put(pod(running_job, "running-job-1-0-abc"))
    fake.set_pod_logs(running_job.team.namespace_name, "running-job-1-0-abc", "step 1 loss 2.5\n", container="main")
    assert "step 1 loss 2.5" in client.get(url, **htmx("job-logs")).content.decode()


# --- follow -----------------------------------------------------------------------------------------
def test_following_polls_the_log_text_until_the_job_ends(client_for, owner, running_job, pods):
    url, _ = logs(running_job)
    client = client_for(owner)
    html = client.get(url).content.decode()
    assert '<div id="log-body" hx-get=' in html and 'hx-trigger="every 3s, job-ended from:body"' in html and "follow=1" in html
    body = client.get(url, {"pod": "running-job-1-0-abc", "follow": "1"}, **htmx("log-body")).content.decode()
    assert body.lstrip().startswith('<div id="log-body"') and "<form" not in body and "loss 4.7000" in body
    # the form sends follow=0 before the box: unticked, nothing polls
    html = client.get(url, {"pod": "running-job-1-0-abc", "follow": "0"}).content.decode()
    assert "hx-trigger" not in html.replace('hx-trigger="change"', "")
    running_job.transition(State.SUCCEEDED, reason="Completed")
    html = client.get(url, {"pod": "running-job-1-0-abc", "follow": "1"}, **htmx("log-body")).content.decode()
    assert "hx-trigger" not in html and "loss 4.7000" in html  # the last lines, once more, then no more polls


# --- download ---------------------------------------------------------------------------------------
def test_the_download_is_the_whole_log_as_a_text_attachment(client_for, owner, running_job, pods):
    response = client_for(owner).get(download(running_job), {"pod": "running-job-1-0-abc", "container": "main"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="running-job-1-0-abc-main.log"'
    assert response.content.decode() == training_log(300)  # all of it, not the page's 200 lines


def test_the_previous_container_downloads_under_its_own_name(client_for, owner, running_job, pods):
    pods.set_pod_logs(running_job.team.namespace_name, "running-job-1-0-abc", "run before\n", container="main",
                      previous=True)
    response = client_for(owner).get(download(running_job), {"pod": "running-job-1-0-abc", "previous": "1"})
    assert response.content == b"run before\n"
    assert response["Content-Disposition"] == 'attachment; filename="running-job-1-0-abc-main-previous.log"'


def test_a_download_that_cannot_be_read_says_why_in_words(client_for, owner, running_job, pods):
    pods.fail_next("GET", TransientError("dial tcp 127.0.0.1:10250: connect: connection refused"))
    response = client_for(owner).get(download(running_job), {"pod": "running-job-1-0-abc"})
    assert response.status_code == 404 and b"did not answer just now" in response.content
    assert b"dial tcp" not in response.content


# --- kept tails ---------------------------------------------------------------------------------------
def test_a_failed_job_whose_pods_are_gone_still_shows_its_last_lines(client_for, owner, team, flavor, quota, fake):
    job = make_job(team, flavor, name="broken")
    job.submit()
    job.transition(State.FAILED, reason="Failed", message="A worker failed.")
    LogTail.objects.keep(job.pk, pod="broken-2-0-xyz", container="main", exit_code=1, reason="Error",
                         text="step 40 loss 2.1\ntorch.OutOfMemoryError: CUDA out of memory\n")
    client = client_for(owner)
    url, _ = logs(job)
    html = client.get(url).content.decode()
    assert "torch.OutOfMemoryError: CUDA out of memory" in html
    assert "Kept from <code>broken-2-0-xyz</code> / main when it failed (exit code 1 (Error))" in html
    assert "hx-trigger" not in html
    pods_html = client.get(reverse("jobs:pods", args=[job.pk])).content.decode()
    assert "Kept from failed containers" in pods_html and "broken-2-0-xyz" in pods_html
    tail = job.log_tails.get()
    response = client.get(download(job), {"tail": tail.pk})
    assert response.content.decode().endswith("CUDA out of memory\n")
    assert response["Content-Disposition"] == 'attachment; filename="broken-2-0-xyz-main-last-lines.log"'


def test_a_kept_tail_of_another_job_is_not_found(client_for, owner, running_job, team, flavor, fake):
    other = make_job(team, flavor, name="other")
    tail = LogTail.objects.create(job=other, pod="other-0", container="main", text="other's lines")
    url, _ = logs(running_job)
    assert client_for(owner).get(url, {"tail": tail.pk}).status_code == 404
    assert client_for(owner).get(download(running_job), {"tail": tail.pk}).status_code == 404


def test_the_previous_container_is_offered_only_for_a_pod_that_restarted(client_for, owner, running_job, fake):
    namespace = running_job.team.namespace_name
    fake.put(pod(running_job, "running-job-1-0-abc"))
    fake.put(pod(running_job, "running-job-1-1-def", last_exit_code=137))
    for name in ("running-job-1-0-abc", "running-job-1-1-def"):
        fake.set_pod_logs(namespace, name, "step 1\n", container="main")
    url, _ = logs(running_job)
    client = client_for(owner)
    assert "Previous container" not in client.get(url, {"pod": "running-job-1-0-abc"}).content.decode()
    assert "Previous container" in client.get(url, {"pod": "running-job-1-1-def"}).content.decode()
