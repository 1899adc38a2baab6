"""Job rules: what a valid job looks like, who may see and cancel it, and DB invariants."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from jobs.lifecycle import State
from jobs.models import Job

from ..builders import build_job, make_job

pytestmark = pytest.mark.django_db


def job_errors(team, flavor, **fields) -> dict:
    try:
        build_job(team, flavor, **fields).full_clean()
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_a_plain_training_job_is_valid(team, flavor):
    assert job_errors(team, flavor) == {}


@pytest.mark.parametrize(
    "fields, field, message",
    [
        (dict(gpus_per_worker=0), "gpus_per_worker", "greater than or equal to 1"),
        (dict(gpus_per_worker=16), "gpus_per_worker", "16 GPUs per worker, but nodes of flavor h100 have 8"),
        (dict(workers=0), "workers", "greater than or equal to 1"),
        (dict(name="My Job"), "name", "lowercase"),
        (dict(name="job_1"), "name", "lowercase"),
        (dict(name="x" * 41), "name", "at most 40 characters"),
        (dict(image="pytorch/pytorch latest"), "image", "cannot contain spaces"),
        (dict(image="pytorch\t:2"), "image", "cannot contain spaces"),
        (dict(image=""), "image", "cannot be blank"),
        (dict(env={"1BAD": "x"}), "env", "'1BAD' is not a valid variable name"),
        (dict(env={"MY-VAR": "x"}), "env", "'MY-VAR' is not a valid variable name"),
        (dict(env={"OK": 3}), "env", "must be text"),
        (dict(env={"MASTER_ADDR": "evil"}), "env", "MASTER_ADDR is set by the platform"),
        (dict(env={"NVIDIA_VISIBLE_DEVICES": "all"}), "env", "NVIDIA_VISIBLE_DEVICES would be read by the GPU runtime"),
        (dict(env={"nvidia_driver_capabilities": "all"}), "env", "would be read by the GPU runtime"),
        (dict(env={"AMD_VISIBLE_DEVICES": "all"}), "env", "AMD_VISIBLE_DEVICES would be read by the GPU runtime"),
        (dict(env=["A=1"]), "env", "mapping"),
        (dict(command="python train.py"), "command", "list of text"),
        (dict(args=[1, 2]), "args", "list of text"),
        (dict(cpu_per_worker=0), "cpu_per_worker", "greater than or equal to 0.1"),
        (dict(max_runtime_seconds=5), "max_runtime_seconds", "greater than or equal to 60"),
    ],
)
def test_nonsense_is_rejected_with_a_field_message(team, flavor, fields, field, message):
    errors = job_errors(team, flavor, **fields)
    assert field in errors, errors
    assert message in " ".join(errors[field])


def test_unicode_and_shell_characters_in_values_are_allowed(team, flavor):
    assert job_errors(team, flavor, args=["--caption", "naïve café; rm -rf / $(id)"],
                      env={"GREETING": "héllo `whoami` && true"}) == {}


def inference(**fields) -> dict:
    base = dict(kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=2, readiness_path="/healthz")
    base.update(fields)
    return base


def test_a_complete_inference_job_is_valid(team, flavor):
    assert job_errors(team, flavor, **inference()) == {}


@pytest.mark.parametrize(
    "fields, field, message",
    [
        (dict(port=None), "port", "needs the port"),
        (dict(port=70000), "port", "less than or equal to 65535"),
        (dict(min_replicas=None), "min_replicas", "smallest number of replicas"),
        (dict(min_replicas=3, max_replicas=2), "max_replicas", "at least the minimum"),
        (dict(workers=2), "workers", "leave workers at 1"),
        (dict(readiness_path="healthz"), "readiness_path", "starts with '/'"),
        (dict(autoscaling_target_cpu_percent=150), "autoscaling_target_cpu_percent", "less than or equal to 100"),
    ],
)
def test_incomplete_inference_job_is_rejected(team, flavor, fields, field, message):
    errors = job_errors(team, flavor, **inference(**fields))
    assert message in " ".join(errors[field])


def test_inference_shape_is_enforced_by_the_database(team, flavor):
    job = build_job(team, flavor, kind=Job.Kind.INFERENCE, port=None, min_replicas=1, max_replicas=1)
    with pytest.raises(IntegrityError, match="job_inference_shape"):
        job.save()


def test_zero_workers_cannot_be_stored(team, flavor):
    job = make_job(team, flavor)
    with pytest.raises(IntegrityError, match="job_workers_in_range"):
        Job.objects.filter(pk=job.pk).update(workers=0)


@pytest.mark.parametrize("fields, constraint", [
    (dict(workers=513), "job_workers_in_range"),
    (dict(gpus_per_worker=257), "job_gpus_in_range"),
    (dict(kind="inference", port=80, min_replicas=1, max_replicas=513), "job_inference_shape"),
])
def test_sizes_past_their_bounds_cannot_be_stored_even_around_validation(team, flavor, fields, constraint):
    job = make_job(team, flavor)
    with pytest.raises(IntegrityError, match=constraint):
        Job.objects.filter(pk=job.pk).update(**fields)


def test_name_is_unique_among_live_jobs_of_a_team(team, flavor):
    make_job(team, flavor, name="train")
    with pytest.raises(ValidationError) as exc:
        make_job(team, flavor, name="train")
    assert "already has a live job with this name" in str(exc.value)


def test_name_can_be_reused_once_the_old_job_is_final(team, flavor):
    old = make_job(team, flavor, name="train")
    Job.objects.filter(pk=old.pk).update(state=State.SUCCEEDED)
    assert make_job(team, flavor, name="train").pk != old.pk


def test_the_same_name_in_another_team_is_fine(team, flavor, outsider):
    make_job(team, flavor, name="train")
    other_team = outsider.memberships.get().team
    assert make_job(other_team, flavor, name="train").team == other_team


def test_jobs_visible_only_to_their_team(team, flavor, owner, member, viewer, outsider, quota_manager):
    job = make_job(team, flavor)
    for person in (owner, member, viewer, quota_manager):
        assert list(Job.objects.visible_to(person)) == [job]
    assert list(Job.objects.visible_to(outsider)) == []


def test_who_may_cancel(team, flavor, owner, member, viewer, outsider, quota_manager):
    job = make_job(team, flavor)
    assert [job.can_cancel(p) for p in (owner, member, viewer, outsider, quota_manager)] == [
        True, True, False, False, False,  # quota managers watch jobs; they do not stop them
    ]


def test_final_jobs_cannot_be_cancelled(team, flavor, owner):
    job = make_job(team, flavor)
    job.state = State.SUCCEEDED
    assert not job.can_cancel(owner)


@pytest.mark.parametrize(
    "fields, expected",
    [(dict(workers=4, gpus_per_worker=8), 32), (dict(**inference(max_replicas=3), gpus_per_worker=2), 6)],
    ids=["training: workers x gpus", "inference: max replicas x gpus"],
)
def test_total_gpus(team, flavor, fields, expected):
    assert build_job(team, flavor, **fields).total_gpus == expected
