"""One bad quota grant does not stop the sweep: the quota whose grants fail is logged,
reported and left for the next sweep, and every other team's grants still apply."""

import logging
from datetime import timedelta

import pytest
from django.db import DataError
from django.utils import timezone

from gpuplatform.tasks import sweep
from quotas import actions
from quotas.models import Quota, QuotaGrant

from ..builders import make_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_teams_with_grants(flavor):
    started = timezone.now() - timedelta(hours=1)
    teams = [make_team("good"), make_team("bad")]
    for team in teams:
        QuotaGrant.objects.create(team=team, flavor=flavor, gpus=8, cpu_cores=96, memory_gib=960, starts_at=started)
    return teams


def test_one_bad_quota_grant_does_not_stop_the_sweep(monkeypatch, caplog, flavor, two_teams_with_grants):
    good, bad = two_teams_with_grants
    write = actions._write_quota

    def failing_for_bad(team, *args):  # the database refuses this one team's row
        if team.pk == bad.pk:
            raise DataError("integer out of range")
        return write(team, *args)

    monkeypatch.setattr(actions, "_write_quota", failing_for_bad)
    with caplog.at_level(logging.ERROR, logger="quotas.actions"):
        result = sweep.apply().get()

    assert Quota.objects.get(team=good, flavor=flavor).nominal_gpus == 8  # the others go on
    assert not Quota.objects.filter(team=bad).exists()
    assert result["grant_failures"] == [f"team #{bad.pk}, flavor #{flavor.pk}: DataError: integer out of range"]
    assert f"grants of team #{bad.pk} on flavor #{flavor.pk} could not be applied" in caplog.text
    assert not QuotaGrant.objects.get(team=bad).applied  # so the next sweep tries again

    monkeypatch.setattr(actions, "_write_quota", write)
    assert sweep.apply().get()["grant_failures"] == []
    assert Quota.objects.get(team=bad, flavor=flavor).nominal_gpus == 8


def test_an_approval_still_shows_its_error(monkeypatch, flavor, two_teams_with_grants):
    _, bad = two_teams_with_grants
    monkeypatch.setattr(actions, "_write_quota", lambda *a: (_ for _ in ()).throw(DataError("integer out of range")))
    with pytest.raises(DataError):
        actions.apply_grants(team=bad, flavor=flavor)  # not swallowed outside the sweep
