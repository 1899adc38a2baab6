"""Submitting jobs from the form: presets, validation that keeps the input, preview, clone."""

import pytest
import yaml
from django.urls import reverse

from jobs.lifecycle import State
from jobs.models import Job

from ..builders import make_flavor, make_job, make_quota, make_team
from ..support.htmx import htmx

pytestmark = pytest.mark.django_db

SUBMIT = reverse("jobs:submit")
PREVIEW = reverse("jobs:preview")


def training(team, flavor, **overrides):
    data = dict(
        team=team.pk, kind="training", name="my-train", flavor=flavor.pk, priority="",
        image="pytorch/pytorch:2.5.1", command="python", args="train.py --lr '1e-4 warm'",
        env="EPOCHS=3\nNCCL_DEBUG=WARN", workers=2, gpus_per_worker=2, cpu_per_worker=8,
        memory_per_worker_gib=64, max_runtime_seconds=3600,
    )
    data.update(overrides)
    return data


def inference(team, flavor, **overrides):
    data = dict(
        team=team.pk, kind="inference", name="serve", flavor=flavor.pk, priority="",
        image="vllm/vllm-openai:v0.6.4", command="", args="--port 8000", env="",
        gpus_per_worker=1, cpu_per_worker=4, memory_per_worker_gib=32, port=8000,
        min_replicas=1, max_replicas=2, readiness_path="/health", autoscaling_target_cpu_percent=70,
    )
    data.update(overrides)
    return data


@pytest.mark.parametrize("who", ["owner", "member"])
def test_owners_and_members_submit_a_training_job(request, client_for, team, flavor, quota, who):
    person = request.getfixturevalue(who)
    response = client_for(person).post(SUBMIT, training(team, flavor))
    job = Job.objects.get(name="my-train")
    assert response.status_code == 302 and response.url == reverse("jobs:detail", args=[job.pk])
    assert job.state == State.SUBMITTED and job.submitter == person
    assert job.args == ["train.py", "--lr", "1e-4 warm"] and job.env == {"EPOCHS": "3", "NCCL_DEBUG": "WARN"}
    assert (job.workers, job.gpus_per_worker, job.max_runtime_seconds) == (2, 2, 3600)


def test_an_inference_server_is_submitted_with_its_serving_fields(client_for, owner, team, flavor, quota):
    response = client_for(owner).post(SUBMIT, inference(team, flavor))
    assert response.status_code == 302
    job = Job.objects.get(name="serve")
    assert (job.kind, job.port, job.min_replicas, job.max_replicas, job.workers) == ("inference", 8000, 1, 2, 1)


def test_a_job_that_can_never_run_is_submitted_with_a_warning_that_says_so(client_for, owner, team, flavor, quota):
    response = client_for(owner).post(SUBMIT, training(team, flavor, workers=4, gpus_per_worker=8), follow=True)
    assert Job.objects.get(name="my-train").state == State.SUBMITTED
    html = response.content.decode()
    assert "msg-warning" in html
    assert "Can never run: it needs 32 GPUs but team vision can use at most 8 on h100" in html


@pytest.mark.parametrize("kind, field, value", [
    ("inference", "max_replicas", 2**63 - 1), ("training", "workers", 100_000),
    ("training", "memory_per_worker_gib", 2**31), ("training", "max_runtime_seconds", 10**12),
])
def test_a_number_out_of_range_is_a_field_error_and_keeps_the_input(client_for, owner, team, flavor, quota,
                                                                      kind, field, value):
    data = (inference if kind == "inference" else training)(team, flavor, **{field: value})
    response = client_for(owner).post(SUBMIT, data)
    assert response.status_code == 400 and not Job.objects.exists()
    assert response.context["form"].errors[field]
    assert f'value="{value}"' in response.content.decode()


