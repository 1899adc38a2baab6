"""Notebooks by API, form and gpuctl (docs/notebooks.md): owners and members submit, stop and
start them, outsiders see nothing; a bad setting (more than the team's own free GPUs, more than
one worker, a Volcano flavor) is answered on its field, and the form keeps what was typed."""

import pytest
from django.urls import reverse

from gpuctl.cli import EXIT
from gpuctl.jobfile import load
from jobs.lifecycle import State
from jobs.models import Job

from ..builders import make_flavor, make_job, make_quota
from ..support.api import JOB_BODY
from ..support.gpuctl import job_page

pytestmark = pytest.mark.django_db

NOTEBOOK = {**JOB_BODY, "name": "explore", "kind": "notebook", "image": "quay.io/jupyter/pytorch-notebook:latest",
            "command": [], "args": [], "env": {}, "workers": 1, "gpus_per_worker": 2}


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=4)


@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_submit_a_notebook_through_the_api(request, client_as, team, flavor, quota, who):
    response = client_as(request.getfixturevalue(who)).post("/api/v1/jobs", NOTEBOOK, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert (job.kind, job.port, job.total_gpus) == ("notebook", 8888, 2)


@pytest.mark.parametrize(("change", "field"), [
    ({"gpus_per_worker": 5}, "gpus_per_worker"),  # more than the team's own 4: never borrowed
    ({"workers": 2}, "workers"),
    ({"port": 70000}, "port"),
    ({"max_runtime_seconds": 10}, "max_runtime_seconds"),
])
def test_bad_notebook_settings_are_a_400_on_their_field(client_as, member, team, flavor, quota, change, field):
    response = client_as(member).post("/api/v1/jobs", {**NOTEBOOK, **change}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and field in body["fields"], body
    assert not Job.objects.exists()


def test_a_notebook_that_needs_gpus_the_team_is_using_is_refused_with_the_numbers(client_as, member, team, flavor,
                                                                                  quota):
    Job.objects.filter(pk=make_job(team, flavor, workers=1, gpus_per_worker=3).pk).update(state=State.RUNNING)
    response = client_as(member).post("/api/v1/jobs", NOTEBOOK, format="json")
    assert response.status_code == 400
    assert "1 of its 4 GPUs are free and this one needs 2" in response.json()["fields"]["gpus_per_worker"][0]


def test_a_notebook_on_a_volcano_flavor_is_refused_on_its_kind(client_as, member, team, quota):
    make_quota(team, make_flavor("a100", scheduler="volcano"))
    response = client_as(member).post("/api/v1/jobs", {**NOTEBOOK, "flavor": "a100"}, format="json")
    assert response.status_code == 400 and "Kueue flavors only" in response.json()["fields"]["kind"][0]


# --- stop and start -------------------------------------------------------------------------------
@pytest.fixture
def running(team, flavor, quota):
    job = make_job(team, flavor, kind="notebook", image="quay.io/jupyter/base-notebook:latest", command=[], args=[],
                   gpus_per_worker=2)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    job.refresh_from_db()
    return job


@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_stop_and_start_a_notebook(request, client_as, running, who, scheduled_reconciles):
    client = client_as(request.getfixturevalue(who))
    response = client.post(f"/api/v1/jobs/{running.pk}/stop")
    assert response.status_code == 202 and response.json()["state"] == "stopped"
    assert client.post(f"/api/v1/jobs/{running.pk}/stop").status_code == 409  # already stopped
    response = client.post(f"/api/v1/jobs/{running.pk}/start")
    assert response.status_code == 202 and response.json()["state"] == "submitted"
    assert scheduled_reconciles == [running.pk, running.pk]


def test_outsiders_cannot_stop_or_start_a_teams_notebook(client_as, outsider, viewer, running):
    for verb in ("stop", "start"):
        assert client_as(outsider).post(f"/api/v1/jobs/{running.pk}/{verb}").status_code == 404
    assert client_as(viewer).post(f"/api/v1/jobs/{running.pk}/stop").status_code == 403
    running.refresh_from_db()
    assert running.state == State.RUNNING


def test_a_notebook_starts_again_only_if_it_fits_the_teams_own_quota(client_as, member, team, flavor, running):
    client = client_as(member)
    assert client.post(f"/api/v1/jobs/{running.pk}/stop").status_code == 202
    Job.objects.filter(pk=make_job(team, flavor, workers=1, gpus_per_worker=3).pk).update(state=State.ADMITTED)
    response = client.post(f"/api/v1/jobs/{running.pk}/start")
    assert response.status_code == 400 and "gpus_per_worker" in response.json()["fields"]
    running.refresh_from_db()
    assert running.state == State.STOPPED


def test_a_training_job_cannot_be_stopped_or_started(client_as, member, team, flavor, quota):
    job = make_job(team, flavor)
    for verb in ("stop", "start"):
        assert client_as(member).post(f"/api/v1/jobs/{job.pk}/{verb}").status_code == 409


# --- the form and the job page ----------------------------------------------------------------------
def notebook_form(team, flavor, **overrides):
    data = dict(team=team.pk, kind="notebook", name="explore", flavor=flavor.pk, priority="",
                image="quay.io/jupyter/pytorch-notebook:latest", command="", args="", env="", gpus_per_worker=1,
                cpu_per_worker=4, memory_per_worker_gib=32, port="")
    data.update(overrides)
    return data


def test_the_notebook_tab_says_it_is_never_preempted_and_submits(client, member, team, flavor, quota):
    client.force_login(member)
    page = client.get(reverse("jobs:submit"), {"kind": "notebook"}).content.decode()
    assert "never preempted" in page and "never on borrowed GPUs" in page and 'aria-current="page">Notebook' in page
    response = client.post(reverse("jobs:submit"), notebook_form(team, flavor))
    assert response.status_code == 302 and Job.objects.get().port == 8888


def test_the_form_answers_a_notebook_over_the_teams_quota_on_its_field_and_keeps_what_was_typed(client, member, team,
                                                                                               flavor, quota):
    client.force_login(member)
    response = client.post(reverse("jobs:submit"), notebook_form(team, flavor, gpus_per_worker=6, name="keepme"))
    assert response.status_code == 400
    assert "never on borrowed GPUs" in response.context["form"].errors["gpus_per_worker"][0]
    assert b"keepme" in response.content and not Job.objects.exists()


def test_the_job_page_has_the_port_forward_line_and_stop_then_start(client, member, outsider, running):
    client.force_login(member)
    page = client.get(reverse("jobs:detail", args=[running.pk])).content.decode()
    assert "port-forward service/" in page and "8888:8888" in page and "Stop notebook" in page
    client.post(reverse("jobs:stop", args=[running.pk]))
    running.refresh_from_db()
    assert running.state == State.STOPPED
    assert "Start notebook" in client.get(reverse("jobs:detail", args=[running.pk])).content.decode()
    client.post(reverse("jobs:start", args=[running.pk]))
    running.refresh_from_db()
    assert running.state == State.SUBMITTED
    client.force_login(outsider)
    assert client.post(reverse("jobs:stop", args=[running.pk])).status_code == 404


# --- gpuctl -------------------------------------------------------------------------------------------
def test_a_job_file_takes_a_notebook():
    body = load("team: vision\nname: explore\nkind: notebook\nflavor: h100\nimage: quay.io/jupyter/base-notebook\n"
                "gpus_per_worker: 1\nport: 8888\nvolumes: {home: /home/user}\n")
    assert (body["kind"], body["port"], body["volumes"]) == ("notebook", 8888, {"home": "/home/user"})


@pytest.fixture
def gpuctl_quota(quota):
    """The notebook's own quota for conftest's ``gpuctl``."""
    return quota


def test_gpuctl_submits_stops_and_starts_a_notebook(gpuctl, tmp_path):
    path = tmp_path / "nb.yaml"
    path.write_text("team: vision\nname: explore\nkind: notebook\nflavor: h100\n"
                    "image: quay.io/jupyter/base-notebook:latest\ngpus_per_worker: 2\n")
    code, out, _ = gpuctl("submit", "-f", str(path))
    job = Job.objects.get()
    assert code == EXIT["ok"] and job.kind == "notebook", out
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    code, out, _ = gpuctl("stop", str(job.pk))
    assert code == EXIT["ok"] and out.split() == ["job", str(job.pk), "stopped", job_page(job)]
    code, out, _ = gpuctl("start", str(job.pk))
    assert code == EXIT["ok"] and out.split() == ["job", str(job.pk), "submitted", job_page(job)]


def test_gpuctl_prints_a_notebook_over_the_teams_quota_on_its_field(gpuctl, tmp_path):
    path = tmp_path / "nb.yaml"
    path.write_text("team: vision\nname: explore\nkind: notebook\nflavor: h100\n"
                    "image: quay.io/jupyter/base-notebook:latest\ngpus_per_worker: 6\nworkers: 2\n")
    code, _, err = gpuctl("submit", "-f", str(path))
    assert code == EXIT["invalid"]
    assert "gpus_per_worker" in err and "never on borrowed GPUs" in err and "workers" in err
    assert not Job.objects.exists()
