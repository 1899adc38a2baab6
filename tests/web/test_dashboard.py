"""The dashboard: a person's teams with usage per flavor, and recent jobs with live state."""

import pytest
from django.urls import reverse

from jobs.lifecycle import State

from ..builders import make_job
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_team_people_see_their_team_usage_and_jobs(request, client_for, running_job, who):
    response = client_for(request.getfixturevalue(who)).get(reverse("dashboard"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Vision" in html and "team-vision" in html
    assert "4 in use / 8 quota" in html
    assert "1 running · 0 queued · 4 free" in html
    assert "running-job" in html


def test_outsiders_see_their_own_team_but_nothing_of_others(client_for, outsider, running_job):
    html = client_for(outsider).get(reverse("dashboard")).content.decode()
    assert "Other-Team" in html
    assert "team-vision" not in html and "running-job" not in html


def test_recent_jobs_poll_while_a_job_is_live(client_for, owner, running_job):
    html = client_for(owner).get(reverse("dashboard"), **htmx("recent-jobs")).content.decode()
    assert html.lstrip().startswith('<div id="recent-jobs"')
    assert 'hx-trigger="every 5s"' in html


def test_recent_jobs_stop_polling_when_every_job_is_final(client_for, owner, team, flavor):
    job = make_job(team, flavor)
    job.transition(State.CANCELLED, reason="Cancelled")
    html = client_for(owner).get(reverse("dashboard"), **htmx("recent-jobs")).content.decode()
    assert "hx-trigger" not in html
