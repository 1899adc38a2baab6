"""Per-person caps through the API (/api/v1/member-caps, and ``my_caps`` on a team): owners set
them from a session, everyone in the team reads them with each person's use, nobody outside
sees or changes them; a job over the cap submitted through the API (or cloned through it)
waits with the reason and shows it."""

import pytest

from jobs.lifecycle import AT_PERSONAL_CAP
from jobs.models import Job
from quotas.models import MemberCap

from ..builders import make_flavor, make_quota, make_team
from ..support.api import JOB_BODY, issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def released(monkeypatch):
    """Teams whose waiting jobs a cap's change asked to let go."""
    teams = []
    monkeypatch.setattr("jobs.actions.caps_changed", lambda team: teams.append(team.slug))
    return teams


def body(**fields):
    return {"team": "vision", "flavor": "h100", "max_gpus": 8, **fields}


def test_an_owner_sets_a_members_cap_and_a_team_default(client_as, owner, member, team, flavor, released):
    api = client_as(owner)
    own = api.post("/api/v1/member-caps", body(user=member.username, max_jobs=3), format="json")
    assert own.status_code == 201, own.json()
    assert {k: own.json()[k] for k in ("user", "max_gpus", "max_jobs", "held_gpus", "held_jobs", "set_by")} == {
        "user": member.username, "max_gpus": 8, "max_jobs": 3, "held_gpus": 0, "held_jobs": 0,
        "set_by": owner.username}
    default = api.post("/api/v1/member-caps", body(max_gpus=4), format="json")
    assert default.status_code == 201 and default.json()["user"] is None and default.json()["held_gpus"] is None
    changed = api.patch(f"/api/v1/member-caps/{own.json()['id']}", {"max_gpus": 16}, format="json")
    assert changed.status_code == 200 and changed.json()["max_gpus"] == 16
    assert api.delete(f"/api/v1/member-caps/{default.json()['id']}").status_code == 204
    assert list(MemberCap.objects.values_list("user__username", "max_gpus")) == [(member.username, 16)]
    assert released == ["vision"] * 4  # every change lets go what now fits
    history = MemberCap.history.filter(id=own.json()["id"]).order_by("history_id")
    assert [(h.max_gpus, h.history_user) for h in history] == [(8, owner), (16, owner)]


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_read_the_caps_but_cannot_set_them(client_as, request, owner, member, team, flavor,
                                                             who, released):
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    api = client_as(request.getfixturevalue(who))
    assert [c["id"] for c in api.get("/api/v1/member-caps").json()["results"]] == [cap.pk]
    refused = api.post("/api/v1/member-caps", body(user=member.username, max_gpus=64), format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["team"] == ["Only owners of vision set the caps of its people."]
    assert api.patch(f"/api/v1/member-caps/{cap.pk}", {"max_gpus": 64}, format="json").status_code == 403
    assert api.delete(f"/api/v1/member-caps/{cap.pk}").status_code == 403
    cap.refresh_from_db()
    assert cap.max_gpus == 8 and released == []


def test_an_outsider_neither_sees_nor_sets_a_teams_caps(client_as, outsider, member, team, flavor, released):
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    make_team("other", members={outsider: "owner"})
    api = client_as(outsider)
    assert api.get("/api/v1/member-caps").json()["results"] == []
    assert api.get(f"/api/v1/member-caps/{cap.pk}").status_code == 404
    refused = api.post("/api/v1/member-caps", body(user=member.username), format="json")
    assert refused.status_code == 400 and "team" in refused.json()["fields"]
    assert api.patch(f"/api/v1/member-caps/{cap.pk}", {"max_gpus": 64}, format="json").status_code == 404
    assert api.delete(f"/api/v1/member-caps/{cap.pk}").status_code == 404
    assert MemberCap.objects.get().max_gpus == 8


def test_a_token_reads_caps_but_writes_need_a_session(client_as, owner, member, team, flavor, released):
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    api = client_as(token=issue_token(owner, team=team))
    assert api.get(f"/api/v1/member-caps/{cap.pk}").status_code == 200
    assert api.post("/api/v1/member-caps", body(), format="json").status_code == 403
    assert api.patch(f"/api/v1/member-caps/{cap.pk}", {"max_gpus": 1}, format="json").status_code == 403


@pytest.mark.parametrize("fields, field, message", [
    ({"user": "nobody"}, "user", "Object with username=nobody does not exist."),
    ({"max_gpus": -1}, "max_gpus", "Ensure this value is greater than or equal to 0."),
    ({"max_jobs": 0}, "max_jobs", "Ensure this value is greater than or equal to 1."),
    ({"flavor": "b200"}, "flavor", "Object with name=b200 does not exist."),
], ids=["not a person of the team's", "negative", "no jobs at all", "unknown flavor"])
def test_bad_input_is_a_field_error(client_as, owner, team, flavor, fields, field, message, released):
    refused = client_as(owner).post("/api/v1/member-caps", body(**fields), format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"] == {field: [message]}
    assert not MemberCap.objects.exists()


def test_a_viewer_or_a_second_cap_is_refused_on_its_field(client_as, owner, member, viewer, team, flavor, released):
    api = client_as(owner)
    viewer_cap = api.post("/api/v1/member-caps", body(user=viewer.username), format="json")
    assert viewer_cap.json()["fields"] == {"user": ["Only the team's owners and members submit jobs: give a cap "
                                                    "to one of them."]}
    assert api.post("/api/v1/member-caps", body(user=member.username), format="json").status_code == 201
    again = api.post("/api/v1/member-caps", body(user=member.username, max_gpus=2), format="json")
    assert again.json()["fields"] == {"flavor": [f"{member.username} already has a cap on h100; change that one."]}


def test_a_person_of_another_team_cannot_be_named(client_as, owner, outsider, team, flavor, released):
    make_team("other", members={outsider: "member"})
    refused = client_as(owner).post("/api/v1/member-caps", body(user=outsider.username), format="json")
    assert refused.json()["fields"] == {"user": [f"Object with username={outsider.username} does not exist."]}


def test_a_member_sees_their_cap_and_use_on_the_team(client_as, member, team, flavor):
    make_quota(team, flavor, nominal_gpus=32)
    make_flavor("a100")
    MemberCap.objects.create(team=team, flavor=flavor, user=None, max_gpus=16)
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8, max_jobs=2)
    api = client_as(member)
    for name in ("one", "two"):
        assert api.post("/api/v1/jobs", {**JOB_BODY, "name": name}, format="json").status_code == 201
    assert api.get("/api/v1/teams/vision").json()["my_caps"] == [{
        "flavor": "h100", "max_gpus": 8, "max_jobs": 2, "team_default": False, "held_gpus": 8, "held_jobs": 1,
        "waiting_jobs": 1}]


def test_a_job_over_the_cap_through_the_api_waits_and_says_why(client_as, member, team, flavor):
    make_quota(team, flavor, nominal_gpus=32)
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    api = client_as(token=issue_token(member, team=team))
    assert api.post("/api/v1/jobs", {**JOB_BODY, "name": "first"}, format="json").status_code == 201
    waiting = api.post("/api/v1/jobs", {**JOB_BODY, "name": "second"}, format="json")
    assert waiting.status_code == 201
    shown = api.get(f"/api/v1/jobs/{waiting.json()['id']}").json()
    assert (shown["state"], shown["reason"]) == ("submitted", AT_PERSONAL_CAP)
    assert shown["message"].startswith("You hold 8 of your 8 h100 GPUs in team vision; this job needs 8.")
    listed = {j["name"]: j["reason"] for j in api.get("/api/v1/jobs").json()["results"]}
    assert listed["second"] == AT_PERSONAL_CAP
    too_big = api.post("/api/v1/jobs", {**JOB_BODY, "name": "third", "workers": 3}, format="json")
    assert too_big.status_code == 400 and list(too_big.json()["fields"]) == ["gpus_per_worker"]
    assert Job.objects.count() == 2
