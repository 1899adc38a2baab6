"""The database's check constraints on jobs and the model's validation say the same thing.

``Job.validate_constraints`` leaves the check constraints out of ``full_clean`` (each would
cost the database three round trips on every submit), because the fields' validators and
``Job.clean`` already refuse what they refuse. These tests hold the two to each other: every
row a check constraint refuses is refused by validation first, with a field message, so a
submission never reaches an IntegrityError (a 500) through them.
"""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from jobs.lifecycle import State
from jobs.models import Job

from ..builders import build_job, make_job, make_team

pytestmark = pytest.mark.django_db

CHECKS = {c.name for c in Job._meta.constraints if isinstance(c, models.CheckConstraint)}

# For each check constraint, rows it refuses (and which field's validation says so).
VIOLATIONS = {
    "job_workers_in_range": [(dict(workers=0), "workers"), (dict(workers=513), "workers")],
    "job_gpus_in_range": [(dict(gpus_per_worker=0), "gpus_per_worker"),
                          (dict(gpus_per_worker=257), "gpus_per_worker")],
    "job_inference_shape": [
        (dict(kind="inference", port=None, min_replicas=1, max_replicas=1), "port"),
        (dict(kind="inference", port=8000, min_replicas=0, max_replicas=1), "min_replicas"),
        (dict(kind="inference", port=8000, min_replicas=3, max_replicas=2), "max_replicas"),
        (dict(kind="inference", port=8000, min_replicas=1, max_replicas=513), "max_replicas"),
        (dict(kind="inference", port=8000, min_replicas=1, max_replicas=1, workers=2), "workers"),
    ],
    "job_state_valid": [(dict(state="lost"), "state")],
    "job_autoscale_metric_valid": [(dict(autoscale_metric="mem"), "autoscale_metric")],
}


def test_every_check_constraint_has_its_violations_listed():
    assert set(VIOLATIONS) == CHECKS


@pytest.mark.parametrize("constraint, fields, field", [
    (name, fields, field) for name, cases in VIOLATIONS.items() for fields, field in cases
])
def test_validation_refuses_what_the_database_refuses(team, flavor, constraint, fields, field):
    job = build_job(team, flavor, **fields)
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert field in refused.value.message_dict
    # ... and the database does refuse it, by that constraint (so the case is a real one).
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        job.save()


def test_full_clean_still_checks_that_live_names_are_unique(team, flavor):
    build_job(team, flavor, name="twin").save()
    with pytest.raises(ValidationError, match="already has a live job with this name") as raised:
        build_job(team, flavor, name="twin").full_clean()
    assert raised.value.message_dict == {"name": ["The team already has a live job with this name."]}


def test_the_live_name_check_follows_the_constraint(team, flavor):
    """The one check run in Python asks what the database's conditional constraint refuses:
    a live job's name, in the same team; a finished job, another team, the job itself and
    a finished newcomer all pass."""
    other_team = make_team()
    live = make_job(team, flavor, name="twin")
    done = make_job(team, flavor, name="done")
    Job.objects.filter(pk=done.pk).update(state=State.FAILED)
    live.full_clean()  # itself
    build_job(team, flavor, name="done").full_clean()  # the old one finished
    build_job(other_team, flavor, name="twin").full_clean()  # another team's names are its own
    build_job(team, flavor, name="twin", state=State.SUCCEEDED).full_clean()  # final rows are not held to it
    build_job(team, flavor, name="twin").full_clean(exclude=["name"])  # a form without the field
    with pytest.raises(ValidationError):
        build_job(team, flavor, name="twin").full_clean()


def test_full_clean_still_checks_a_related_row_given_by_id(team, flavor):
    job = build_job(team, flavor)
    job.flavor_id, job._state.fields_cache = 999_999, {}
    with pytest.raises(ValidationError) as refused:
        job.clean_fields()
    assert "flavor" in refused.value.message_dict
