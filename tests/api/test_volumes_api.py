"""Team volumes through the API (/api/v1/volumes), the team page and the job's ``volumes``
(API, submit form, gpuctl job file): owners create and delete, members and viewers read and
mount, outsiders see nothing; bad input answered field by field; a mounted volume kept (409)."""

import pytest
from django.urls import reverse

from gpuctl.jobfile import JobFileError, load
from jobs.models import Job, Volume
from quotas.models import StorageQuota

from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db

PAGE = "/teams/vision/"
CREATE = "/teams/vision/volumes/"
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "volumes"}


@pytest.fixture(autouse=True)
def reconciled(monkeypatch):
    """The teams whose volumes a change asked to reconcile (no broker)."""
    teams = []
    monkeypatch.setattr("jobs.actions.enqueue", lambda task, *args: teams.append((task.name.rsplit(".", 1)[-1], *args)))
    return teams


@pytest.fixture
def storage(team):
    return StorageQuota.objects.create(team=team, storage_class="standard", storage_gib=100, volumes=3)


def body(**fields):
    return {"team": "vision", "name": "model-cache", "storage_class": "standard", "size_gib": 50, **fields}


def made(team, owner, name="model-cache", size_gib=50):
    return Volume.objects.add(team=team, user=owner, name=name, storage_class="standard", size_gib=size_gib)


# --- API ----------------------------------------------------------------------------------------
def test_an_owner_creates_lists_and_deletes_a_volume(client_as, owner, team, storage, reconciled):
    api = client_as(owner)
    created = api.post("/api/v1/volumes", body(), format="json")
    assert created.status_code == 201, created.json()
    assert {k: created.json()[k] for k in ("team", "name", "storage_class", "size_gib", "created_by", "mounted_by")} \
        == {"team": "vision", "name": "model-cache", "storage_class": "standard", "size_gib": 50,
            "created_by": owner.username, "mounted_by": []}
    assert [v["name"] for v in api.get("/api/v1/volumes").json()["results"]] == ["model-cache"]
    assert api.delete(f"/api/v1/volumes/{created.json()['id']}").status_code == 204
    assert not Volume.objects.exists()
    assert reconciled == [("reconcile_team_volumes", team.pk)] * 2


@pytest.mark.parametrize(("fields", "field", "said"), [
    ({"size_gib": 101}, "size_gib", "101 GiB does not fit: the team's volumes of standard claim 0 of its 100 GiB."),
    ({"size_gib": 0}, "size_gib", "Ensure this value is greater than or equal to 1."),
    ({"storage_class": "fast"}, "storage_class", "Team vision has no storage quota on fast. Its classes: standard."),
    ({"name": "Model_Cache"}, "name", "Use at most 63 lowercase letters"),
])
def test_bad_volumes_are_refused_field_by_field(client_as, owner, team, storage, fields, field, said):
    refused = client_as(owner).post("/api/v1/volumes", body(**fields), format="json")
    assert refused.status_code == 400
    assert said in refused.json()["fields"][field][0]
    assert not Volume.objects.exists()


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_read_volumes_but_cannot_create_or_delete(request, client_as, owner, team, storage, who):
    volume = made(team, owner)
    api = client_as(request.getfixturevalue(who))
    assert [v["id"] for v in api.get("/api/v1/volumes").json()["results"]] == [volume.pk]
    refused = api.post("/api/v1/volumes", body(name="mine"), format="json")
    assert refused.status_code == 400 and refused.json()["fields"]["team"] == ["Only owners of vision create its volumes."]
    assert api.delete(f"/api/v1/volumes/{volume.pk}").status_code == 403
    assert list(Volume.objects.values_list("name", flat=True)) == ["model-cache"]


def test_outsiders_neither_see_nor_touch_a_teams_volumes(client_as, owner, outsider, team, storage):
    volume = made(team, owner)
    api = client_as(outsider)
    assert api.get("/api/v1/volumes").json()["results"] == []
    assert api.get(f"/api/v1/volumes/{volume.pk}").status_code == 404
    assert api.delete(f"/api/v1/volumes/{volume.pk}").status_code == 404
    assert api.post("/api/v1/volumes", body(name="intruder"), format="json").status_code == 400
    assert list(Volume.objects.values_list("name", flat=True)) == ["model-cache"]


def test_a_volume_a_live_job_mounts_is_not_deleted(client_as, owner, member, team, flavor, storage):
    volume = made(team, owner)
    api = client_as(member)
    job = api.post("/api/v1/jobs", {**JOB_BODY, "workers": 1, "volumes": {"model-cache": "/models"}}, format="json")
    assert job.status_code == 201, job.json()
    assert job.json()["volumes"] == {"model-cache": "/models"}
    assert client_as(owner).get(f"/api/v1/volumes/{volume.pk}").json()["mounted_by"] == ["train"]
    page = client_as(member).get(f"/jobs/{job.json()['id']}/").content.decode()
    assert "<code>model-cache</code> at <code>/models</code>" in page
    refused = client_as(owner).delete(f"/api/v1/volumes/{volume.pk}")
    assert refused.status_code == 409
    assert refused.json()["code"] == "conflict" and "mounted by train" in refused.json()["message"]
    assert Volume.objects.filter(pk=volume.pk).exists()


