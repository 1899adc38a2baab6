"""What the job page tells a researcher beyond its state: queue wait, run time and GPU-hours,
an inference server's endpoint and replicas, "Submit this draft", and a flash message that is
said once instead of staying for the job's whole life."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import GpuInterval, Job

from ..builders import make_job
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db


def detail(job):
    return reverse("jobs:detail", args=[job.pk])


def submit_draft(job):
    return reverse("jobs:submit_draft", args=[job.pk])


# --- times and GPU-hours ------------------------------------------------------------------------------
def test_the_page_says_how_long_the_job_waited_ran_and_its_gpu_hours(client_for, owner, running_job):
    now = timezone.now()
    Job.objects.filter(pk=running_job.pk).update(
        submitted_at=now - timedelta(hours=2, minutes=10), admitted_at=now - timedelta(hours=2),
        started_at=now - timedelta(hours=2), finished_at=now, state=State.SUCCEEDED)
    GpuInterval.objects.filter(job=running_job).update(started_at=now - timedelta(hours=2), ended_at=now)
    html = client_for(owner).get(detail(running_job)).content.decode()
    assert "<dt>Queue wait</dt><dd>10 min 00 s</dd>" in html
    assert "<dt>Run time</dt><dd>2 h 00 min</dd>" in html
    assert "<dt>GPU-hours</dt><dd>8.00</dd>" in html  # 4 GPUs for 2 hours


def test_a_job_still_waiting_says_so_far(client_for, owner, team, flavor, quota):
    job = make_job(team, flavor, name="waiting")
    job.submit()
    html = client_for(owner).get(detail(job), **htmx("job-status")).content.decode()
    assert "so far</dd>" in html and "<dt>Run time</dt><dd>not started</dd>" in html
    assert "<dt>GPU-hours</dt><dd>0.00</dd>" in html


# --- inference --------------------------------------------------------------------------------------
@pytest.fixture
def server(team, flavor, quota, member):
    job = make_job(team, flavor, name="chat", kind=Job.Kind.INFERENCE, port=80, min_replicas=1, max_replicas=3,
                   submitter=member)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        job.transition(state, reason=state.label)
    return job


def test_an_inference_page_gives_its_service_port_and_port_forward_command(client_for, owner, server):
    html = client_for(owner).get(detail(server)).content.decode()
    service, namespace = f"chat-{server.pk}", server.team.namespace_name
    assert f"<code>{service}</code>, port 80" in html
    assert f"http://{service}.{namespace}.svc.cluster.local:80" in html
    assert f"kubectl -n {namespace} port-forward service/{service} 8080:80" in html  # a local port that needs no root
    assert "1 at least, 3 at most" in html


def test_an_inference_pods_panel_counts_its_replicas_now(client_for, owner, server, fake):
    namespace = server.team.namespace_name
    fake.put({"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": f"chat-{server.pk}", "namespace": namespace},
              "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}})
    fake.put({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": f"chat-{server.pk}-abc", "namespace": namespace,
                           "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(server.pk)}},
              "spec": {"containers": [{"name": "main", "image": "x"}]}, "status": {"phase": "Running"}})
    html = client_for(owner).get(reverse("jobs:pods", args=[server.pk])).content.decode()
    assert "2 running, 1 ready, 2 wanted (at least 1, at most 3)" in html


def test_a_training_page_has_no_endpoint(client_for, owner, running_job):
    assert "port-forward" not in client_for(owner).get(detail(running_job)).content.decode()


# --- drafts -------------------------------------------------------------------------------------------
@pytest.fixture
def draft(team, flavor, quota, owner):
    return make_job(team, flavor, name="draft-run", submitter=owner)


@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_submit_a_draft_from_its_page(request, client_for, draft, who, no_reconcile,
                                                         django_capture_on_commit_callbacks):
    client = client_for(request.getfixturevalue(who))
    assert "Submit this draft" in client.get(detail(draft)).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(submit_draft(draft), follow=True)
    draft.refresh_from_db()
    assert draft.state == State.SUBMITTED and no_reconcile == [draft.pk]
    assert "Submitted draft-run to vision." in response.content.decode()
    assert "Submit this draft" not in response.content.decode()


@pytest.mark.parametrize("who", ["viewer", "quota_manager"])
def test_viewers_and_quota_managers_neither_see_nor_use_submit_this_draft(request, client_for, draft, who, no_reconcile,
                                                                          django_capture_on_commit_callbacks):
    client = client_for(request.getfixturevalue(who))
    assert "Submit this draft" not in client.get(detail(draft)).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(submit_draft(draft)).status_code == 403
    draft.refresh_from_db()
    assert draft.state == State.DRAFT and no_reconcile == []


def test_an_outsider_cannot_submit_another_teams_draft(client_for, outsider, draft, no_reconcile):
    assert client_for(outsider).post(submit_draft(draft)).status_code == 404
    draft.refresh_from_db()
    assert draft.state == State.DRAFT


def test_a_draft_that_no_longer_passes_the_checks_stays_a_draft_and_says_why(client_for, owner, draft, no_reconcile,
                                                                           django_capture_on_commit_callbacks):
    draft.env = {"MASTER_ADDR": "10.0.0.1"}  # a reserved name, saved around the form's checks
    draft.save(update_fields=["env"])
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(submit_draft(draft), follow=True)
    draft.refresh_from_db()
    assert draft.state == State.DRAFT and no_reconcile == []
    assert "The draft was not submitted: MASTER_ADDR is set by the platform" in response.content.decode()


def test_submitting_a_draft_twice_says_it_is_already_submitted(client_for, owner, draft, no_reconcile,
                                                               django_capture_on_commit_callbacks):
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(submit_draft(draft))
        response = client.post(submit_draft(draft), follow=True)
    assert "draft-run is already submitted." in response.content.decode() and no_reconcile == [draft.pk]


def test_submit_this_draft_is_a_post(client_for, owner, draft):
    assert client_for(owner).get(submit_draft(draft)).status_code == 405


# --- the flash, said once -----------------------------------------------------------------------------
def test_the_submitted_flash_is_cleared_once_the_job_moves_on(client_for, owner, draft, no_reconcile):
    client = client_for(owner)
    page = client.post(submit_draft(draft), follow=True).content.decode()
    assert "Submitted draft-run to vision." in page
    # the page polls with the state it shows: still submitted, the flash is left alone
    poll = client.get(detail(draft), {"seen": "submitted"}, **htmx("job-status")).content.decode()
    assert 'id="messages"' not in poll
    draft.refresh_from_db()
    draft.transition(State.QUEUED, reason="Queued", message="Waiting for the scheduler.")
    poll = client.get(detail(draft), {"seen": "submitted"}, **htmx("job-status")).content.decode()
    assert '<div id="messages" class="messages" aria-live="polite" hx-swap-oob="true">\n  \n</div>' in poll
    assert "Submitted draft-run" not in poll
    assert "?seen=queued" in poll  # the next poll compares with what this one shows


def test_a_drafts_pods_and_logs_do_not_poll_a_cluster_it_is_not_on(client_for, owner, draft, fake):
    pods = client_for(owner).get(reverse("jobs:pods", args=[draft.pk])).content.decode()
    assert "it is a draft, not submitted" in pods and "hx-trigger" not in pods
    logs = client_for(owner).get(reverse("jobs:logs", args=[draft.pk])).content.decode()
    assert "hx-trigger" not in logs
