"""Submitting Ray jobs and clusters by API, form and gpuctl job file (docs/ray.md): owners and
members may, outsiders may not; a bad setting is answered on its field, and the form keeps
what was typed."""

import pytest
from django.urls import reverse

from gpuctl.jobfile import JobFileError, load
from jobs.models import Job

from ..builders import make_flavor, make_quota
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db

RAY_JOB = {**JOB_BODY, "kind": "ray-job", "command": [], "args": [], "workers": 2, "gpus_per_worker": 2,
           "ray_entrypoint": "python tune.py --trials 8", "ray_runtime_env": "pip: [torch]\n"}
RAY_CLUSTER = {**JOB_BODY, "kind": "ray-cluster", "command": [], "args": [], "workers": 3, "gpus_per_worker": 1}


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


@pytest.mark.parametrize("who", ["owner", "member"])
@pytest.mark.parametrize("body", [RAY_JOB, RAY_CLUSTER], ids=["ray-job", "ray-cluster"])
def test_owners_and_members_submit_ray_work_through_the_api(request, client_as, team, flavor, quota, who, body):
    response = client_as(request.getfixturevalue(who)).post("/api/v1/jobs", body, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.kind == body["kind"] and response.json()["total_gpus"] == body["workers"] * body["gpus_per_worker"]
    assert response.json().get("ray_entrypoint", "") == body.get("ray_entrypoint", "")


def test_outsiders_and_viewers_cannot_submit_ray_work_for_a_team(client_as, outsider, viewer, team, flavor, quota):
    for person in (outsider, viewer):
        response = client_as(person).post("/api/v1/jobs", RAY_JOB, format="json")
        assert response.status_code in (400, 403), response.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize(("change", "field"), [
    ({"ray_entrypoint": ""}, "ray_entrypoint"),
    ({"ray_runtime_env": "pip: [torch"}, "ray_runtime_env"),
    ({"ray_runtime_env": "- torch"}, "ray_runtime_env"),
    ({"gpus_per_worker": 9}, "gpus_per_worker"),
    ({"kind": "ray-service"}, "kind"),
])
def test_bad_ray_settings_are_a_400_on_their_field(client_as, member, team, flavor, quota, change, field):
    response = client_as(member).post("/api/v1/jobs", {**RAY_JOB, **change}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and field in body["fields"], body
    assert not Job.objects.exists()


def test_a_ray_cluster_on_a_volcano_flavor_is_refused_on_its_kind(client_as, member, team, quota):
    volcano = make_flavor("a100", scheduler="volcano")
    make_quota(team, volcano)
    response = client_as(member).post("/api/v1/jobs", {**RAY_CLUSTER, "flavor": "a100"}, format="json")
    assert response.status_code == 400 and "Kueue flavors only" in response.json()["fields"]["kind"][0]


def test_outsiders_do_not_see_a_teams_ray_jobs(client_as, member, outsider, team, flavor, quota):
    assert client_as(member).post("/api/v1/jobs", RAY_JOB, format="json").status_code == 201
    job = Job.objects.get()
    assert client_as(outsider).get(f"/api/v1/jobs/{job.pk}").status_code == 404
    assert client_as(outsider).get("/api/v1/jobs").json()["results"] == []


# --- the form -------------------------------------------------------------------------------------
def ray_form(team, flavor, **overrides):
    data = dict(team=team.pk, kind="ray-job", name="tune", flavor=flavor.pk, priority="", image="rayproject/ray:2.52.0",
                env="", workers=2, gpus_per_worker=2, cpu_per_worker=8, memory_per_worker_gib=32,
                ray_entrypoint="python tune.py", ray_runtime_env="pip: [torch]")
    data.update(overrides)
    return data


@pytest.mark.parametrize("who", ["owner", "member"])
def test_the_ray_tab_submits_a_ray_job(request, client, team, flavor, quota, who):
    client.force_login(request.getfixturevalue(who))
    page = client.get(reverse("jobs:submit"), {"kind": "ray-job"})
    assert b"Entrypoint" in page.content and b'aria-current="page">Ray job' in page.content
    response = client.post(reverse("jobs:submit"), ray_form(team, flavor))
    job = Job.objects.get()
    assert response.status_code == 302 and (job.kind, job.ray_entrypoint, job.workers) == ("ray-job", "python tune.py", 2)


def test_the_form_answers_bad_ray_settings_on_their_field_and_keeps_what_was_typed(client, member, team, flavor, quota):
    client.force_login(member)
    response = client.post(reverse("jobs:submit"), ray_form(team, flavor, ray_entrypoint="", ray_runtime_env="[oops"))
    assert response.status_code == 400
    form = response.context["form"]
    assert set(form.errors) >= {"ray_entrypoint", "ray_runtime_env"}
    assert b"[oops" in response.content and not Job.objects.exists()


def test_outsiders_cannot_submit_ray_work_from_the_form(client, outsider, team, flavor, quota):
    client.force_login(outsider)
    response = client.post(reverse("jobs:submit"), ray_form(team, flavor))
    assert response.status_code == 400 and not Job.objects.exists()


def test_the_preview_shows_the_rayjob_and_its_verdict(client, member, team, flavor, quota):
    client.force_login(member)
    response = client.post(reverse("jobs:preview"), ray_form(team, flavor))
    assert b"kind: RayJob" in response.content and b"head + 2 x 2 GPUs (4)" in response.content


# --- gpuctl job files -----------------------------------------------------------------------------
def test_a_job_file_gives_the_runtime_env_as_a_mapping():
    body = load("team: vision\nname: tune\nkind: ray-job\nflavor: h100\nimage: rayproject/ray:2.52.0\n"
                "ray_entrypoint: python tune.py\nray_runtime_env:\n  pip: [torch]\n  env_vars: {A: b}\n")
    assert body["ray_runtime_env"] == "pip:\n- torch\nenv_vars:\n  A: b\n"


def test_a_job_file_with_an_unknown_ray_field_is_refused_before_sending():
    with pytest.raises(JobFileError, match="unknown field"):
        load("team: vision\nkind: ray-job\nray_workers: 3\n")
