"""The job spec (workloads/spec.py) is the one list of what a person sets on a job: the form, its
sections, cloning, the API serializer, the job list and the admin all follow it."""

import pytest
from django.contrib.admin.sites import site
from rest_framework.test import APIClient

from jobs.api.views import LIST_ROW, JobSerializer
from jobs.forms import JobForm, clone_initial
from jobs.models import Job
from jobs.web.views import LIST_COLUMNS
from quotas.models import PriorityClass, Scheduler
from workloads import spec
from workloads.kinds import by_name

from ..builders import make_flavor, make_job
from ..support.api import JOB_BODY

pytestmark = pytest.mark.django_db


def form(user, kind="training", data=None, initial=None):
    return JobForm(data, initial=initial or {"kind": kind}, user=user)


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_the_form_has_exactly_the_spec_fields_of_its_kind_in_the_spec_sections(member, team, kind):
    shown = form(member, kind)
    assert list(shown.fields) == [field.name for field in by_name(kind).spec_fields]
    groups = [(title, [bound.name for bound in fields]) for title, fields in shown.field_groups()]
    assert groups == spec.sections(f.name for f in by_name(kind).spec_fields if f.name != "kind")
    for field in by_name(kind).spec_fields:
        assert shown.fields[field.name].label == field.label


def test_the_inference_form_asks_for_the_readiness_delay(member, team):
    assert "readiness_initial_delay_seconds" in form(member, "inference").fields


def test_cloning_an_api_submitted_inference_job_keeps_every_field(client_for, member, team, flavor):
    job = make_job(team, flavor, name="serve", kind="inference", port=8000, min_replicas=1, max_replicas=3,
                   readiness_path="/healthz", readiness_initial_delay_seconds=600, autoscaling_target_cpu_percent=50)
    initial = clone_initial(job)
    assert set(initial) == set(spec.NAMES)
    assert initial["readiness_initial_delay_seconds"] == 600
    # The form as the page sends it back (every field it shows, as it shows it) submits the same job.
    clone = form(member, "inference", initial=initial)
    data = {name: clone[name].value() for name in clone.fields}
    data = {name: "" if value is None else value for name, value in data.items()}
    submitted = form(member, "inference", data=data)
    assert submitted.is_valid(), submitted.errors
    copy = submitted.unsaved_job()
    for field in by_name("inference").spec_fields:
        if field.name != "name":
            assert getattr(copy, field.name) == getattr(job, field.name), field.name
    assert copy.name == "serve-copy"


def test_an_empty_number_box_means_the_fields_default(member, team, flavor):
    data = {"team": team.pk, "kind": "inference", "name": "serve", "flavor": flavor.pk, "image": "busybox:1",
            "port": 8000, "min_replicas": 1, "max_replicas": 1, "readiness_initial_delay_seconds": "",
            "cpu_per_worker": ""}
    bound = form(member, "inference", data=data)
    assert bound.is_valid(), bound.errors
    job = bound.unsaved_job()
    assert (job.readiness_initial_delay_seconds, job.cpu_per_worker) == (30, 4)


def test_the_api_takes_and_shows_the_spec_fields_with_their_help():
    serializer = JobSerializer()
    writable = [name for name, field in serializer.fields.items() if not field.read_only]
    assert writable == list(spec.NAMES)
    for field in spec.FIELDS:
        assert serializer.fields[field.name].help_text == field.help, field.name
    assert [name for name in LIST_ROW if name.split("__")[0] in spec.NAMES] == [f.column for f in spec.FIELDS]


def test_the_job_list_and_the_admin_show_the_spec_columns():
    listed = [field.column for field in spec.LISTED]
    assert [column for column in LIST_COLUMNS if column in listed] == listed
    admin = site._registry[Job]
    assert admin.list_display[:len(spec.LISTED)] == [field.name for field in spec.LISTED]
    in_fieldsets = [name for _, options in admin.fieldsets for name in options["fields"]]
    assert in_fieldsets[:len(spec.NAMES)] == [name for _, names in spec.sections(spec.NAMES) for name in names]


def test_the_admin_change_page_renders_its_spec_sections(client_for, quota_manager, team, flavor):
    quota_manager.is_superuser = True
    quota_manager.save()
    job = make_job(team, flavor)
    html = client_for(quota_manager).get(f"/admin/jobs/job/{job.pk}/change/").content.decode()
    for title in spec.SECTIONS:
        assert f">{title}<" in html


# --- what a scheduler cannot honour -----------------------------------------------------------
def test_a_priority_on_a_volcano_flavor_is_a_field_error_not_ignored(member, team):
    volcano = make_flavor("v100", scheduler=Scheduler.VOLCANO)
    urgent = PriorityClass.objects.create(name="urgent", value=0)
    data = {"team": team.pk, "kind": "training", "name": "t", "flavor": volcano.pk, "priority": urgent.pk,
            "image": "busybox:1", "workers": 1, "gpus_per_worker": 1, "cpu_per_worker": 1,
            "memory_per_worker_gib": 1}
    bound = form(member, data=data)
    assert not bound.is_valid()
    assert list(bound.errors) == ["priority"] and "Kueue flavors only" in bound.errors["priority"][0]
    data["priority"] = ""
    assert form(member, data=data).is_valid()


def test_a_priority_on_a_volcano_flavor_is_a_400_in_the_api(member, team):
    make_flavor("v100", scheduler=Scheduler.VOLCANO)
    PriorityClass.objects.create(name="urgent", value=0)
    client = APIClient()
    client.force_login(member)
    response = client.post("/api/v1/jobs", {**JOB_BODY, "flavor": "v100", "priority": "urgent"},
                                      format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["priority"]
    assert not Job.objects.exists()


def test_a_priority_on_a_kueue_flavor_is_taken(member, team, flavor):
    urgent = PriorityClass.objects.create(name="urgent", value=0)
    job = make_job(team, flavor, priority=urgent)
    assert job.priority == urgent


def test_the_spec_is_plain_data_the_model_can_ask():
    import ast
    from pathlib import Path

    tree = ast.parse(Path(spec.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"dataclasses"}
