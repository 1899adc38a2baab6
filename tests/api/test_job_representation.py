"""``JobSerializer.to_representation`` builds a job's JSON directly (a list page of 50 costs
a tenth of DRF's field-by-field walk). It must say exactly what the declared fields would:
same keys in the same order, same values, for every shape of job, fresh from a submit or
read back from the database."""

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework import serializers

from jobs import actions
from jobs.api.views import LIST_ROW, JobCreatedSerializer, JobSerializer
from jobs.models import Job
from quotas.models import PriorityClass

from ..builders import make_job

pytestmark = pytest.mark.django_db


def drf_walk(serializer_class, job) -> dict:
    """What DRF's own ModelSerializer.to_representation gives for the declared fields."""
    return serializers.ModelSerializer.to_representation(serializer_class(), job)


def shapes(team, flavor, member):
    high = PriorityClass.objects.create(name="urgent", value=1000)
    team.max_priority_value = 1000
    team.save()
    inference = make_job(team, flavor, name="serve", kind="inference", port=8000, min_replicas=1,
                         max_replicas=3, readiness_path="/healthz", autoscaling_target_cpu_percent=70,
                         cpu_per_worker=Decimal("0.5"), env={"MODE": "fast", "EMPTY": ""})
    finished = make_job(team, flavor, name="done", priority=high, max_runtime_seconds=3600,
                        command=[], args=["--epochs", "3", ""], workers=4, gpus_per_worker=8)
    Job.objects.filter(pk=finished.pk).update(
        state="succeeded", reason="Finished", message="Done.", submitter=member, kueue_reason="WaitingForQuota",
        kueue_message="couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
                      "flavor h100, 8 more needed",
        admitted_at=datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=dt_timezone.utc),
        started_at=timezone.now() - timedelta(hours=1), finished_at=timezone.now())
    submitted = actions.submit(team=team, submitter=member, flavor=flavor, name="fresh", image="busybox:1",
                               cpu_per_worker=Decimal("2"))
    # As submitted (the objects the request named, Python values) and as read back.
    return [inference, submitted, *Job.objects.select_related("team", "flavor", "priority", "submitter")]


def test_a_job_reads_as_drf_would_write_it(team, flavor, member, monkeypatch):
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)
    for job in shapes(team, flavor, member):
        fast = JobSerializer().to_representation(job)
        assert list(fast) == JobSerializer.Meta.fields
        assert fast == drf_walk(JobSerializer, job), job.name


def test_a_created_job_adds_its_feasibility(team, flavor, member, monkeypatch):
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)
    job = actions.submit(team=team, submitter=member, flavor=flavor, name="fresh", image="busybox:1")
    fast = JobCreatedSerializer().to_representation(job)
    assert list(fast) == JobCreatedSerializer.Meta.fields
    assert fast == drf_walk(JobCreatedSerializer, job)
    assert fast["feasibility"]["verdict"] in {"now", "queue", "never"}


def test_times_keep_the_current_time_zone(team, flavor, settings):
    job = make_job(team, flavor)
    job.finished_at = datetime(2026, 6, 1, 12, 0, tzinfo=dt_timezone.utc)
    with timezone.override("Europe/Berlin"):
        fast = JobSerializer().to_representation(job)
        assert fast["finished_at"] == "2026-06-01T14:00:00+02:00" == drf_walk(JobSerializer, job)["finished_at"]
    assert JobSerializer().to_representation(job)["finished_at"] == "2026-06-01T12:00:00Z"


def test_a_list_row_reads_as_its_job(team, flavor, member, monkeypatch):
    """The list reads rows (``values(*LIST_ROW)``), not jobs: each row's JSON is its job's."""
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)
    jobs = shapes(team, flavor, member)[2:]  # as read back
    rows = {row["id"]: row for row in Job.objects.values(*LIST_ROW)}
    assert sorted(rows) == sorted(job.pk for job in jobs)
    for job in jobs:
        assert JobSerializer().to_representation(rows[job.pk]) == drf_walk(JobSerializer, job), job.name


def test_the_api_list_shows_each_job_as_its_own_page_does(client_as, team, flavor, member, monkeypatch):
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)
    shapes(team, flavor, member)
    api = client_as(member)
    listed = api.get("/api/v1/jobs").json()["results"]
    assert len(listed) == 3
    for item in listed:
        detail = api.get(f"/api/v1/jobs/{item['id']}").json()
        # The detail adds what only one job's page asks: its GPUs now, its idle-GPU state, the
        # time left before its max runtime, its preemptions, its place in the queue.
        assert set(detail) - set(item) == {"gpu_utilization", "idle", "runtime_left_seconds", "preemption", "queue",
                                           "eta"}
        assert item == {name: value for name, value in detail.items() if name in item}
