"""`manage.py render` prints exactly what the renderers produce, as kubectl-ready YAML."""

import pytest
import yaml
from django.core.management import CommandError, call_command

from jobs.manifests import render_job
from jobs.models import Job
from tenants.models import Team

from .builders import render_team_and_quotas
from .schemas import validate

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    call_command("seed_demo", stdout=open("/dev/null", "w"))


def render(*args, capsys) -> list[dict]:
    call_command("render", *args)
    return list(yaml.safe_load_all(capsys.readouterr().out))


def test_render_team_prints_every_team_object(demo, capsys):
    team = Team.objects.get(slug="vision")
    printed = render("team", "vision", capsys=capsys)
    assert printed == render_team_and_quotas(team)
    assert {o["kind"] for o in printed} >= {"Namespace", "ResourceQuota", "ClusterQueue", "LocalQueue", "Queue"}


def test_render_job_prints_the_jobs_objects(demo, capsys):
    for job in Job.objects.select_related("team", "flavor", "priority"):
        printed = render("job", str(job.pk), capsys=capsys)
        assert printed == render_job(job)


def test_render_cluster_output_is_schema_valid(demo, capsys):
    printed = render("cluster", capsys=capsys)
    # The demo's h100 is racked (docs/topology.md): its Topology comes with the flavors.
    assert {o["kind"] for o in printed} == {"Topology", "ResourceFlavor", "Cohort", "WorkloadPriorityClass"}
    for obj in printed:
        validate(obj)


def test_every_demo_object_is_schema_valid(demo, capsys):
    """The whole demo world, as `render` prints it, passes the strict schema checks."""
    objects = render("cluster", capsys=capsys)
    for team in Team.objects.all():
        objects += render("team", team.slug, capsys=capsys)
    for job in Job.objects.all():
        objects += render("job", str(job.pk), capsys=capsys)
    for obj in objects:
        validate(obj)
    assert len(objects) > 40


@pytest.mark.parametrize("args, message", [
    (("team", "nope"), "No team 'nope'"),
    (("team",), "needs a slug"),
    (("job", "abc"), "numeric id"),
    (("job", "99999"), "No job '99999'"),
])
def test_render_explains_bad_arguments(demo, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("render", *args)
