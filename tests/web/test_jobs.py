"""The jobs list (filters, pagination, pinned query count) and the job page (status, live
updates that stop at a final state, pods and logs, cancel)."""

import re

import pytest
from django.urls import reverse

from cluster import TransientError
from jobs.lifecycle import State

from ..builders import make_flavor, make_job, make_user
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db

LIST = reverse("jobs:list")


def detail(job):
    return reverse("jobs:detail", args=[job.pk])


# --- list ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_team_people_see_their_teams_jobs(request, client_for, running_job, who):
    html = client_for(request.getfixturevalue(who)).get(LIST).content.decode()
    assert "running-job" in html and "Running" in html


def test_outsiders_do_not_see_other_teams_jobs(client_for, outsider, running_job):
    assert b"running-job" not in client_for(outsider).get(LIST).content


def test_jobs_filter_by_team_state_kind_flavor_and_submitter(client_for, owner, member, team, flavor, quota, running_job):
    other_flavor = make_flavor("a100")
    make_job(team, other_flavor, name="draft-job", submitter=owner)
    client = client_for(owner)

    def names(**params):
        html = client.get(LIST, params, **htmx("job-table")).content.decode()
        return {name for name in ("running-job", "draft-job") if f">{name}<" in html}

    assert names() == {"running-job", "draft-job"}
    assert names(state="running") == {"running-job"}
    assert names(state="draft") == {"draft-job"}
    assert names(flavor="a100") == {"draft-job"}
    assert names(submitter="max") == {"running-job"}
    assert names(kind="inference") == set()
    assert names(team="vision", q="draft") == {"draft-job"}


def test_filtering_by_a_team_one_cannot_see_is_refused(client_for, outsider, running_job):
    html = client_for(outsider).get(LIST, {"team": "vision"}).content.decode()
    assert "Select a valid choice" in html and "running-job" not in html


def test_the_filter_answers_htmx_with_the_table_fragment_only(client_for, owner, running_job):
    html = client_for(owner).get(LIST, {"state": "running"}, **htmx("job-table")).content.decode()
    assert html.lstrip().startswith('<div id="job-table">') and "<html" not in html


def test_the_list_is_paginated_newest_first_without_counting(client_for, owner, team, flavor):
    for i in range(30):
        make_job(team, flavor, name=f"job-{i:02d}")
    client = client_for(owner)
    first = client.get(LIST).content.decode()
    assert ">job-29<" in first and ">job-05<" in first and ">job-04<" not in first
    assert "Older →" in first and "← Newer" not in first and " jobs)" not in first
    older = re.search(r'href="\?older=([0-9_]+)"', first).group(1)
    second = client.get(LIST, {"older": older}).content.decode()
    assert ">job-04<" in second and ">job-00<" in second and ">job-05<" not in second
    assert "Older →" not in second
    newer = re.search(r'href="\?newer=([0-9_]+)"', second).group(1)
    back = client.get(LIST, {"newer": newer}).content.decode()
    assert ">job-29<" in back and ">job-05<" in back and ">job-04<" not in back


def test_a_malformed_page_cursor_shows_the_newest_jobs(client_for, owner, running_job):
    for cursor in ("x", "1_", "_1", "123456789012345678_1", "1.5_2", "-1_-1", "1e5_2", "\u0661_1"):
        html = client_for(owner).get(LIST, {"older": cursor, "newer": cursor}).content.decode()
        assert ">running-job<" in html


def test_any_state_is_no_state_filter(client_for, owner, running_job):
    html = client_for(owner).get(LIST, {"state": "", "kind": "", "team": ""}, **htmx("job-table")).content.decode()
    assert ">running-job<" in html and "form-errors" not in html