def test_viewers_are_told_they_cannot_submit_and_a_post_is_refused(client_for, viewer, team, flavor, quota):
    client = client_for(viewer)
    page = client.get(SUBMIT)
    assert page.status_code == 200 and b"only owners and members of a team can" in page.content
    assert client.post(SUBMIT, training(team, flavor)).status_code == 403
    assert not Job.objects.exists()


def test_a_viewer_who_is_a_member_elsewhere_cannot_pick_the_team_they_only_view(client_for, viewer, team, flavor, quota):
    make_team("lab", members={viewer: "member"})
    response = client_for(viewer).post(SUBMIT, training(team, flavor))
    assert response.status_code == 400
    assert b"Select a valid choice" in response.content
    assert not Job.objects.exists()


def test_outsiders_cannot_submit_for_another_team(client_for, outsider, team, flavor, quota):
    response = client_for(outsider).post(SUBMIT, training(team, flavor))
    assert response.status_code == 400 and not Job.objects.filter(team=team).exists()


def test_bad_fields_are_explained_and_what_was_typed_is_kept(client_for, owner, team, flavor, quota):
    response = client_for(owner).post(
        SUBMIT, training(team, flavor, name="Bad_Name", gpus_per_worker=9, env="EPOCHS 3", image="my image")
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "The job was not submitted" in html
    assert "Use lowercase letters, digits and" in html and "63" not in html.split("Use lowercase letters")[1][:200]
    assert "Line 1 should look like NAME=value." in html
    assert "An image reference cannot contain spaces or line breaks." in html
    assert 'value="Bad_Name"' in html and 'value="my image"' in html and "EPOCHS 3</textarea>" in html
    assert 'value="train.py --lr &#x27;1e-4 warm&#x27;"' in html
    assert not Job.objects.exists()


def test_the_model_rules_reach_the_form_as_field_errors(client_for, owner, team, flavor, quota):
    response = client_for(owner).post(SUBMIT, training(team, flavor, gpus_per_worker=9, env="WORLD_SIZE=4"))
    html = response.content.decode()
    assert "9 GPUs per worker, but nodes of flavor h100 have 8." in html
    assert "WORLD_SIZE is set by the platform" in html


def test_a_second_live_job_with_the_same_name_is_refused(client_for, owner, team, flavor, quota):
    make_job(team, flavor, name="my-train")
    response = client_for(owner).post(SUBMIT, training(team, flavor))
    assert response.status_code == 400
    assert b"already has a live job with this name" in response.content


def test_an_inference_server_needs_a_port_and_sane_replicas(client_for, owner, team, flavor, quota):
    response = client_for(owner).post(SUBMIT, inference(team, flavor, port="", min_replicas=3, max_replicas=2))
    html = response.content.decode()
    assert response.status_code == 400
    assert "This field is required." in html
    assert "Must be at least the minimum number of replicas." in html
    assert 'value="3"' in html


@pytest.mark.parametrize("preset, expected", [
    ("single", ['value="train-single"', 'name="workers"']),
    ("ddp", ['value="train-ddp"', "torchrun", "$(MASTER_ADDR)"]),
    ("inference", ['value="llm-serve"', 'name="port"', 'value="/health"']),
])
def test_presets_fill_the_form(client_for, owner, team, flavor, quota, preset, expected):
    html = client_for(owner).get(SUBMIT, {"preset": preset}).content.decode()
    for text in expected:
        assert text in html


def test_the_inference_tab_shows_serving_fields_and_hides_workers(client_for, owner, team, flavor, quota):
    html = client_for(owner).get(SUBMIT, {"kind": "inference"}).content.decode()
    assert 'name="port"' in html and 'name="workers"' not in html


def test_the_flavor_picker_shows_quota_and_free_gpus(client_for, owner, team, flavor, quota, running_job):
    make_flavor("t4", gpus_per_node=4, display_name="T4")
    html = client_for(owner).get(SUBMIT).content.decode()
    assert "h100 · 8 GPUs/node · quota 8 · 4 free" in html
    assert "T4 · 4 GPUs/node · no quota" in html


def test_the_preview_renders_what_will_be_applied_and_says_it_starts_now(client_for, owner, team, flavor, quota):
    response = client_for(owner).post(PREVIEW, training(team, flavor), **htmx("preview"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Starts now: 4 GPUs fit in the free quota (0 of 8 GPUs in use)." in html
    start = html.index('<pre class="yaml" id="yaml-preview" tabindex="0">') + len('<pre class="yaml" id="yaml-preview" tabindex="0">')
    import html as html_lib

    objects = list(yaml.safe_load_all(html_lib.unescape(html[start:html.index("</pre>", start)])))
    assert [o["kind"] for o in objects] == ["Service", "Job"]
    assert objects[1]["metadata"]["name"] == "my-train-0"
    assert objects[1]["spec"]["parallelism"] == 2
    assert not Job.objects.exists()


def test_the_preview_says_when_a_job_can_never_run(client_for, owner, team, quota):
    small = make_flavor("t4", gpus_per_node=4)
    make_quota(team, small, nominal_gpus=16)
    html = client_for(owner).post(PREVIEW, training(team, small, gpus_per_worker=8), **htmx("preview")).content.decode()
    assert "Can never run: 8 GPUs per worker but nodes of this flavor have 4." in html
    # The model refuses it too: the field error is listed, and there is no YAML.
    assert "Fix these first" in html and "8 GPUs per worker, but nodes of flavor t4 have 4." in html
    assert "yaml-preview" not in html


def test_the_preview_gives_no_verdict_while_the_size_is_unreadable(client_for, owner, team, flavor, quota):
    html = client_for(owner).post(PREVIEW, training(team, flavor, workers="two"), **htmx("preview")).content.decode()
    assert "Enter a whole number." in html and "Before you submit" not in html


def test_the_preview_lists_field_errors_instead_of_yaml(client_for, owner, team, flavor, quota):
    html = client_for(owner).post(PREVIEW, training(team, flavor, name=""), **htmx("preview")).content.decode()
    assert "Fix these first" in html and "This field is required." in html and "yaml-preview" not in html


def test_the_preview_says_how_many_jobs_are_ahead(client_for, owner, team, flavor, quota, running_job):
    waiting = make_job(team, flavor, name="waiting")
    waiting.submit()
    html = client_for(owner).post(PREVIEW, training(team, flavor), **htmx("preview")).content.decode()
    assert "Will queue: 1 job ahead, 4 of 8 GPUs in use." in html


def test_cloning_fills_the_form_from_the_job(client_for, member, running_job):
    html = client_for(member).get(SUBMIT, {"clone": running_job.pk}).content.decode()
    assert 'value="running-job-copy"' in html and 'value="ghcr.io/example/train:1"' in html
    assert 'value="train.py"' in html and "EPOCHS=3</textarea>" in html


def test_outsiders_cannot_clone_another_teams_job(client_for, outsider, running_job):
    assert client_for(outsider).get(SUBMIT, {"clone": running_job.pk}).status_code == 404


def test_a_malformed_clone_id_is_not_found(client_for, owner, team):
    assert client_for(owner).get(SUBMIT, {"clone": "abc"}).status_code == 404


def test_the_inference_preset_opens_the_inference_tab(client_for, owner, team, flavor, quota):
    html = client_for(owner).get(SUBMIT, {"preset": "inference"}).content.decode()
    assert '<a href="?kind=inference" aria-current="page">' in html


def test_a_preset_starts_on_a_flavor_where_it_can_run(client_for, owner, team, flavor, quota):
    big = make_flavor("b200", gpus_per_node=8, display_name="B200")
    make_quota(team, big, nominal_gpus=16)
    small = make_flavor("aaa-small", gpus_per_node=8)
    make_quota(team, small, nominal_gpus=20)
    # The DDP preset is 2 workers x 8 GPUs: the flavor with the most free GPUs wins...
    html = client_for(owner).get(SUBMIT, {"preset": "ddp"}).content.decode()
    assert f'<option value="{small.pk}" selected>' in html
    # ...unless its nodes are too small for 8 GPUs per worker.
    small.gpus_per_node = 4
    small.save()
    html = client_for(owner).get(SUBMIT, {"preset": "ddp"}).content.decode()
    assert f'<option value="{big.pk}" selected>' in html


def test_the_form_and_preview_refuse_gpu_runtime_variables_and_keep_what_was_typed(client_for, owner, team, flavor, quota):
    data = training(team, flavor, env="EPOCHS=3\nNVIDIA_VISIBLE_DEVICES=all")
    preview = client_for(owner).post(PREVIEW, data, **htmx("preview")).content.decode()
    assert "would be read by the GPU runtime" in preview and "yaml-preview" not in preview
    response = client_for(owner).post(SUBMIT, data)
    assert response.status_code == 400
    html = response.content.decode()
    assert "NVIDIA_VISIBLE_DEVICES would be read by the GPU runtime" in html
    assert "NVIDIA_VISIBLE_DEVICES=all" in html  # what was typed is still in the form
    assert not Job.objects.exists()


# --- the verdict before the button ----------------------------------------------------------
def test_the_verdict_has_its_place_before_the_submit_button(client_for, owner, team, flavor, quota):
    html = client_for(owner).get(SUBMIT).content.decode()
    assert html.index('id="verdict"') < html.index(">Submit job</button>")
    assert html.index('id="verdict"') > html.index('id="job-form"')


def test_the_preview_sends_the_verdict_into_that_place(client_for, owner, team, flavor, quota):
    html = client_for(owner).post(PREVIEW, training(team, flavor), **htmx("preview")).content.decode()
    start = html.index('<div id="verdict" hx-swap-oob="true"')
    verdict = html[start:html.index("</div>\n", html.index('id="feasibility"'))]
    assert "Starts now" in verdict and "Before you submit" in verdict


@pytest.fixture
def phone(request, live_server, owner, team, flavor, quota, monkeypatch):
    """A 390 px wide page signed in as the owner (the world built before the browser starts)."""
    from django.conf import settings
    from django.db import connections
    from django.test import Client

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client = Client()
    client.force_login(owner)
    browser = request.getfixturevalue("browser")
    context = browser.new_context(viewport={"width": 390, "height": 844}, base_url=live_server.url, is_mobile=True)
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                          "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
    page = context.new_page()
    yield page
    page.goto("about:blank")
    context.close()
    connections.close_all()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_on_a_phone_the_verdict_shows_above_the_submit_button(phone):
    phone.goto("/jobs/new/?preset=single")
    verdict = phone.locator("#verdict #feasibility")
    verdict.wait_for(timeout=15_000)
    button = phone.get_by_role("button", name="Submit job")
    assert verdict.bounding_box()["y"] + verdict.bounding_box()["height"] <= button.bounding_box()["y"]
    assert "Starts now" in verdict.inner_text()


# --- two same-name submissions at once ------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_two_same_name_submissions_at_once_give_one_job_and_a_name_error(owner, team, flavor, quota, monkeypatch):
    """A real race: both requests pass the live-name check (a barrier holds each until the
    other has), then both insert; the database's unique index lets one through."""
    import threading

    from django.db import connection
    from django.test import Client

    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)
    both_checked = threading.Barrier(2, timeout=20)
    check = Job.validate_constraints

    def check_then_wait(self, exclude=None):
        check(self, exclude=exclude)
        both_checked.wait()

    monkeypatch.setattr(Job, "validate_constraints", check_then_wait)
    answers = []

    def submit():
        try:
            client = Client()
            client.force_login(owner)
            answers.append(client.post(SUBMIT, training(team, flavor, name="same")))
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(response.status_code for response in answers) == [302, 400]
    refused = next(response for response in answers if response.status_code == 400).content.decode()
    assert "The team already has a live job with this name." in refused
    assert 'value="same"' in refused  # what was typed is kept
    assert Job.objects.filter(name="same").count() == 1
