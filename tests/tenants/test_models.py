"""Team and membership rules: slugs, namespaces, roles, visibility, constraints."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.test import override_settings

from tenants.models import Membership, Team
from tenants.roles import QUOTA_MANAGER_GROUP, is_quota_manager

from ..builders import make_user

pytestmark = pytest.mark.django_db


def test_namespace_name_is_prefix_plus_slug(team):
    assert team.namespace_name == "team-vision"


@override_settings(TEAM_NAMESPACE_PREFIX="gpu-")
def test_namespace_name_follows_configured_prefix(team):
    assert team.namespace_name == "gpu-vision"


@pytest.mark.parametrize("slug", ["Vision", "vision_team", "-vision", "vision-", "vis ion", "ü-team", ""])
def test_slug_must_be_a_dns1123_label(slug):
    with pytest.raises(ValidationError) as exc:
        Team(slug=slug, display_name="X").full_clean()
    assert "slug" in exc.value.message_dict


@pytest.mark.parametrize("slug", ["vision", "a", "team-42", "x" * 40])
def test_valid_slugs_pass(slug):
    Team(slug=slug, display_name="X").full_clean()


@override_settings(TEAM_NAMESPACE_PREFIX="a-very-long-namespace-prefix-for-teams-")
def test_slug_must_leave_room_for_the_namespace_prefix():
    with pytest.raises(ValidationError) as exc:
        Team(slug="x" * 30, display_name="X").full_clean()
    assert "fits in 63" in exc.value.message_dict["slug"][0]


def test_slug_is_unique(team):
    with pytest.raises(IntegrityError):
        Team.objects.create(slug="vision", display_name="Again")


def test_unknown_status_is_refused_by_the_database(team):
    with pytest.raises(IntegrityError):
        Team.objects.filter(pk=team.pk).update(status="exploded")


def test_role_of_reports_each_persons_role(team, owner, member, viewer, outsider):
    assert team.role_of(owner) == "owner"
    assert team.role_of(member) == "member"
    assert team.role_of(viewer) == "viewer"
    assert team.role_of(outsider) is None


def test_only_owners_and_members_may_submit(team, owner, member, viewer, outsider):
    assert [team.can_submit(u) for u in (owner, member, viewer, outsider)] == [True, True, False, False]


def test_owners_and_quota_managers_manage_members(team, owner, member, viewer, outsider, quota_manager):
    assert team.can_manage_members(owner)
    assert team.can_manage_members(quota_manager)
    assert not any(team.can_manage_members(u) for u in (member, viewer, outsider))


def test_visible_to_shows_own_teams_only(team, owner, viewer, outsider):
    assert list(Team.objects.visible_to(owner)) == [team]
    assert list(Team.objects.visible_to(viewer)) == [team]
    assert team not in Team.objects.visible_to(outsider)


def test_quota_managers_see_every_team(team, outsider, quota_manager):
    assert set(Team.objects.visible_to(quota_manager)) == set(Team.objects.all())
    assert Team.objects.count() == 2


def test_anonymous_sees_no_team(team):
    from django.contrib.auth.models import AnonymousUser

    assert not Team.objects.visible_to(AnonymousUser()).exists()


def test_a_person_is_a_member_once_per_team(team, owner):
    with pytest.raises(IntegrityError):
        Membership.objects.create(team=team, user=owner, role="viewer")


def test_membership_role_must_be_known(team):
    with pytest.raises(IntegrityError):
        Membership.objects.create(team=team, user=make_user(), role="admin")


def test_set_status_writes_only_on_change(team):
    assert team.set_status(Team.Status.READY) is True
    assert team.set_status(Team.Status.READY) is False
    assert team.set_status(Team.Status.ERROR, "namespace forbidden") is True
    team.refresh_from_db()
    assert (team.status, team.status_message) == ("error", "namespace forbidden")


def test_quota_manager_group_exists_with_permissions_after_migrate():
    from django.contrib.auth.models import Group

    group = Group.objects.get(name=QUOTA_MANAGER_GROUP)
    codenames = set(group.permissions.values_list("codename", flat=True))
    assert {"change_quota", "add_gpuflavor", "change_team", "view_job"} <= codenames
    assert "change_job" not in codenames


def test_is_quota_manager_by_group_or_superuser(owner, quota_manager):
    admin = make_user("root", is_superuser=True)
    assert is_quota_manager(quota_manager)
    assert is_quota_manager(admin)
    assert not is_quota_manager(owner)

