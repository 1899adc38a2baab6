"""The quota page: quotas of the person's teams, with usage."""

import pytest
from django.urls import reverse

from ..builders import make_quota

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who", ["owner", "member", "viewer"])
def test_team_people_see_their_quotas(request, client_for, quota, who):
    html = client_for(request.getfixturevalue(who)).get(reverse("console:quotas")).content.decode()
    assert "vision" in html and "0 in use / 8 quota" in html


def test_outsiders_do_not_see_other_teams_quotas(client_for, outsider, quota):
    html = client_for(outsider).get(reverse("console:quotas")).content.decode()
    assert "/teams/vision/" not in html


def test_quota_managers_see_every_quota(client_for, quota_manager, quota, outsider, flavor):
    from tenants.models import Team

    make_quota(Team.objects.get(slug="other-team"), flavor, nominal_gpus=2)
    html = client_for(quota_manager).get(reverse("console:quotas")).content.decode()
    assert "/teams/vision/" in html and "/teams/other-team/" in html
