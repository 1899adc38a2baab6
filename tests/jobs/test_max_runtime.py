"""A job's maximum runtime: quota managers set a default and a cap per flavor and per priority
class; a training job without one gets the default, one above the cap is refused with a field
error naming the cap and where it comes from, and the tighter of flavor and priority applies.
The job page, the API and gpuctl say the limit and, while it runs, the time left."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from gpuctl.commands import _span
from jobs.lifecycle import State
from jobs.models import Job
from quotas.models import Limits, PriorityClass, runtime_limits
from tests.builders import build_job, make_flavor, make_job

pytestmark = pytest.mark.django_db

HOUR, DAY = 3600, 86400
FIELDS = dict(name="train", image="ghcr.io/x/train:1", command=["python"], args=["train.py"])


@pytest.fixture
def capped(flavor):
    flavor.default_max_runtime_seconds, flavor.max_runtime_cap_seconds = 12 * HOUR, 2 * DAY
    flavor.save()
    return flavor


@pytest.fixture
def short(db):
    return PriorityClass.objects.create(name="short", value=0, default_max_runtime_seconds=HOUR,
                                        max_runtime_cap_seconds=4 * HOUR)


@pytest.mark.parametrize("case, flavor_limits, priority_limits, expected", [
    ("nothing set gives no default and no cap", (None, None), None, Limits()),
    ("the flavor's alone", (HOUR, DAY), None, Limits(HOUR, DAY, "flavor h100")),
    ("the priority's cap is tighter", (12 * HOUR, 2 * DAY), (HOUR, 4 * HOUR),
     Limits(HOUR, 4 * HOUR, "priority class short")),
    ("the flavor's cap is tighter", (HOUR, 2 * HOUR), (None, DAY), Limits(HOUR, 2 * HOUR, "flavor h100")),
    ("a default above the other's cap is that cap", (DAY, None), (None, 2 * HOUR),
     Limits(2 * HOUR, 2 * HOUR, "priority class short")),
    ("a priority without limits changes nothing", (HOUR, DAY), (None, None), Limits(HOUR, DAY, "flavor h100")),
])
def test_the_tighter_of_flavor_and_priority_applies(case, flavor_limits, priority_limits, expected):
    flavor = make_flavor("h100", default_max_runtime_seconds=flavor_limits[0], max_runtime_cap_seconds=flavor_limits[1])
    priority = None
    if priority_limits is not None:
        priority = PriorityClass.objects.create(name="short", value=0, default_max_runtime_seconds=priority_limits[0],
                                                max_runtime_cap_seconds=priority_limits[1])
    assert runtime_limits(flavor, priority) == expected, case


def test_a_training_job_without_a_max_runtime_gets_the_flavors_default(team, member, capped):
    job = Job.objects.submit(team=team, submitter=member, flavor=capped, **FIELDS)
    job.refresh_from_db()
    assert job.max_runtime_seconds == 12 * HOUR


def test_a_max_runtime_over_the_cap_is_refused_naming_the_cap_and_its_source(team, member, capped):
    with pytest.raises(ValidationError) as exc:
        Job.objects.submit(team=team, submitter=member, flavor=capped, max_runtime_seconds=3 * DAY, **FIELDS)
    assert exc.value.message_dict["max_runtime_seconds"] == [
        "At most 2 d (172,800 s): the max runtime cap of flavor h100, set by quota managers. "
        "Ask for less, or ask a quota manager."]
    assert not Job.objects.exists()


def test_the_priority_class_cap_is_named_when_it_is_the_tighter(team, member, capped, short):
    job = build_job(team, capped, priority=short, max_runtime_seconds=5 * HOUR)
    with pytest.raises(ValidationError) as exc:
        job.full_clean()
    assert "the max runtime cap of priority class short" in exc.value.message_dict["max_runtime_seconds"][0]
    job = build_job(team, capped, priority=short)
    job.full_clean()
    assert job.max_runtime_seconds == HOUR  # the priority's default is the tighter


def test_a_max_runtime_at_the_cap_is_taken(team, member, capped):
    job = Job.objects.submit(team=team, submitter=member, flavor=capped, max_runtime_seconds=2 * DAY, **FIELDS)
    assert job.max_runtime_seconds == 2 * DAY


def test_inference_gets_no_max_runtime(team, member, capped):
    job = build_job(team, capped, kind=Job.Kind.INFERENCE, workers=1, port=8000, min_replicas=1, max_replicas=1)
    job.full_clean()
    assert job.max_runtime_seconds is None


def test_a_default_longer_than_the_cap_is_refused_on_the_flavor(flavor):
    flavor.default_max_runtime_seconds, flavor.max_runtime_cap_seconds = 2 * DAY, DAY
    with pytest.raises(ValidationError) as exc:
        flavor.full_clean()
    assert exc.value.message_dict["default_max_runtime_seconds"] == [
        "The default (2 d) is longer than the cap (1 d)."]


def test_the_api_refuses_over_the_cap_with_a_field_error_and_fills_the_default(team, member, capped):
    client = APIClient()
    client.force_login(member)
    refused = client.post("/api/v1/jobs", {"team": "vision", "flavor": "h100", "max_runtime_seconds": 3 * DAY,
                                           **FIELDS}, format="json")
    assert refused.status_code == 400
    assert "cap of flavor h100" in str(refused.json()["fields"]["max_runtime_seconds"])
    taken = client.post("/api/v1/jobs", {"team": "vision", "flavor": "h100", **FIELDS}, format="json")
    assert taken.status_code == 201 and taken.json()["max_runtime_seconds"] == 12 * HOUR


def running(team, flavor, admitted_ago: timedelta, **fields) -> Job:
    job = make_job(team, flavor, **fields)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, submitted_at=now - admitted_ago,
                                         admitted_at=now - admitted_ago, started_at=now - admitted_ago)
    job.refresh_from_db()
    return job


def test_time_left_counts_from_admission_and_is_none_without_a_limit_or_once_ended(team, flavor):
    job = running(team, flavor, timedelta(minutes=30), max_runtime_seconds=2 * HOUR)
    now = timezone.now()
    assert job.runtime_left(now) == timedelta(hours=2) - (now - job.admitted_at)
    assert job.runtime_left(job.admitted_at + timedelta(hours=3)) == timedelta(0)
    assert running(team, flavor, timedelta(minutes=5)).runtime_left() is None
    Job.objects.filter(pk=job.pk).update(state=State.FAILED, finished_at=now)
    job.refresh_from_db()
    assert job.runtime_left() is None


def test_the_job_page_and_its_poll_say_the_max_runtime_and_the_time_left(team, flavor, member, client_for):
    job = running(team, flavor, timedelta(minutes=30), max_runtime_seconds=2 * HOUR)
    client = client_for(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "2 h 00 min (7200 s)" in page
    poll = client.get(f"/jobs/{job.pk}/?seen=running", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="job-status")
    text = poll.content.decode()
    assert poll.status_code == 200 and "Max runtime" in text
    assert "1 h 29 min" in text or "1 h 30 min" in text
    assert 'hx-trigger="every 3s"' in text  # the page keeps polling, so the time left moves


def test_the_outsider_sees_no_job_page(team, flavor, outsider, client_for):
    job = running(team, flavor, timedelta(minutes=30), max_runtime_seconds=2 * HOUR)
    assert client_for(outsider).get(f"/jobs/{job.pk}/").status_code == 404


def test_the_api_says_the_time_left_to_the_team_only(team, flavor, owner, member, outsider):
    job = running(team, flavor, timedelta(minutes=30), max_runtime_seconds=2 * HOUR)
    for person in (owner, member):
        client = APIClient()
        client.force_login(person)
        body = client.get(f"/api/v1/jobs/{job.pk}").json()
        assert body["max_runtime_seconds"] == 2 * HOUR
        assert 89 * 60 <= body["runtime_left_seconds"] <= 90 * 60
    client = APIClient()
    client.force_login(outsider)
    assert client.get(f"/api/v1/jobs/{job.pk}").status_code == 404


@pytest.mark.parametrize("seconds, said", [(45, "45 s"), (192, "3 min 12 s"), (7500, "2 h 05 min"),
                                           (93600, "1 d 2 h")])
def test_gpuctl_says_spans_as_the_job_page_does(seconds, said):
    from jobs.templatetags.job_time import duration

    assert _span(seconds) == said == duration(timedelta(seconds=seconds))


def test_the_form_refuses_over_the_cap_on_the_field_and_keeps_the_input(team, owner, capped, client_for):
    from django.urls import reverse

    from tests.builders import make_quota

    make_quota(team, capped)
    data = dict(team=team.pk, kind="training", name="long", flavor=capped.pk, priority="",
                image="pytorch/pytorch:2.5.1", command="python", args="train.py", env="", workers=1,
                gpus_per_worker=1, cpu_per_worker=8, memory_per_worker_gib=64, max_runtime_seconds=3 * DAY)
    response = client_for(owner).post(reverse("jobs:submit"), data)
    assert response.status_code == 400 and not Job.objects.exists()
    assert "the max runtime cap of flavor h100" in response.context["form"].errors["max_runtime_seconds"][0]
    assert f'value="{3 * DAY}"' in response.content.decode()


def test_quota_managers_set_the_limits_in_the_admin(quota_manager, client_for, short):
    from django.urls import reverse

    client = client_for(quota_manager)
    url = reverse("admin:quotas_priorityclass_change", args=[short.pk])
    assert 'name="max_runtime_cap_seconds"' in client.get(url).content.decode()
    # the rest of the class as it is (its preemption contract, docs/preemption.md)
    kept = {"name": "short", "value": 0, "description": "", "checkpoint_grace_seconds": short.checkpoint_grace_seconds,
            "minimum_runtime_seconds": short.minimum_runtime_seconds}
    response = client.post(url, {**kept, "default_max_runtime_seconds": 2 * DAY, "max_runtime_cap_seconds": DAY})
    assert response.status_code == 200  # the form again, with the error
    assert "The default (2 d) is longer than the cap (1 d)." in response.content.decode()
    response = client.post(url, {**kept, "default_max_runtime_seconds": HOUR, "max_runtime_cap_seconds": DAY})
    assert response.status_code == 302
    short.refresh_from_db()
    assert (short.default_max_runtime_seconds, short.max_runtime_cap_seconds) == (HOUR, DAY)


def test_gpuctl_status_prints_the_max_runtime_and_the_time_left(team, flavor, member, capsys):
    """What `gpuctl status` prints from the API's own body for a running job."""
    from types import SimpleNamespace

    from gpuctl.commands import status
    from gpuctl.output import Output

    job = running(team, flavor, timedelta(minutes=30), max_runtime_seconds=2 * HOUR)
    api = APIClient()
    api.force_login(member)

    class Client:  # gpuctl's client, answered by the API in-process
        def get(self, path):
            return api.get(f"/api/v1/{path}").json()

    status(Client(), SimpleNamespace(id=job.pk), Output("text"))
    printed = capsys.readouterr().out
    assert "max runtime: 2 h 00 min, 1 h 29 min" in printed or "max runtime: 2 h 00 min, 1 h 30 min" in printed
    assert "left (counted from admission)" in printed
