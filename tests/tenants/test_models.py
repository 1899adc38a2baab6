"""Team and membership rules: slugs, namespaces, roles, visibility, constraints."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, connections
from django.test import override_settings

from tenants.models import Membership, Team
from tenants.roles import QUOTA_MANAGER_GROUP, is_quota_manager

from ..builders import make_team, make_user

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


def test_a_reconcile_that_ends_after_offboarding_started_does_not_bring_the_team_back(team, quota_manager):
    stale = Team.objects.get(pk=team.pk)  # what a reconcile that was already running holds
    assert team.start_offboarding(quota_manager) is True
    assert stale.set_status(Team.Status.READY) is False
    team.refresh_from_db()
    assert team.status == Team.Status.DELETING and "asked by quinn" in team.status_message


def test_offboarding_twice_changes_nothing_the_second_time(team, quota_manager):
    assert team.start_offboarding(quota_manager) is True
    assert team.start_offboarding(quota_manager) is False
    assert team.history.filter(status=Team.Status.DELETING).count() == 1


def test_the_last_owner_cannot_remove_themselves(team, owner):
    with pytest.raises(ValidationError, match="olivia is the last owner of vision"):
        team.memberships.get(user=owner).remove()
    assert team.memberships.filter(user=owner).exists()


@pytest.mark.django_db(transaction=True)
def test_owners_removing_each_other_at_once_leave_exactly_one_owner():
    """Eight owners, each thread with its own connection removing the next one: every
    check passes before any delete unless the check and the delete hold a lock."""
    if connection.vendor != "postgresql":
        pytest.skip("needs a database with row locks and real concurrency")
    owners = [make_user(f"owner{number}") for number in range(8)]
    team = make_team("crowd", members=dict.fromkeys(owners, Membership.Role.OWNER))
    barrier = threading.Barrier(len(owners))
    outcomes: list[str] = []

    def remove(user):
        theirs = Membership.objects.select_related("team", "user").get(team=team, user=user)
        barrier.wait()
        try:
            theirs.remove()
            outcomes.append("removed")
        except ValidationError:
            outcomes.append("refused")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=remove, args=(owners[(i + 1) % len(owners)],)) for i in range(len(owners))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["refused"] + ["removed"] * (len(owners) - 1)
    assert team.memberships.filter(role=Membership.Role.OWNER).count() == 1
