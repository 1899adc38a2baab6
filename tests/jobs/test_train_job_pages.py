"""TrainJobs through the web and the API: the training runtimes a person's teams may use, listed
by the API and offered as the form's presets (owner, member, outsider, quota manager); a runtime
the team may not use is a field error in the form (what was typed kept) and a 400 in the API's
shape; the job page and the API show what the trainer published of its progress."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from jobs.models import Job
from quotas.models import TrainingRuntime
from workloads.kinds import train_job

from ..builders import make_job, make_quota, make_team
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db
TRAIN_BODY = {**JOB_BODY, "name": "ddp", "kind": "train-job", "training_runtime": train_job.TORCH_RUNTIME,
              "command": ["torchrun"], "args": ["train.py"]}


@pytest.fixture
def runtimes(team, outsider):
    """torch-distributed for everyone (seeded), deepspeed for the outsider's team only, jax off."""
    TrainingRuntime.objects.create(name="deepspeed", label="DeepSpeed", limited_to_teams=True, image="ghcr.io/x/ds:1",
                                   command=["deepspeed"], nodes=4, gpus_per_node=2).teams.add(
        outsider.memberships.get().team)
    TrainingRuntime.objects.create(name="jax", label="JAX", enabled=False)


def names(client) -> list[str]:
    response = client.get("/api/v1/training-runtimes")
    assert response.status_code == 200
    return sorted(row["name"] for row in response.json()["results"])


def test_each_person_lists_the_runtimes_their_teams_may_use(client_as, owner, member, outsider, quota_manager,
                                                             runtimes):
    assert names(client_as(owner)) == names(client_as(member)) == [train_job.TORCH_RUNTIME]
    assert names(client_as(outsider)) == ["deepspeed", train_job.TORCH_RUNTIME]
    assert names(client_as(quota_manager)) == ["deepspeed", "jax", train_job.TORCH_RUNTIME]
    assert client_as().get("/api/v1/training-runtimes").status_code in (401, 403)


def test_a_runtime_is_read_by_name_with_its_preset_and_hidden_from_other_teams(client_as, member, outsider, runtimes):
    found = client_as(outsider).get("/api/v1/training-runtimes/deepspeed").json()
    assert found["preset"] == {"kind": "train-job", "training_runtime": "deepspeed", "workers": 4, "gpus_per_worker": 2,
                               "image": "ghcr.io/x/ds:1", "command": ["deepspeed"], "args": [], "env": {}}
    assert client_as(member).get("/api/v1/training-runtimes/deepspeed").status_code == 404


