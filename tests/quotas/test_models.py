"""Flavor and quota rules: names, resource names, JSON shapes, limits and constraints."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from quotas.models import Cohort, GpuFlavor, PriorityClass, Quota

from ..builders import make_flavor, make_quota

pytestmark = pytest.mark.django_db


def flavor_errors(**fields) -> dict:
    base = dict(name="h100", resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8)
    base.update(fields)
    try:
        GpuFlavor(**base).full_clean()
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_a_well_formed_flavor_is_valid():
    assert flavor_errors(
        node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        node_taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        cost_per_gpu_hour="3.50",
    ) == {}


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("name", "H100", "lowercase"),
        ("name", "h100_pool", "lowercase"),
        ("resource_name", "gpu", "extended resource name"),
        ("resource_name", "nvidia.com/", "extended resource name"),
        ("resource_name", "nvidia com/gpu", "extended resource name"),
        ("gpus_per_node", 0, "greater than or equal to 1"),
        ("node_labels", {"bad key!": "x"}, "not a valid label key"),
        ("node_labels", {"pool": "has space"}, "value of label 'pool'"),
        ("node_labels", ["not", "a", "dict"], "mapping"),
        ("tolerations", [{"key": "k", "operator": "Sometimes"}], "Invalid tolerations at 0/operator"),
        ("tolerations", [{"key": "k", "privileged": True}], "Additional properties"),
        ("tolerations", {"key": "k"}, "is not of type 'array'"),
        ("node_taints", [{"key": "k"}], "'effect' is a required property"),
        ("cost_per_gpu_hour", "-1", "greater than or equal to 0"),
    ],
)
def test_bad_flavor_fields_get_field_level_messages(field, value, message):
    errors = flavor_errors(**{field: value})
    assert field in errors
    assert message in " ".join(errors[field])


def test_mig_resource_names_are_accepted():
    assert flavor_errors(name="mig-1g-10gb", resource_name="nvidia.com/mig-1g.10gb", gpu_sharing="mig",
                         gpu_memory_gib=10) == {}


def test_flavor_constraints_hold_in_the_database():
    flavor = make_flavor("h100")
    with pytest.raises(IntegrityError):
        GpuFlavor.objects.filter(pk=flavor.pk).update(scheduler="slurm")


def test_quota_is_unique_per_team_and_flavor(team, flavor):
    make_quota(team, flavor)
    with pytest.raises(IntegrityError):
        make_quota(team, flavor)


def test_lending_more_than_nominal_is_refused(team, flavor):
    cohort = Cohort.objects.create(name="research")
    quota = Quota(team=team, flavor=flavor, cohort=cohort, nominal_gpus=4, lending_limit_gpus=6,
                  cpu_cores=8, memory_gib=64)
    with pytest.raises(ValidationError) as exc:
        quota.full_clean()
    assert exc.value.message_dict["lending_limit_gpus"] == ["Cannot lend more than the nominal quota."]
    with pytest.raises(IntegrityError, match="quota_lending_within_nominal"):
        quota.save()


def test_borrowing_without_a_cohort_is_refused(team, flavor):
    quota = Quota(team=team, flavor=flavor, nominal_gpus=4, borrowing_limit_gpus=4, cpu_cores=8, memory_gib=64)
    with pytest.raises(ValidationError) as exc:
        quota.full_clean()
    assert "pick a cohort" in exc.value.message_dict["borrowing_limit_gpus"][0]
    with pytest.raises(IntegrityError, match="quota_limits_need_cohort"):
        quota.save()


def test_negative_quota_cannot_be_stored(team, flavor):
    quota = make_quota(team, flavor)
    with pytest.raises(IntegrityError):
        Quota.objects.filter(pk=quota.pk).update(nominal_gpus=-1)


def test_quotas_visible_only_to_their_team(team, flavor, owner, outsider, quota_manager):
    quota = make_quota(team, flavor)
    assert list(Quota.objects.visible_to(owner)) == [quota]
    assert list(Quota.objects.visible_to(outsider)) == []
    assert list(Quota.objects.visible_to(quota_manager)) == [quota]


def test_priority_class_value_is_bounded():
    with pytest.raises(ValidationError) as exc:
        PriorityClass(name="urgent", value=2_000_000_000).full_clean()
    assert "value" in exc.value.message_dict
    with pytest.raises(IntegrityError, match="priority_value_in_range"):
        PriorityClass.objects.create(name="urgent", value=2_000_000_000)


def test_priority_class_name_is_dns1123():
    with pytest.raises(ValidationError) as exc:
        PriorityClass(name="High Priority", value=10).full_clean()
    assert "name" in exc.value.message_dict


def test_flavor_in_use_cannot_be_deleted(team, flavor):
    make_quota(team, flavor)
    from django.db.models import ProtectedError

    with pytest.raises(ProtectedError):
        flavor.delete()
