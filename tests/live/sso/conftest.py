"""Fixtures of the single sign-on tests: recorded team reconciles and IdP groups mapped to
roles (the IdP itself: tests/fixtures/idp.py; the code flow: tests/support/sso.py)."""

import pytest

from tenants import tasks as team_tasks
from tenants.models import Membership
from tenants.models.identities import GroupMapping

from ...builders import make_team


@pytest.fixture
def reconciles(monkeypatch):
    """The teams whose reconcile was asked for (after commit)."""
    asked = []
    monkeypatch.setattr(team_tasks.reconcile_team, "delay", asked.append)
    return asked


@pytest.fixture
def mapped(db):
    """Teams vision and nlp, and the IdP groups that give roles in them or make quota managers."""
    vision, nlp = make_team("vision"), make_team("nlp")
    for group, team, role in [
        ("ml-vision", vision, Membership.Role.OWNER),
        ("ml-vision-readers", vision, Membership.Role.VIEWER),
        ("ml-nlp", nlp, Membership.Role.MEMBER),
        ("platform-admins", None, GroupMapping.Role.QUOTA_MANAGER),
    ]:
        GroupMapping.objects.create(group=group, team=team, role=role)
    return vision, nlp