def test_the_list_query_count_does_not_grow_with_the_jobs(client_for, owner, member, team, flavor, django_assert_num_queries):
    client = client_for(owner)
    for i in range(3):
        make_job(team, flavor, name=f"few-{i}", submitter=member)
    client.get(LIST)  # warm the session and the permission cache path
    # session, user, two for the permissions behind the nav, whether the nav offers Submit,
    # the page of jobs, and the filter form's teams and flavors (no count: the pages are
    # keyset, newer/older)
    with django_assert_num_queries(8):
        client.get(LIST, {"state": "draft"})
    for i in range(20):
        make_job(team, make_flavor(f"f{i}"), name=f"many-{i}", submitter=make_user(f"u{i}"))
    with django_assert_num_queries(8):
        client.get(LIST, {"state": "draft"})


# --- detail -------------------------------------------------------------------------------------
@pytest.mark.parametrize("who", ["owner", "member", "viewer", "quota_manager"])
def test_people_who_may_see_the_job_get_its_page(request, client_for, running_job, who):
    response = client_for(request.getfixturevalue(who)).get(detail(running_job))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Now running." in html  # the plain-language reason
    assert "kind: Job" in html and "running-job-" in html  # the rendered YAML
    assert html.count('class="state state-') >= 5  # state + the timeline's four events


def test_outsiders_get_404_for_another_teams_job(client_for, outsider, running_job):
    assert client_for(outsider).get(detail(running_job)).status_code == 404
    assert client_for(outsider).get(reverse("jobs:pods", args=[running_job.pk])).status_code == 404


def test_only_people_who_may_cancel_see_the_cancel_button_and_clone_link(client_for, member, viewer, running_job):
    member_html = client_for(member).get(detail(running_job)).content.decode()
    viewer_html = client_for(viewer).get(detail(running_job)).content.decode()
    assert "Cancel job" in member_html and "hx-confirm=" in member_html and "?clone=" in member_html
    assert "Cancel job" not in viewer_html and "?clone=" not in viewer_html


def test_a_live_job_polls_its_status_fragment(client_for, owner, running_job):
    response = client_for(owner).get(detail(running_job), **htmx("job-status"))
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="job-status"')
    assert 'hx-trigger="every 3s"' in html and "<html" not in html
    assert "HX-Trigger" not in response.headers


def test_polling_stops_once_the_job_is_final(client_for, owner, running_job):
    running_job.transition(State.SUCCEEDED, reason="Completed", message="All workers finished successfully.")
    response = client_for(owner).get(detail(running_job), **htmx("job-status"))
    html = response.content.decode()
    assert "hx-trigger" not in html and "no longer refreshes" in html
    # The other panels listen for this and stop polling at once, not at their next tick.
    assert response.headers["HX-Trigger"] == '{"job-ended": {}}'
    assert "All workers finished successfully." in html


def test_a_queued_job_shows_its_place_in_the_queue(client_for, owner, team, flavor, quota):
    first = make_job(team, flavor, name="first")
    first.submit()
    second = make_job(team, flavor, name="second")
    second.submit()
    assert "Next in line" in client_for(owner).get(detail(first)).content.decode()
    html = client_for(owner).get(detail(second)).content.decode()
    assert "1 job ahead in the team's h100 queue." in html


# --- pods and logs ------------------------------------------------------------------------------
def test_without_a_cluster_the_page_says_pods_and_logs_cannot_be_shown(client_for, owner, running_job, monkeypatch):
    from core import reconcile

    monkeypatch.setattr(reconcile, "cluster_configured", lambda: False)
    html = client_for(owner).get(reverse("jobs:pods", args=[running_job.pk])).content.decode()
    assert "No cluster is configured for this platform, so pods and logs cannot be shown." in html


def _pod(job, name, phase="Running"):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": job.team.namespace_name,
                     "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}},
        "spec": {"containers": [{"name": "main", "image": "x"}], "nodeName": "gpu-node-1"},
        "status": {"phase": phase, "containerStatuses": [{"name": "main", "restartCount": 1, "state": {"running": {}}}]},
    }