def test_the_api_takes_a_train_job_and_refuses_a_runtime_of_another_team_in_its_400_shape(client_as, member, team,
                                                                                          flavor, runtimes):
    make_quota(team, flavor, nominal_gpus=16)
    client = client_as(member)
    created = client.post("/api/v1/jobs", TRAIN_BODY, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["training_runtime"] == train_job.TORCH_RUNTIME
    assert created.json()["trainer_progress_percent"] is None
    refused = client.post("/api/v1/jobs", {**TRAIN_BODY, "name": "ds", "training_runtime": "deepspeed"}, format="json")
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "invalid" and list(body["fields"]) == ["training_runtime"]
    assert "'deepspeed' is not one your team may use" in body["fields"]["training_runtime"][0]


def test_the_form_offers_the_runtimes_of_the_persons_teams_as_presets(client_for, member, outsider, team, runtimes):
    page = client_for(member).get(reverse("jobs:submit")).content.decode()
    assert "?preset=runtime-torch-distributed" in page and "runtime-deepspeed" not in page
    other = client_for(outsider).get(reverse("jobs:submit") + "?preset=runtime-deepspeed").content.decode()
    assert 'value="ghcr.io/x/ds:1"' in other and 'value="deepspeed"' in other


def test_the_form_keeps_what_was_typed_when_the_runtime_is_refused(client_for, member, team, flavor, runtimes):
    make_quota(team, flavor, nominal_gpus=16)
    data = {"team": team.pk, "name": "ddp", "kind": "train-job", "flavor": flavor.pk, "image": "ghcr.io/example/t:2",
            "command": "torchrun", "args": "train.py --epochs 7", "env": "A=b", "workers": 2, "gpus_per_worker": 4,
            "cpu_per_worker": 8, "memory_per_worker_gib": 64, "training_runtime": "deepspeed",
            "readiness_initial_delay_seconds": 30}
    response = client_for(member).post(reverse("jobs:submit"), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert "is not one your team may use" in page
    assert 'value="deepspeed"' in page and "train.py --epochs 7" in page and 'value="ghcr.io/example/t:2"' in page
    assert not Job.objects.filter(name="ddp").exists()


def test_the_job_page_and_the_api_show_the_trainers_progress_to_the_team_only(client_for, client_as, member, outsider,
                                                                            team, flavor):
    make_quota(team, flavor, nominal_gpus=16)
    job = make_job(team, flavor, kind=Job.Kind.TRAIN_JOB, training_runtime=train_job.TORCH_RUNTIME, workers=2,
                   gpus_per_worker=4)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, trainer_progress_percent=42,
                                         trainer_remaining_seconds=1800,
                                         trainer_status_at=datetime(2026, 12, 1, 10, tzinfo=UTC))
    page = client_for(member).get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert 'value="42"' in page and "42%" in page and "about 30 min 00 s left" in page
    body = client_as(member).get(f"/api/v1/jobs/{job.pk}").json()
    assert (body["trainer_progress_percent"], body["trainer_remaining_seconds"], body["trainer_status_at"]) == (
        42, 1800, "2026-12-01T10:00:00Z")
    assert client_for(outsider).get(reverse("jobs:detail", args=[job.pk])).status_code == 404
    assert client_as(outsider).get(f"/api/v1/jobs/{job.pk}").status_code == 404


def test_a_team_of_its_own_runtime_only_sees_it_offered(client_for, outsider, runtimes):
    assert make_team("third")  # a team nobody here belongs to changes nothing
    page = client_for(outsider).get(reverse("jobs:submit")).content.decode()
    assert "runtime-deepspeed" in page


def test_a_runtime_missing_from_the_cluster_is_refused_in_the_form_and_the_api_and_said_everywhere(
        client_for, client_as, member, team, flavor, runtimes):
    make_quota(team, flavor, nominal_gpus=16)
    client = client_as(member)
    [row] = client.get("/api/v1/training-runtimes").json()["results"]
    assert row["installed"] is None and row["checked_at"] is None  # never checked: refuses nothing
    TrainingRuntime.objects.filter(name=train_job.TORCH_RUNTIME).update(installed=False)
    assert client.get(f"/api/v1/training-runtimes/{train_job.TORCH_RUNTIME}").json()["installed"] is False
    missing = "torch-distributed is not installed on the cluster: ask the platform administrators."
    refused = client.post("/api/v1/jobs", TRAIN_BODY, format="json")
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "invalid" and body["fields"] == {"training_runtime": [missing]}
    data = {"team": team.pk, "name": "ddp", "kind": "train-job", "flavor": flavor.pk, "image": "ghcr.io/example/t:2",
            "command": "torchrun", "args": "train.py --epochs 7", "env": "A=b", "workers": 2, "gpus_per_worker": 4,
            "cpu_per_worker": 8, "memory_per_worker_gib": 64, "training_runtime": train_job.TORCH_RUNTIME,
            "readiness_initial_delay_seconds": 30}
    response = client_for(member).post(reverse("jobs:submit"), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert "is not installed on the cluster: ask the platform administrators" in page
    assert "train.py --epochs 7" in page and 'value="ghcr.io/example/t:2"' in page
    assert not Job.objects.filter(name="ddp").exists()
    assert "TrainJob on torch-distributed (not installed on the cluster)" in client_for(member).get(
        reverse("jobs:submit")).content.decode()
