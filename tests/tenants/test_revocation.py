"""The cluster forgets nothing it should revoke: a team's slug cannot be renamed away from its
namespace, deleting a team offboards it, and every change of who is in a team (or whose
account still works) reaches the team's RoleBindings at once, not at the next sweep."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from jobs.tasks import reconcile_job
from tenants import tasks as team_tasks
from tenants.manifests import EDITOR_ROLE, VIEWER_ROLE, render_team
from tenants.models import Membership, Team

from ..builders import make_job, make_quota, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def reconciles_now(monkeypatch):
    """A reconcile asked for after commit runs at once, in this process, on the fake cluster."""
    asked = []

    def run(pk):
        asked.append(pk)
        team_tasks.reconcile_team.apply(args=(pk,))

    monkeypatch.setattr(team_tasks.reconcile_team, "delay", run)
    return asked


def bound(fake, role: str) -> list[str]:
    [binding] = [o for o in fake.stored(kind="RoleBinding") if o["metadata"]["name"] == role]
    return [subject["name"] for subject in binding["subjects"]]


def on_the_cluster(fake, team):
    team_tasks.reconcile_team(team.pk)
    assert fake.stored(kind="Namespace") != []


# --- the slug is fixed once the team exists ---------------------------------------------------
def test_renaming_a_team_slug_is_refused_by_model_validation(team):
    team.slug = "renamed"
    with pytest.raises(ValidationError) as exc:
        team.full_clean()
    assert "cannot change" in exc.value.message_dict["slug"][0]
    with pytest.raises(ValidationError):
        team.save()
    assert Team.objects.get(pk=team.pk).slug == "vision"


def test_renaming_a_team_slug_in_the_admin_leaves_the_namespace_where_it_is(client, quota_manager, team, fake):
    on_the_cluster(fake, team)
    client.force_login(quota_manager)
    url = reverse("admin:tenants_team_change", args=[team.pk])
    assert "slug" not in client.get(url).context["adminform"].form.fields  # shown read-only
    response = client.post(url, {
        "slug": "renamed", "display_name": "Vision", "description": "", "max_priority_value": 0,
        **inline_management("memberships", team.memberships.all()), **inline_management("quotas", []),
    })
    assert response.status_code == 302
    assert Team.objects.get(pk=team.pk).slug == "vision"
    team_tasks.reconcile_team(team.pk)
    assert [o["metadata"]["name"] for o in fake.stored(kind="Namespace")] == ["team-vision"]


def test_a_new_team_still_picks_its_slug_in_the_admin(client, quota_manager):
    client.force_login(quota_manager)
    response = client.post(reverse("admin:tenants_team_add"), {
        "slug": "robotics", "display_name": "Robotics", "description": "", "max_priority_value": 0,
        **inline_management("memberships", []), **inline_management("quotas", []),
    })
    assert response.status_code == 302
    assert Team.objects.filter(slug="robotics").exists()


# --- deleting a team offboards it ----------------------------------------------------------------
def test_deleting_team_in_admin_offboards_it(client, quota_manager, team, flavor, fake, reconciles_now,
                                              django_capture_on_commit_callbacks):
    make_quota(team, flavor)
    job = make_job(team, flavor)
    job.submit()
    on_the_cluster(fake, team)
    reconcile_job(job.pk)
    client.force_login(quota_manager)
    url = reverse("admin:tenants_team_delete", args=[team.pk])
    confirmation = client.get(url)
    assert confirmation.status_code == 200 and b"team-vision" in confirmation.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert fake.stored() == []  # namespace, bindings, queues and workloads
    assert not Team.objects.filter(pk=team.pk).exists()
    [marked] = Team.history.filter(id=team.pk, status=Team.Status.DELETING, history_type="~")
    assert marked.history_user == quota_manager


def test_deleting_a_team_in_the_admin_without_a_cluster_keeps_it_until_offboarded(client, quota_manager, team):
    client.force_login(quota_manager)
    client.post(reverse("admin:tenants_team_delete", args=[team.pk]), {"post": "yes"})
    team.refresh_from_db()
    assert team.status == Team.Status.DELETING  # the next reconcile with a cluster offboards it


# --- people's access follows at once -------------------------------------------------------------
def test_deactivated_user_leaves_rolebindings(team, member, owner):
    member.is_active = False
    member.save()
    objects = render_team(team, list(team.memberships.select_related("user")))
    [editors] = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == EDITOR_ROLE]
    assert [s["name"] for s in editors["subjects"]] == [owner.username]


def test_deactivating_a_user_reconciles_their_teams_at_once(team, member, fake, reconciles_now,
                                                            django_capture_on_commit_callbacks):
    on_the_cluster(fake, team)
    assert member.username in bound(fake, EDITOR_ROLE)
    with django_capture_on_commit_callbacks(execute=True):
        member.is_active = False
        member.save()
    assert reconciles_now == [team.pk]
    assert member.username not in bound(fake, EDITOR_ROLE)


def test_a_login_does_not_reconcile_anything(team, member, client, reconciles_now, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        client.force_login(member)  # saves last_login only
    assert reconciles_now == []


def test_editing_an_account_without_deactivating_it_reconciles_nothing(team, member, reconciles_now,
                                                                      django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        member.first_name = "Max"
        member.save()
    assert reconciles_now == []


def test_a_reactivated_account_comes_back_into_the_rolebindings(team, member, fake, reconciles_now,
                                                               django_capture_on_commit_callbacks):
    member.is_active = False
    member.save()
    on_the_cluster(fake, team)
    assert member.username not in bound(fake, EDITOR_ROLE)
    with django_capture_on_commit_callbacks(execute=True):
        member.is_active = True
        member.save()
    assert member.username in bound(fake, EDITOR_ROLE)


def test_adding_member_reconciles_team_at_once(client_for, owner, team, fake, reconciles_now,
                                               django_capture_on_commit_callbacks):
    on_the_cluster(fake, team)
    newcomer = make_user("nina")
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(reverse("console:member-add", args=[team.slug]),
                                          {"username": "nina", "role": "member"})
    assert response.status_code == 302
    assert newcomer.username in bound(fake, EDITOR_ROLE)


def test_removing_member_reconciles_team_at_once(client_for, owner, member, team, fake, reconciles_now,
                                                 django_capture_on_commit_callbacks):
    on_the_cluster(fake, team)
    membership = team.memberships.get(user=member)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(reverse("console:member-remove", args=[team.slug, membership.pk]))
    assert response.status_code == 302
    assert member.username not in bound(fake, EDITOR_ROLE)


def test_changing_a_role_reconciles_team_at_once(member, team, fake, reconciles_now, django_capture_on_commit_callbacks):
    on_the_cluster(fake, team)
    with django_capture_on_commit_callbacks(execute=True):
        membership = team.memberships.get(user=member)
        membership.role = Membership.Role.VIEWER
        membership.save()
    assert member.username not in bound(fake, EDITOR_ROLE)
    assert member.username in bound(fake, VIEWER_ROLE)


def test_deleting_a_user_reconciles_their_teams_at_once(member, team, fake, reconciles_now,
                                                        django_capture_on_commit_callbacks):
    on_the_cluster(fake, team)
    with django_capture_on_commit_callbacks(execute=True):
        member.delete()
    assert member.username not in bound(fake, EDITOR_ROLE)


# --- a team keeps an owner, in the admin too -----------------------------------------------------
def inline_management(prefix: str, memberships, changes: dict | None = None) -> dict:
    """The POST data of an admin inline with its rows as they are, but for ``changes``
    (membership pk -> {"role": ..., "delete": True})."""
    changes = changes or {}
    rows = list(memberships)
    data = {f"{prefix}-TOTAL_FORMS": len(rows), f"{prefix}-INITIAL_FORMS": len(rows),
            f"{prefix}-MIN_NUM_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000}
    for i, m in enumerate(rows):
        data.update({f"{prefix}-{i}-id": m.pk, f"{prefix}-{i}-team": m.team_id, f"{prefix}-{i}-user": m.user_id,
                     f"{prefix}-{i}-role": changes.get(m.pk, {}).get("role", m.role)})
        if changes.get(m.pk, {}).get("delete"):
            data[f"{prefix}-{i}-DELETE"] = "on"
    return data


def test_the_admin_inline_cannot_remove_the_last_owner(client, quota_manager, team, owner):
    client.force_login(quota_manager)
    ownership = team.memberships.get(user=owner)
    response = client.post(reverse("admin:tenants_team_change", args=[team.pk]), {
        "display_name": "Vision", "description": "", "max_priority_value": 0,
        **inline_management("memberships", team.memberships.order_by("pk"), {ownership.pk: {"delete": True}}),
        **inline_management("quotas", []),
    })
    assert response.status_code == 200
    assert b"always keeps an owner" in response.content
    assert team.memberships.filter(user=owner, role=Membership.Role.OWNER).exists()


def test_the_membership_admin_cannot_demote_or_delete_the_last_owner(client, quota_manager, team, owner):
    client.force_login(quota_manager)
    ownership = team.memberships.get(user=owner)
    response = client.post(reverse("admin:tenants_membership_change", args=[ownership.pk]),
                           {"team": team.pk, "user": owner.pk, "role": "member"})
    assert response.status_code == 200 and b"always keeps an owner" in response.content
    response = client.post(reverse("admin:tenants_membership_delete", args=[ownership.pk]), {"post": "yes"})
    assert response.status_code == 200  # Django's "cannot delete: protected" page
    ownership.refresh_from_db()
    assert ownership.role == Membership.Role.OWNER
