"""The permission map of docs/console.md, row by row: each action asked of each role
(the team's owner, member and viewer, a quota manager in no team, an outsider who owns
another team) through the rule the pages and the API call. A change of a rule that is not
also made in the documented table fails here."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from quotas.models import MemberCap, QuotaGrant, QuotaRequest
from tenants.manifests import EDITOR_ROLE, VIEWER_ROLE, render_team
from tenants.models import Team

from .builders import make_job

pytestmark = pytest.mark.django_db

ROLES = ["owner", "member", "viewer", "quota_manager", "outsider"]


@pytest.fixture
def world(team, flavor, owner):
    today = timezone.localdate()
    job = make_job(team, flavor)
    job.submit()
    request = QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=8, starts_on=today,
                                          ends_on=today + timedelta(days=7), justification="Deadline.")
    grant = QuotaGrant.objects.create(team=team, flavor=flavor, gpus=4, starts_at=timezone.now())
    MemberCap.objects.create(team=team, flavor=flavor, user=None, max_gpus=8)
    return {"team": team, "job": job, "request": request, "grant": grant}


def bound_to(team, user, role_name) -> bool:
    objects = render_team(team, list(team.memberships.select_related("user")))
    [binding] = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == role_name]
    return user.username in [s["name"] for s in binding["subjects"]]


# action -> (how it is asked, who may: owner member viewer quota_manager outsider)
MAP = {
    "see the team, its jobs, quotas, requests and grants": (
        lambda w, u, c: Team.objects.visible_to(u).filter(pk=w["team"].pk).exists()
        and Job.objects.visible_to(u).filter(pk=w["job"].pk).exists(),
        [True, True, True, True, False]),
    "submit a job": (lambda w, u, c: w["team"].can_submit(u), [True, True, False, False, False]),
    "cancel a job": (lambda w, u, c: w["job"].can_cancel(u), [True, True, False, False, False]),
    "add and remove members": (lambda w, u, c: w["team"].can_manage_members(u), [True, False, False, True, False]),
    "see the per-person caps and each person's use": (
        lambda w, u, c: MemberCap.objects.visible_to(u).filter(team=w["team"]).exists(),
        [True, True, True, True, False]),
    "set per-person caps": (lambda w, u, c: MemberCap.can_manage(w["team"], u), [True, False, False, True, False]),
    "ask for a quota change": (lambda w, u, c: QuotaRequest.can_request(w["team"], u), [True, False, False, False, False]),
    "approve or deny a request": (lambda w, u, c: w["request"].can_decide(u), [False, False, False, True, False]),
    "end a grant early": (lambda w, u, c: QuotaGrant.can_end(u), [False, False, False, True, False]),
    "drain a GPU pool and end a drain": (
        lambda w, u, c: c(u).get(reverse("console:drains")).status_code == 200, [False, False, False, True, False]),
    "use the quota console and audit trail": (
        lambda w, u, c: c(u).get(reverse("console:requests")).status_code == 200, [False, False, False, True, False]),
    "write in the admin (teams, members, quotas, grants)": (
        lambda w, u, c: c(u).get(reverse("admin:quotas_quotagrant_add")).status_code == 200,
        [False, False, False, True, False]),
    "kubectl: read, follow logs and port-forward in the namespace": (
        lambda w, u, c: bound_to(w["team"], u, EDITOR_ROLE), [True, True, False, False, False]),
    "kubectl: read and follow logs in the namespace": (
        lambda w, u, c: bound_to(w["team"], u, EDITOR_ROLE) or bound_to(w["team"], u, VIEWER_ROLE),
        [True, True, True, False, False]),
}
CASES = [pytest.param(action, role, allowed[i], id=f"{role} may {'' if allowed[i] else 'not '}{action}")
         for action, (_, allowed) in MAP.items() for i, role in enumerate(ROLES)]


@pytest.mark.parametrize("action, role, allowed", CASES)
def test_each_role_may_do_what_the_permission_map_says(request, world, client_for, action, role, allowed):
    ask, _ = MAP[action]
    assert ask(world, request.getfixturevalue(role), client_for) is allowed


def test_the_documented_map_lists_every_action():
    text = (Path(__file__).parents[1] / "docs" / "console.md").read_text()
    for action, (_, allowed) in MAP.items():
        row = f"| {action} | " + " | ".join("yes" if a else "no" for a in allowed) + " |"
        assert row in text, f"docs/console.md lacks the row: {row}"
