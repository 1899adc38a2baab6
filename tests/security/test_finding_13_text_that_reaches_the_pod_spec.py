"""Finding 13 (issue 29): a ``readiness_path`` with CR/LF or spaces, and images holding U+202E
(right-to-left override) or U+200B (zero-width space), reached the pod spec.

Now each text a job hands the cluster has the grammar of the place it lands, held by the
model's validators, so the form and the API give the same field error:
- ``image``: distribution/reference's grammar, as the container runtimes parse it
  (``[registry/]repository[:tag][@digest]``, ASCII only, the repository lowercase);
- ``readiness_path``: an absolute URL path with an optional query, RFC 3986 characters only
  (no space, CR, LF or other control, no fragment), at most 200 characters;
- ``command``, ``args`` and the values of ``env`` are free text and may hold any printable
  character, line breaks, tabs and any script included (a prompt in Persian, a path in
  Chinese), but no control character (NUL, ESC...) and no invisible formatting character
  (Unicode's Cf: the bidirectional overrides and isolates of "Trojan Source", zero-width
  spaces, the BOM), so what runs reads as the job page and its manifests show it; the
  zero-width joiner and non-joiner stay, as scripts and emoji need them. Names (of the job,
  the team, env variables) were ASCII labels already.
And a job row that holds such a value anyway (written before these rules) is never rendered:
its reconcile fails it with the reason, and the cluster gets nothing."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from core.validators import validate_image
from jobs import tasks
from jobs.lifecycle import State
from jobs.manifests import JOB_KINDS
from jobs.models import Job
from jobs.tasks import reconcile_job
from tests.support.api import JOB_BODY

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db

SUBMIT = reverse("jobs:submit")
SERVER = {**JOB_BODY, "name": "serve", "kind": "inference", "workers": 1, "port": 8000, "min_replicas": 1,
          "max_replicas": 2, "readiness_path": "/health"}


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


def as_form(team, flavor, body):
    out = {**body, "team": team.pk, "flavor": flavor.pk, "priority": "", "command": " ".join(body["command"]),
           "args": " ".join(body["args"]), "env": "\n".join(f"{k}={v}" for k, v in body["env"].items())}
    return {k: v for k, v in out.items() if v is not None}


def refused_in_both(client_as, client_for, owner, team, flavor, body, field, message):
    """The API answers 400 on ``field`` and the form shows it on ``field``, nothing made."""
    api = client_as(owner).post("/api/v1/jobs", body)
    assert api.status_code == 400, api.json()
    assert list(api.json()["fields"]) == [field] and message in " ".join(api.json()["fields"][field])
    page = client_for(owner).post(SUBMIT, as_form(team, flavor, body))
    assert page.status_code == 400
    errors = page.context["form"].errors
    assert list(errors) == [field] and message in " ".join(errors[field])
    assert not Job.objects.exists()


# --- readiness_path --------------------------------------------------------------------------
BAD_PATHS = [
    ("CR/LF (a header injected into the probe)", "/health\r\nX-Injected: 1", "U+000D (CARRIAGE RETURN)"),
    ("a line feed alone", "/health\nx", "U+000A (LINE FEED)"),
    ("a space", "/health check", "a space is not allowed; percent-encode it (a space is %20)"),
    ("a tab", "/health\tcheck", "U+0009 (CHARACTER TABULATION)"),
    ("a right-to-left override", "/health\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("a letter outside ASCII", "/santé", "U+00E9 (LATIN SMALL LETTER E WITH ACUTE)"),
    ("a fragment", "/health#ready", "no #fragment"),
    ("a broken percent-encoding", "/health%2", "%XX for any other"),
    ("no leading slash", "health", "A path starts with '/'"),
    ("more than 200 characters", "/" + "a" * 200, "200 characters"),
]


@pytest.mark.parametrize("case, path, message", BAD_PATHS, ids=[c[0] for c in BAD_PATHS])
def test_finding_13_a_readiness_path_is_an_absolute_url_path(client_as, client_for, owner, team, flavor, quota,
                                                             case, path, message):
    refused_in_both(client_as, client_for, owner, team, flavor, {**SERVER, "readiness_path": path},
                    "readiness_path", message)


@pytest.mark.parametrize("path", ["/", "/health", "/v1/models?ready=1&x=%20y", "/~user/a;b=c/status.json"])
def test_finding_13_paths_of_real_probes_are_taken(client_as, owner, team, flavor, path):
    response = client_as(owner).post("/api/v1/jobs", {**SERVER, "readiness_path": path})
    assert response.status_code == 201, response.json()


# --- image -----------------------------------------------------------------------------------
BAD_IMAGES = [
    ("a right-to-left override", "pytorch/pytorch\u202e:2.5.1", "U+202E (RIGHT-TO-LEFT OVERRIDE) is not allowed"),
    ("a zero-width space", "ghcr.io/team/train\u200b:1", "U+200B (ZERO WIDTH SPACE) is not allowed"),
    ("a fullwidth letter", "ｐytorch/pytorch:2", "U+FF50 (FULLWIDTH LATIN SMALL LETTER P)"),
    ("a line feed", "pytorch/pytorch:2\nx", "cannot contain spaces or line breaks"),
    ("an uppercase repository", "PyTorch/pytorch:2", "Not an image reference"),
    ("two tags", "pytorch/pytorch:2:3", "Not an image reference"),
    ("a tag starting with a dot", "pytorch/pytorch:.2", "Not an image reference"),
    ("a short digest", "pytorch/pytorch@sha256:abc", "Not an image reference"),
    ("an empty path component", "ghcr.io//train:1", "Not an image reference"),
    ("a name over 255 characters", "ghcr.io/" + "a" * 250 + ":1", "at most 255 characters"),
]


@pytest.mark.parametrize("case, image, message", BAD_IMAGES, ids=[c[0] for c in BAD_IMAGES])
def test_finding_13_an_image_is_a_reference_of_the_distribution_grammar(client_as, client_for, owner, team, flavor,
                                                                        quota, case, image, message):
    refused_in_both(client_as, client_for, owner, team, flavor, {**JOB_BODY, "image": image}, "image", message)


@pytest.mark.parametrize("image", [
    "busybox", "busybox:1.36", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "nvcr.io/nvidia/pytorch:24.05-py3",
    "localhost:5000/team/train:dev", "registry.example:443/a/b/c:v1_2", "[::1]:5000/train:1", "Docker.io/library/x",
    "ghcr.io/a__b/c--d.e:TAG", "ubuntu@sha256:" + "a" * 64, "ghcr.io/team/train:1@sha256:" + "0" * 64,
])
def test_finding_13_references_the_runtimes_take_are_taken(image):
    validate_image(image)


# --- free text: command, args, env -----------------------------------------------------------
HIDDEN = [
    ("an override in an argument", "args", ["--lr", "1e-4\u202e"], "Item 2 holds U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("an isolate in the command", "command", ["python\u2066"], "Item 1 holds U+2066 (LEFT-TO-RIGHT ISOLATE)"),
    ("a zero-width space in an argument", "args", ["--dry\u200brun"], "U+200B (ZERO WIDTH SPACE) at character 6"),
    ("an escape sequence in a value", "env", {"MODE": "\x1b[2Jfast"}, "The value of MODE holds U+001B (ESCAPE)"),
    ("a byte order mark in a value", "env", {"MODE": "\ufefffast"}, "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
]


@pytest.mark.parametrize("case, field, value, message", HIDDEN, ids=[c[0] for c in HIDDEN])
def test_finding_13_command_args_and_env_hold_no_hidden_characters(client_as, client_for, owner, team, flavor, quota,
                                                                   case, field, value, message):
    refused_in_both(client_as, client_for, owner, team, flavor, {**JOB_BODY, field: value}, field, message)


def test_finding_13_free_text_keeps_every_script_line_breaks_and_joiners(client_as, owner, team, flavor):
    body = {**JOB_BODY, "args": ["--prompt", "می\u200cخواهم", "--out", "/data/结果", "--who", "👩\u200d💻"],
            "env": {"CA_BUNDLE": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "T": "a\tb"}}
    response = client_as(owner).post("/api/v1/jobs", body)
    assert response.status_code == 201, response.json()
    assert Job.objects.get().args[1] == "می\u200cخواهم"


# --- the cluster never gets them -------------------------------------------------------------
STORED_BEFORE_THE_RULES = [
    ("image", dict(image="pytorch/pytorch\u202e:2")),
    ("readiness_path", dict(kind="inference", workers=1, port=8000, min_replicas=1, max_replicas=1,
                            readiness_path="/health\r\nX-Injected: 1")),
    ("args", dict(args=["--lr", "1e-4\u202e"])),
]


@pytest.mark.parametrize("field, fields", STORED_BEFORE_THE_RULES, ids=[c[0] for c in STORED_BEFORE_THE_RULES])
def test_finding_13_a_job_stored_with_such_text_is_never_rendered_nor_applied(fake, monkeypatch, team, flavor, quota,
                                                                              field, fields):
    rendered = []
    monkeypatch.setattr(tasks, "render_job", lambda job: rendered.append(job.pk) or [])
    job = make_job(team, flavor, name="old")
    Job.objects.filter(pk=job.pk).update(**fields)  # as a row from before the rules
    job.refresh_from_db()
    job.submit()
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert rendered == []
    assert (job.state, job.reason) == (State.FAILED, "InvalidSpec")
    assert job.message.startswith(f"Refused before reaching the cluster: {field}: ")
    kinds = {kind for _, kind in JOB_KINDS}
    assert [o for o in fake.stored() if o["kind"] in kinds] == []


def test_finding_13_a_job_already_on_the_cluster_is_left_running_as_it_was_created(fake, monkeypatch, team,
                                                                                   flavor, quota):
    """A row from before the rules whose job already runs: the sweep neither re-renders it
    nor stops it (a three-day training job is not killed by an upgrade)."""
    job = make_job(team, flavor, name="running")
    job.submit()
    reconcile_job(job.pk)
    job.refresh_from_db()
    created = [o["metadata"]["name"] for o in fake.stored(kind="Job")]
    assert job.state == State.QUEUED and created
    Job.objects.filter(pk=job.pk).update(image="pytorch/pytorch\u202e:2")
    rendered = []
    monkeypatch.setattr(tasks, "render_job", lambda job: rendered.append(job.pk) or [])
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert rendered == [] and job.state == State.QUEUED
    assert [o["metadata"]["name"] for o in fake.stored(kind="Job")] == created


def test_finding_13_a_job_that_passes_its_validators_is_rendered_and_applied(fake, team, flavor, quota):
    job = make_job(team, flavor, name="fine", args=["--prompt", "می\u200cخواهم"])
    job.submit()
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.spec_problems() == {}
    assert [o["metadata"]["name"] for o in fake.stored(kind="Job")]


def test_finding_13_the_model_holds_the_rules_for_every_path_in(team, flavor):
    job = Job(team=team, flavor=flavor, name="x", image="ghcr.io/team/train\u200b:1", command=["python\u202e"])
    with pytest.raises(ValidationError) as raised:
        job.full_clean()
    assert set(raised.value.message_dict) == {"image", "command"}
    assert set(job.spec_problems()) == {"image", "command"}
