"""The sweep applies grants that start and lapses those that end, and the cluster follows."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from gpuplatform.tasks import sweep
from quotas import actions
from quotas.models import Cohort, Quota, QuotaGrant, Scheduler

from ..builders import make_flavor, make_quota, make_team, render_team_and_quotas

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def run_sweep(clock, moment, capture):
    clock(moment)
    with capture(execute=True):
        return sweep.apply().get()


def cluster_queue_gpus(fake, name="team-vision-h100") -> str:
    [cq] = [o for o in fake.stored(kind="ClusterQueue") if o["metadata"]["name"] == name]
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]


def namespace_gpus(fake) -> str:
    [rq] = fake.stored(kind="ResourceQuota")
    return rq["spec"]["hard"]["requests.nvidia.com/gpu"]


def rendered_nominal(team) -> str:
    team.refresh_from_db()
    [cq] = [o for o in render_team_and_quotas(team) if o["kind"] == "ClusterQueue"]
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]


def test_the_sweep_applies_a_grant_that_starts_and_lapses_it_when_it_ends(
    fake, team, flavor, quota, clock, inline_tasks, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    run_sweep(clock, T0, capture)
    assert cluster_queue_gpus(fake) == "8" and namespace_gpus(fake) == "8"

    actions.grant(team=team, flavor=flavor, gpus=8, cpu_cores=96, memory_gib=960,
                 starts_at=T0 + DAY, ends_at=T0 + 2 * DAY, now=T0)
    run_sweep(clock, T0 + DAY - timedelta(seconds=1), capture)
    assert rendered_nominal(team) == "8" and cluster_queue_gpus(fake) == "8"

    run_sweep(clock, T0 + DAY, capture)
    assert rendered_nominal(team) == "16"
    assert cluster_queue_gpus(fake) == "16" and namespace_gpus(fake) == "16"
    assert Quota.objects.get(pk=quota.pk).cpu_cores == 192

    run_sweep(clock, T0 + 2 * DAY, capture)
    assert rendered_nominal(team) == "8"
    assert cluster_queue_gpus(fake) == "8" and namespace_gpus(fake) == "8"


def test_a_volcano_queue_follows_its_grants(fake, team, clock, inline_tasks, django_capture_on_commit_callbacks):
    a100 = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    make_quota(team, a100, nominal_gpus=4)
    actions.grant(team=team, flavor=a100, gpus=4, cpu_cores=48, memory_gib=480,
                 starts_at=T0, ends_at=T0 + DAY, now=T0 - DAY)
    run_sweep(clock, T0, django_capture_on_commit_callbacks)
    [queue] = fake.stored(kind="Queue")
    assert queue["spec"]["deserved"]["nvidia.com/gpu"] == "8"
    run_sweep(clock, T0 + DAY, django_capture_on_commit_callbacks)
    [queue] = fake.stored(kind="Queue")
    assert queue["spec"]["deserved"]["nvidia.com/gpu"] == "4"


def test_the_grant_step_reconciles_only_teams_whose_quota_changed(team, flavor, quota, reconciles,
                                                                   django_capture_on_commit_callbacks):
    quiet = make_team("quiet")
    make_quota(quiet, flavor, nominal_gpus=2)
    actions.grant(team=team, flavor=flavor, gpus=2, cpu_cores=0, memory_gib=0, starts_at=T0, now=T0 - DAY)
    with django_capture_on_commit_callbacks(execute=True):
        changed = actions.apply_grants(T0)
    assert changed == [team.pk] and reconciles == [team.pk]
    with django_capture_on_commit_callbacks(execute=True):
        assert actions.apply_grants(T0 + DAY) == []
    assert reconciles == [team.pk]


def test_the_first_grant_keeps_what_the_quota_had_as_a_standing_grant(team, flavor, quota, reconciles):
    actions.grant(team=team, flavor=flavor, gpus=4, cpu_cores=48, memory_gib=480, starts_at=T0, ends_at=T0 + DAY, now=T0 - DAY)
    standing = QuotaGrant.objects.get(team=team, flavor=flavor, request=None, ends_at=None)
    assert (standing.gpus, standing.cpu_cores, standing.memory_gib, standing.applied) == (8, 96, 960, True)
    actions.apply_grants(T0)
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 12
    actions.apply_grants(T0 + DAY)
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 8


def test_a_grant_for_a_flavor_without_quota_creates_one(team, reconciles):
    a100 = make_flavor("a100")
    actions.grant(team=team, flavor=a100, gpus=4, cpu_cores=48, memory_gib=480, starts_at=T0, now=T0)
    actions.apply_grants(T0)
    quota = Quota.objects.get(team=team, flavor=a100)
    assert (quota.nominal_gpus, quota.cpu_cores, quota.memory_gib) == (4, 48, 480)


def test_a_grant_taking_more_than_the_quota_has_floors_it_at_zero(team, flavor, quota, reconciles):
    actions.grant(team=team, flavor=flavor, gpus=-20, cpu_cores=-240, memory_gib=-2400,
                 starts_at=T0, ends_at=T0 + DAY, now=T0 - DAY)
    actions.apply_grants(T0)
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.cpu_cores, quota.memory_gib) == (0, 0, 0)
    actions.apply_grants(T0 + DAY)
    quota.refresh_from_db()
    assert quota.nominal_gpus == 8


def test_borrowing_limits_and_lending_stay_valid_in_a_cohort(team, flavor, reconciles):
    research = Cohort.objects.create(name="research")
    quota = make_quota(team, flavor, nominal_gpus=8, cohort=research, borrowing_limit_gpus=None, lending_limit_gpus=8)
    actions.grant(team=team, flavor=flavor, gpus=-4, borrowing_limit_gpus=2, cpu_cores=0, memory_gib=0,
                 starts_at=T0, ends_at=T0 + DAY, now=T0 - DAY)
    actions.apply_grants(T0)
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit_gpus, quota.lending_limit_gpus) == (4, 2, 4)


def test_grants_are_applied_once(team, flavor, quota, reconciles):
    actions.grant(team=team, flavor=flavor, gpus=4, cpu_cores=0, memory_gib=0, starts_at=T0, now=T0)
    actions.apply_grants(T0)
    actions.apply_grants(T0 + DAY)
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 12
    assert list(QuotaGrant.objects.filter(team=team).values_list("applied", flat=True)) == [True, True]


def test_the_quota_change_is_in_the_audit_trail_with_the_grants_named(team, flavor, quota, reconciles):
    grant = actions.grant(team=team, flavor=flavor, gpus=4, cpu_cores=0, memory_gib=0, starts_at=T0, now=T0)
    actions.apply_grants(T0)
    latest = Quota.objects.get(pk=quota.pk).history.first()
    assert latest.history_type == "~" and f"#{grant.pk}" in latest.history_change_reason
    assert latest.diff_against(latest.prev_record).changes[0].new == 12


def test_a_quota_without_grants_is_left_to_the_admin(team, flavor, quota, reconciles):
    assert actions.apply_grants(T0, team=team, flavor=flavor) == []
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 8


def test_the_admin_shows_grant_managed_numbers_read_only_and_applies_grant_edits(
    client, quota_manager, team, flavor, quota, reconciles
):
    from django.urls import reverse

    client.force_login(quota_manager)
    editable = client.get(reverse("admin:quotas_quota_change", args=[quota.pk])).content.decode()
    assert 'name="nominal_gpus"' in editable
    grant = actions.grant(team=team, flavor=flavor, gpus=4, cpu_cores=0, memory_gib=0,
                         starts_at=timezone.now() - DAY, now=timezone.now() - DAY)
    managed = client.get(reverse("admin:quotas_quota_change", args=[quota.pk])).content.decode()
    assert 'name="nominal_gpus"' not in managed
    response = client.post(reverse("admin:quotas_quotagrant_change", args=[grant.pk]), {
        "team": team.pk, "flavor": flavor.pk, "gpus": 6, "cpu_cores": 0, "memory_gib": 0,
        "starts_at_0": (timezone.now() - DAY).strftime("%Y-%m-%d"), "starts_at_1": "00:00:00", "note": "",
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 14
