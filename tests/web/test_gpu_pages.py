"""GPU utilization on the pages (job page's GPU panel, the jobs list's column, the team page,
the console) and the API's job detail, against a real HTTP server standing in for Prometheus
(cluster/prometheus_standin.py); each page with Prometheus not configured, unreachable and slow
answers 200 with one line saying so; owner, member and outsider."""

import time

import pytest
from django.urls import reverse

from cluster.prometheus import prometheus_from_settings
from jobs.use import gpu_use
from tests.standin import gpus_of

from ..support.htmx import htmx

pytestmark = pytest.mark.django_db


def get(client, name, *args, **headers):
    return client.get(reverse(name, args=args), **headers)


# --- the job page -------------------------------------------------------------------------------
def test_the_job_page_loads_the_gpu_panel_after_the_page(client_for, member, running_job):
    page = get(client_for(member), "jobs:detail", running_job.pk).content.decode()
    assert f'hx-get="{reverse("jobs:gpus", args=[running_job.pk])}" hx-trigger="load"' in page


def test_the_gpu_panel_charts_utilization_and_memory_and_says_how_many_gpus_are_used(
        client_for, member, running_job, standin):
    gpus_of(standin, running_job, [90, 80, 1, 0], mem_mib=4096)
    response = get(client_for(member), "jobs:gpus", running_job.pk)
    page = response.content.decode()
    assert response.status_code == 200
    assert "Using 2 of 4 GPUs now" in page and "43 % mean utilization over 4 reporting" in page
    assert page.count('<polyline class="series-line') == 8  # 4 GPUs x (utilization, memory)
    assert "GPU utilization</strong> (%)" in page and "GPU memory used</strong> (GiB)" in page
    assert f"{running_job.name}-{running_job.pk}-0-x2b4k GPU 0 on gpu-node-0: 90 %" in page  # the legend
    assert "4.0 GiB" in page
    assert 'hx-trigger="every 15s, job-ended from:body"' in page  # live while the job runs
    assert standin.queries == 1


def test_the_gpu_panel_of_a_job_without_reporting_gpus_says_so(client_for, member, running_job, standin):
    page = get(client_for(member), "jobs:gpus", running_job.pk).content.decode()
    assert "No GPU of this job reports to Prometheus yet." in page


@pytest.mark.parametrize("person", ["owner", "member", "viewer"])
def test_the_team_sees_the_gpu_panel(client_for, running_job, standin, person, request):
    gpus_of(standin, running_job, [50])
    assert get(client_for(request.getfixturevalue(person)), "jobs:gpus", running_job.pk).status_code == 200


def test_an_outsider_cannot_see_the_gpu_panel(client_for, outsider, running_job, standin):
    gpus_of(standin, running_job, [50])
    assert get(client_for(outsider), "jobs:gpus", running_job.pk).status_code == 404
    assert standin.queries == 0


# --- the jobs list -------------------------------------------------------------------------------
def test_the_jobs_list_shows_the_utilization_of_running_jobs_in_one_query(client_for, member, running_job, team,
                                                                         flavor, standin):
    from tests.builders import make_job

    other = make_job(team, flavor, name="second", submitter=member, workers=1, gpus_per_worker=2)
    for state in ("submitted", "queued", "admitted", "running"):
        other.transition(state, reason=state)
    gpus_of(standin, running_job, [60, 80, 70, 70])
    gpus_of(standin, other, [10, 20])
    page = get(client_for(member), "jobs:list").content.decode()
    assert "<th scope=\"col\">GPU use</th>" in page
    assert '70 %<span class="muted small"> · 4 of 4</span>' in page
    assert '15 %<span class="muted small"> · 2 of 2</span>' in page
    assert standin.queries == 1


def test_an_outsider_sees_no_utilization_of_another_teams_job(client_for, outsider, running_job, standin):
    gpus_of(standin, running_job, [60])
    page = get(client_for(outsider), "jobs:list").content.decode()
    assert running_job.name not in page and "60 %" not in page
    assert standin.queries == 0


# --- the team page and the console ----------------------------------------------------------------
def test_the_team_page_shows_allocated_vs_used_and_its_idle_gpus_now(client_for, member, running_job, standin):
    gpus_of(standin, running_job, [0, 0, 0, 90])
    page = get(client_for(member), "console:team", running_job.team.slug).content.decode()
    assert "GPU use this month" in page and '<tr data-flavor="h100">' in page
    assert "Idle GPUs now: <strong>3</strong>" in page
    assert standin.queries == 1


def test_the_console_names_the_teams_holding_the_most_idle_gpus(client_for, quota_manager, running_job, outsider,
                                                              flavor, standin):
    from tenants.models import Team
    from tests.builders import make_job

    other = make_job(Team.objects.get(slug="other-team"), flavor, name="other", submitter=outsider,
                     workers=1, gpus_per_worker=1)
    gpus_of(standin, running_job, [0, 0, 0, 90])
    gpus_of(standin, other, [1])
    page = get(client_for(quota_manager), "console:capacity").content.decode()
    assert page.index("vision</a>: 3 idle GPUs") < page.index("other-team</a>: 1 idle GPU<")
    assert standin.queries == 1


def test_a_member_cannot_open_the_console(client_for, member, standin):
    assert get(client_for(member), "console:capacity").status_code == 403


