"""A client generated from /api/schema/ with openapi-python-client works, as a new user would
try it: the API accepts and advertises JSON bodies only (a client that chose multipart could
not send `env`), and the generated code submits, replays, lists, reads, follows the events
of and cancels a job against a live server, and parses a 400 as the API's error shape."""

import importlib
import json
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from jobs.models import Job, Volume

from ..builders import make_job
from ..support.api import JOB_BODY, issue_token

pytestmark = pytest.mark.django_db(transaction=True)

GENERATOR = Path(sys.executable).parent / "openapi-python-client"


def fetch_schema(url: str, secret: str) -> dict:
    request = urllib.request.Request(f"{url}/api/schema/?format=json",
                                     headers={"Authorization": f"Bearer {secret}", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def request_media_types(schema: dict) -> set[str]:
    return {media for path in schema["paths"].values() for operation in path.values()
            if isinstance(operation, dict) for media in (operation.get("requestBody") or {}).get("content", {})}


@pytest.fixture
def generated(live_server, member, team, flavor, tmp_path):
    """The generated package, imported under a name of its own, and a token for it."""
    if not GENERATOR.exists():
        pytest.skip("openapi-python-client is not installed (scripts/venv.sh dev installs it)")
    secret = issue_token(member)
    schema = fetch_schema(live_server.url, secret)
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "config.yaml").write_text("post_hooks: []\n")  # no formatter needed to import it
    package = f"generated_client_{uuid.uuid4().hex[:8]}"
    result = subprocess.run(
        [str(GENERATOR), "generate", "--path", str(tmp_path / "schema.json"), "--meta", "none",
         "--output-path", str(tmp_path / package), "--config", str(tmp_path / "config.yaml")],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield schema, importlib.import_module(package), secret
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
            del sys.modules[name]
        shutil.rmtree(tmp_path / package, ignore_errors=True)


def test_the_schema_offers_json_request_bodies_only(generated):
    schema, _, _ = generated
    assert request_media_types(schema) == {"application/json"}


def test_a_form_or_multipart_body_is_refused_with_415(client_as, member, team, flavor):
    for form in ("multipart", None):
        client = client_as(member)
        if form is None:
            response = client.post("/api/v1/jobs", "team=vision&name=train",
                                   content_type="application/x-www-form-urlencoded")
        else:
            response = client.post("/api/v1/jobs", {"team": "vision", "name": "train"}, format=form)
        assert response.status_code == 415
        assert response.json()["code"] == "unsupported_media_type"
    assert not Job.objects.exists()


def test_the_generated_client_submits_lists_follows_and_cancels_a_job(generated, live_server):
    _, gen, secret = generated
    create = importlib.import_module(f"{gen.__name__}.api.v1.v1_jobs_create")
    listing = importlib.import_module(f"{gen.__name__}.api.v1.v1_jobs_list")
    retrieve = importlib.import_module(f"{gen.__name__}.api.v1.v1_jobs_retrieve")
    events = importlib.import_module(f"{gen.__name__}.api.v1.v1_jobs_events_list")
    cancel = importlib.import_module(f"{gen.__name__}.api.v1.v1_jobs_cancel_create")
    models = importlib.import_module(f"{gen.__name__}.models")
    client = gen.AuthenticatedClient(base_url=live_server.url, token=secret, raise_on_unexpected_status=True)

    body = models.JobRequest.from_dict(JOB_BODY)
    created = create.sync_detailed(client=client, body=body, idempotency_key="generated-1")
    assert created.status_code == 201, created.content
    job_id = created.parsed.id
    replay = create.sync_detailed(client=client, body=body, idempotency_key="generated-1")
    assert replay.status_code == 200 and replay.parsed.id == job_id
    assert Job.objects.get(pk=job_id).env == {"EPOCHS": "3"}  # the env went through, as JSON

    page = listing.sync(client=client)
    assert job_id in [job.id for job in page.results]
    job = retrieve.sync(job_id, client=client)
    assert (job.name, job.env.to_dict()) == ("train", {"EPOCHS": "3"})
    history = events.sync(job_id, client=client)
    assert [event.to_state for event in history][-1] == "submitted"

    cancelled = cancel.sync_detailed(job_id, client=client)
    assert cancelled.status_code == 202, cancelled.content
    assert Job.objects.get(pk=job_id).state == Job.State.CANCELLING


def test_the_generated_client_parses_a_bad_name_as_the_error_shape(generated, live_server):
    _, gen, secret = generated
    create = importlib.import_module(f"{gen.__name__}.api.v1.v1_jobs_create")
    models = importlib.import_module(f"{gen.__name__}.models")
    client = gen.AuthenticatedClient(base_url=live_server.url, token=secret)

    refused = create.sync_detailed(client=client, body=models.JobRequest.from_dict({**JOB_BODY, "name": "Not A Name!"}))

    assert refused.status_code == 400
    assert isinstance(refused.parsed, models.Error)
    assert refused.parsed.code and "name" in refused.parsed.fields.to_dict()


def test_the_generated_client_parses_every_status_each_operation_declares(generated):
    """Each generated operation parses every status its schema lists (the rest would raise
    UnexpectedStatus with raise_on_unexpected_status, as 409 of DELETE /volumes/{id} did)."""
    schema, gen, _ = generated
    modules = {path.stem: path.read_text() for path in Path(gen.__file__).parent.glob("api/*/*.py")}
    checked = 0
    for item in schema["paths"].values():
        for operation in item.values():
            parser = modules[operation["operationId"]].split("def _parse_response", 1)[1].split("\ndef ", 1)[0]
            for code in operation["responses"]:
                assert f"response.status_code == {code}" in parser, (operation["operationId"], code)
                checked += 1
    assert checked > 500


def test_the_generated_client_parses_the_409_of_deleting_a_mounted_volume(generated, live_server, owner, member,
                                                                         team, flavor, monkeypatch):
    from django.test import Client

    from quotas.models import StorageQuota

    _, gen, _ = generated
    destroy = importlib.import_module(f"{gen.__name__}.api.v1.v1_volumes_destroy")
    models = importlib.import_module(f"{gen.__name__}.models")
    monkeypatch.setattr("jobs.actions.enqueue", lambda *args: None)
    StorageQuota.objects.create(team=team, storage_class="standard", storage_gib=100, volumes=3)
    volume = Volume.objects.add(team=team, user=owner, name="model-cache", storage_class="standard", size_gib=5)
    make_job(team, flavor, name="train", volumes={"model-cache": "/m"})  # a live job mounts it
    session = Client()
    session.force_login(owner)  # owners delete volumes from a signed-in session
    csrf = "c" * 32
    client = gen.Client(base_url=live_server.url, raise_on_unexpected_status=True, headers={"X-CSRFToken": csrf},
                        cookies={"sessionid": session.cookies["sessionid"].value, "csrftoken": csrf})

    refused = destroy.sync_detailed(volume.pk, client=client)

    assert refused.status_code == 409, refused.content
    assert isinstance(refused.parsed, models.Error) and refused.parsed.code == "conflict"
    assert Volume.objects.filter(pk=volume.pk).exists()