def test_the_pods_panel_lists_pods_with_phase_node_and_restarts_not_their_logs(client_for, owner, running_job, fake):
    fake.put(_pod(running_job, "running-job-1-0-abc"))
    fake.put(_pod(running_job, "running-job-1-1-def", phase="Pending"))
    fake.set_pod_logs(running_job.team.namespace_name, "running-job-1-0-abc", "epoch 1 loss 0.9\n", container="main")
    html = client_for(owner).get(reverse("jobs:pods", args=[running_job.pk])).content.decode()
    assert "running-job-1-0-abc" in html and "Running" in html and "running-job-1-1-def" in html and "Pending" in html
    assert "gpu-node-1" in html and "Show logs" in html
    assert "epoch 1 loss 0.9" not in html  # logs are the logs panel's, read for one pod at a time


def test_an_unreachable_cluster_is_said_plainly_without_the_transport_error(client_for, owner, running_job, fake):
    fake.fail_next("LIST", TransientError("dial tcp 127.0.0.1:10250: connect: connection refused"))
    html = client_for(owner).get(reverse("jobs:pods", args=[running_job.pk])).content.decode()
    assert "The cluster did not answer just now" in html
    assert "dial tcp" not in html and "connection refused" not in html


def test_a_job_without_pods_says_so(client_for, owner, running_job, fake):
    assert b"No pods for this job on the cluster yet." in client_for(owner).get(reverse("jobs:pods", args=[running_job.pk])).content


def test_the_pods_panel_polls_while_the_job_lives_and_stops_once_it_ends(client_for, owner, running_job, fake):
    pods = reverse("jobs:pods", args=[running_job.pk])
    assert 'hx-trigger="every 5s, job-ended from:body"' in client_for(owner).get(pods).content.decode()
    running_job.transition(State.SUCCEEDED, reason="Completed")
    html = client_for(owner).get(pods).content.decode()
    assert "hx-trigger" not in html and "no longer refreshes" in html


# --- cancel -------------------------------------------------------------------------------------
@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_cancel(request, client_for, running_job, who, no_reconcile):
    response = client_for(request.getfixturevalue(who)).post(reverse("jobs:cancel", args=[running_job.pk]))
    assert response.status_code == 302 and response.url == detail(running_job)
    running_job.refresh_from_db()
    assert running_job.state == State.CANCELLING


def test_cancelling_over_htmx_returns_the_status_fragment_with_a_message(client_for, member, running_job, no_reconcile):
    response = client_for(member).post(reverse("jobs:cancel", args=[running_job.pk]), **htmx("job-status"))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="job-status"')
    assert "Cancelling running-job" in html and 'hx-swap-oob="true"' in html
    assert "Cancel job" not in html  # a cancelling job cannot be cancelled again


@pytest.mark.parametrize("who", ["viewer", "quota_manager"])
def test_viewers_and_quota_managers_cannot_cancel(request, client_for, running_job, who):
    person = request.getfixturevalue(who)
    assert client_for(person).post(reverse("jobs:cancel", args=[running_job.pk])).status_code == 403
    running_job.refresh_from_db()
    assert running_job.state == State.RUNNING
    response = client_for(person).post(reverse("jobs:cancel", args=[running_job.pk]), **htmx("job-status"))
    assert response.status_code == 403 and b"You cannot cancel this job" in response.content
    running_job.refresh_from_db()
    assert running_job.state == State.RUNNING


def test_outsiders_get_404_when_cancelling_another_teams_job(client_for, outsider, running_job):
    assert client_for(outsider).post(reverse("jobs:cancel", args=[running_job.pk])).status_code == 404
    running_job.refresh_from_db()
    assert running_job.state == State.RUNNING


def test_cancelling_a_finished_job_says_it_already_ended(client_for, owner, running_job):
    running_job.transition(State.SUCCEEDED, reason="Completed")
    response = client_for(owner).post(reverse("jobs:cancel", args=[running_job.pk]), follow=True)
    assert b"running-job is already succeeded." in response.content


def test_cancel_is_a_post(client_for, owner, running_job):
    assert client_for(owner).get(reverse("jobs:cancel", args=[running_job.pk])).status_code == 405
