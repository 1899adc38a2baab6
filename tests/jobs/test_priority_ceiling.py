"""Priorities are allowed per team: a team's jobs use priority classes up to the team's
``max_priority_value`` (0 unless a quota manager raised it), so a member cannot jump the
cohort's queue with the highest class."""

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from jobs.models import Job
from quotas.models import PriorityClass
from tenants.models import Team

pytestmark = pytest.mark.django_db

FIELDS = dict(name="train", image="ghcr.io/x/train:1", command=["python"], args=["train.py"])


@pytest.fixture
def classes(db):
    return {name: PriorityClass.objects.create(name=name, value=value)
            for name, value in (("low", -10), ("normal", 100), ("high", 1000))}


def test_member_cannot_pick_the_highest_priority_class(team, flavor, member, classes):
    with pytest.raises(ValidationError) as exc:
        Job.objects.submit(team=team, submitter=member, flavor=flavor, priority=classes["high"], **FIELDS)
    assert "may use priorities up to 0" in exc.value.message_dict["priority"][0]
    assert not Job.objects.exists()


def test_the_api_refuses_it_with_a_field_error(team, flavor, member, classes):
    client = APIClient()
    client.force_login(member)
    response = client.post("/api/v1/jobs", {"team": "vision", "flavor": "h100", "priority": "high", **FIELDS},
                           format="json")
    assert response.status_code == 400 and "priority" in response.json()["fields"]


def test_a_team_allowed_higher_priorities_uses_them_up_to_its_ceiling(team, flavor, member, classes):
    Team.objects.filter(pk=team.pk).update(max_priority_value=100)
    team.refresh_from_db()
    assert Job.objects.submit(team=team, submitter=member, flavor=flavor, priority=classes["normal"], **FIELDS)
    with pytest.raises(ValidationError):
        Job.objects.submit(team=team, submitter=member, flavor=flavor, priority=classes["high"],
                           **{**FIELDS, "name": "urgent"})


def test_low_and_default_priorities_need_no_permission(team, flavor, member, classes):
    Job.objects.submit(team=team, submitter=member, flavor=flavor, priority=classes["low"], **FIELDS)
    Job.objects.submit(team=team, submitter=member, flavor=flavor, priority=None, **{**FIELDS, "name": "plain"})
    assert Job.objects.count() == 2
