"""Why a job waits, on its page and in the job list: Kueue's own reason and message first,
verbatim and labelled as Kueue's, then what GPU Platform adds (its reading, its count of the
jobs ahead, its estimate), labelled as the platform's. Only the team sees either."""

import html

import pytest
from django.urls import reverse

from jobs.lifecycle import State

from ..builders import make_job
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db

MORE = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "4 more needed")
OURS = "Waiting for quota: team vision has too few free h100 GPUs for this job (8 needed, 4 more must free up)."


@pytest.fixture
def waiting(team, flavor, quota):
    job = make_job(team, flavor, name="waits", gpus_per_worker=8)
    job.submit()
    job.observe(State.QUEUED, reason="WaitingForQuota", message=OURS)
    job.hear_kueue("WaitingForQuota", MORE)
    return job


def status_of(client, job) -> str:
    return html.unescape(client.get(reverse("jobs:detail", args=[job.pk]), **htmx("job-status")).content.decode())


@pytest.mark.parametrize("who", ["owner", "member"])
def test_the_team_sees_kueues_words_first_then_the_platforms(client_for, request, waiting, who):
    page = status_of(client_for(request.getfixturevalue(who)), waiting)
    kueue = page.index("Kueue says</span>")
    assert page.index('<code class="kueue-reason">WaitingForQuota</code>') > kueue
    assert page.index(f'<q class="kueue-message">{MORE}</q>') > kueue
    ours = page.index("GPU Platform</span> " + OURS)
    assert kueue < ours < page.index("GPU Platform's estimate</span>")
    assert "GPU Platform's count of the jobs that can start" in page


def test_an_outsider_sees_neither(client_for, outsider, waiting):
    assert client_for(outsider).get(reverse("jobs:detail", args=[waiting.pk])).status_code == 404
    listing = client_for(outsider).get(reverse("jobs:list")).content.decode()
    assert "WaitingForQuota" not in listing and "waits" not in listing


def test_the_job_list_shows_kueues_reason_under_the_state(client_for, member, waiting):
    listing = html.unescape(client_for(member).get(reverse("jobs:list")).content.decode())
    assert "title=\"Kueue's own reason for not admitting it yet\">Kueue: WaitingForQuota</span>" in listing


def test_before_kueue_has_said_anything_only_the_platform_speaks(client_for, member, team, flavor, quota):
    job = make_job(team, flavor, name="fresh")
    job.submit()
    job.observe(State.QUEUED, reason="Queued", message="Waiting for the scheduler.")
    page = status_of(client_for(member), job)
    assert "Kueue says" not in page and "GPU Platform</span> Waiting for the scheduler." in page