# --- the API ------------------------------------------------------------------------------------
def test_the_api_gives_a_jobs_utilization_now_to_its_team_only(client_for, member, outsider, running_job, standin):
    gpus_of(standin, running_job, [100, 100, 0, 0], mem_mib=1024)
    body = client_for(member).get(f"/api/v1/jobs/{running_job.pk}").json()
    assert body["gpu_utilization"] == {"available": True, "message": "", "gpus_in_use": 4, "gpus_reporting": 4,
                                       "gpus_busy": 2, "mean_util_percent": 50.0, "mem_used_mib": 4096.0}
    assert client_for(outsider).get(f"/api/v1/jobs/{running_job.pk}").status_code == 404
    assert "gpu_utilization" not in client_for(member).get("/api/v1/jobs").json()["results"][0]


# --- Prometheus not configured, unreachable, slow ------------------------------------------------------
@pytest.fixture(params=["not configured", "unreachable", "slow"])
def no_metrics(request, settings):
    """Prometheus as the page finds it, and the reason the page must give."""
    prometheus_from_settings.cache_clear()
    gpu_use._with_timeout.cache_clear()
    if request.param == "not configured":
        settings.PROMETHEUS_URL = ""
        yield "GPU metrics unavailable: GPU metrics are not configured (PROMETHEUS_URL is not set)."
    elif request.param == "unreachable":
        settings.PROMETHEUS_URL = "http://127.0.0.1:9"
        yield "GPU metrics unavailable: Prometheus at http://127.0.0.1:9 cannot be reached."
    else:
        api = request.getfixturevalue("standin")
        settings.PROMETHEUS_TIMEOUT_SECONDS = 5  # pages wait a page's time, not this
        prometheus_from_settings.cache_clear()
        api.delay = 4
        yield f"GPU metrics unavailable: Prometheus at {api.url} did not answer within {gpu_use.PAGE_SECONDS:g} s."
    prometheus_from_settings.cache_clear()
    gpu_use._with_timeout.cache_clear()


PAGES = {
    "job page's GPU panel": ("member", "jobs:gpus", True),
    "jobs list": ("member", "jobs:list", False),
    "team page": ("member", "console:team", False),
    "console": ("quota_manager", "console:capacity", False),
}


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_in_time_with_one_line_when_prometheus_cannot_answer(
        page, no_metrics, client_for, running_job, request):
    person, name, by_job = PAGES[page]
    args = [running_job.pk] if by_job else ([running_job.team.slug] if name == "console:team" else [])
    client = client_for(request.getfixturevalue(person))
    started = time.monotonic()
    response = client.get(reverse(name, args=args))
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.content.decode().count(no_metrics) == 1
    assert elapsed < 2  # a bound, not a speed target: the page's wait on Prometheus is capped


def test_the_api_says_why_there_are_no_figures(no_metrics, client_for, member, running_job):
    body = client_for(member).get(f"/api/v1/jobs/{running_job.pk}").json()
    assert body["gpu_utilization"]["available"] is False
    assert body["gpu_utilization"]["message"] == no_metrics


def test_an_htmx_refresh_of_the_panel_answers_the_partial(client_for, member, running_job, standin):
    gpus_of(standin, running_job, [50])
    page = get(client_for(member), "jobs:gpus", running_job.pk, **htmx("job-gpus")).content.decode()
    assert page.startswith('<div id="job-gpus"')


# --- the GPU memory budget --------------------------------------------------------------------------
def test_the_job_page_shows_the_budget_and_what_one_gpu_is(client_for, member, running_job):
    running_job.gpu_memory_gib = 18
    running_job.save(update_fields=["gpu_memory_gib"])
    page = get(client_for(member), "jobs:detail", running_job.pk).content.decode()
    assert "GPU memory budget</dt><dd>18 GiB per GPU" in page
    assert running_job.flavor.unit_description in page


def test_a_running_job_above_its_budget_is_warned_on_its_gpu_panel(client_for, member, owner, running_job, standin):
    running_job.gpu_memory_gib = 3
    running_job.save(update_fields=["gpu_memory_gib"])
    gpus_of(standin, running_job, [90, 80, 1, 0], mem_mib=4096)
    for person in (member, owner):
        page = get(client_for(person), "jobs:gpus", running_job.pk).content.decode()
        assert "Over its GPU memory budget</strong> of 3 GiB per GPU" in page
        assert page.count(" uses 4.0 GiB") == 4
    running_job.gpu_memory_gib = 5  # within the budget: no warning
    running_job.save(update_fields=["gpu_memory_gib"])
    assert "Over its GPU memory budget" not in get(client_for(member), "jobs:gpus", running_job.pk).content.decode()


def test_a_shared_gpu_jobs_budget_is_not_compared_with_the_whole_gpus_memory(client_for, member, running_job, standin):
    flavor = running_job.flavor
    flavor.gpu_sharing, flavor.replicas_per_gpu = "time-slicing", 4
    flavor.save(update_fields=["gpu_sharing", "replicas_per_gpu"])
    running_job.gpu_memory_gib = 3
    running_job.save(update_fields=["gpu_memory_gib"])
    gpus_of(standin, running_job, [90], mem_mib=40960)  # what dcgm-exporter says of the whole GPU
    page = get(client_for(member), "jobs:gpus", running_job.pk).content.decode()
    assert "Over its GPU memory budget" not in page
    assert "cannot tell which pod uses a time-sliced or MPS GPU" in page and "does not enforce it" in page


def test_an_outsider_sees_no_budget_warning(client_for, outsider, running_job, standin):
    running_job.gpu_memory_gib = 3
    running_job.save(update_fields=["gpu_memory_gib"])
    gpus_of(standin, running_job, [90], mem_mib=4096)
    assert get(client_for(outsider), "jobs:gpus", running_job.pk).status_code == 404