@pytest.mark.parametrize(("volumes", "said"), [
    ({"nope": "/data"}, "The team has no volume named nope"),
    ({"model-cache": "relative"}, "absolute path"),
    ({"model-cache": "/proc/x"}, "system path"),
])
def test_a_job_mounting_what_it_cannot_is_refused_on_its_volumes_field(client_as, owner, member, team, flavor,
                                                                      storage, volumes, said):
    made(team, owner)
    refused = client_as(member).post("/api/v1/jobs", {**JOB_BODY, "workers": 1, "volumes": volumes}, format="json")
    assert refused.status_code == 400
    assert said in refused.json()["fields"]["volumes"][0]
    assert not Job.objects.exists()


# --- gpuctl job file ----------------------------------------------------------------------------
def test_a_job_file_takes_volumes_and_refuses_a_list():
    text = "team: vision\nname: x\nimage: a/b:1\nvolumes:\n  model-cache: /models\n"
    assert load(text)["volumes"] == {"model-cache": "/models"}
    with pytest.raises(JobFileError, match="volumes must be a mapping"):
        load(text.replace("  model-cache: /models", "  - model-cache"))


# --- the team page ------------------------------------------------------------------------------
def test_an_owner_creates_a_volume_on_the_team_page(client_for, owner, team, storage):
    response = client_for(owner).post(CREATE, {"name": "datasets", "storage_class": "standard", "size_gib": 20},
                                      **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="volumes"')
    assert "Created volume datasets (20 GiB of standard)." in html
    assert "20 of 100 GiB in 1 of 3 volumes" in html


def test_a_volume_too_big_keeps_what_was_typed_with_the_error_on_its_field(client_for, owner, team, storage):
    response = client_for(owner).post(CREATE, {"name": "huge", "storage_class": "standard", "size_gib": 500}, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert "500 GiB does not fit" in html and 'value="huge"' in html and 'value="500"' in html
    assert not Volume.objects.exists()


@pytest.mark.parametrize(("who", "status"), [("member", 403), ("viewer", 403), ("outsider", 404)])
def test_only_owners_create_or_delete_on_the_page(request, client_for, owner, team, storage, who, status):
    volume = made(team, owner)
    client = client_for(request.getfixturevalue(who))
    assert client.post(CREATE, {"name": "x", "storage_class": "standard", "size_gib": 1}).status_code == status
    assert client.post(f"/teams/vision/volumes/{volume.pk}/delete/").status_code == status
    assert list(Volume.objects.values_list("name", flat=True)) == ["model-cache"]


def test_members_see_the_volumes_and_who_mounts_them_without_the_form(client_for, owner, member, team, flavor,
                                                                      storage):
    made(team, owner)
    Job.objects.submit(team=team, submitter=member, flavor=flavor, name="server", image="ghcr.io/x/y:1",
                       volumes={"model-cache": "/models"})
    html = client_for(member).get(PAGE).content.decode()
    assert "model-cache" in html and "server" in html and "50 of 100 GiB" in html
    assert "New volume" not in html
    assert "New volume" in client_for(owner).get(PAGE).content.decode()


def test_deleting_a_mounted_volume_on_the_page_says_which_jobs(client_for, owner, member, team, flavor, storage):
    volume = made(team, owner)
    Job.objects.submit(team=team, submitter=member, flavor=flavor, name="server", image="ghcr.io/x/y:1",
                       volumes={"model-cache": "/models"})
    response = client_for(owner).post(f"/teams/vision/volumes/{volume.pk}/delete/", **HTMX)
    assert response.status_code == 409
    assert "mounted by server" in response.content.decode()
    assert Volume.objects.filter(pk=volume.pk).exists()


def test_the_submit_form_takes_volumes_one_per_line(client_for, owner, member, team, flavor, storage):
    made(team, owner)
    data = dict(team=team.pk, kind="training", name="reader", flavor=flavor.pk, priority="", image="a/b:1",
                command="python", args="train.py", env="", volumes="model-cache=/models", workers=1,
                gpus_per_worker=1, cpu_per_worker=8, memory_per_worker_gib=64)
    response = client_for(member).post(reverse("jobs:submit"), data)
    assert response.status_code == 302, response.context["form"].errors
    assert Job.objects.get().volumes == {"model-cache": "/models"}
    bad = client_for(member).post(reverse("jobs:submit"), {**data, "name": "other", "volumes": "nope=/x"})
    assert bad.status_code == 400
    assert "no volume named nope" in bad.context["form"].errors["volumes"][0]
    assert "nope=/x" in bad.content.decode()
