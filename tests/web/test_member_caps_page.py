"""Per-person caps on the team page (owners set them with an htmx form, field errors keep what
was typed; everyone in the team sees them with each person's use; outsiders see nothing), and
a job waiting at its submitter's cap on the job list, the job page and after a clone."""

import pytest

from jobs.lifecycle import AT_PERSONAL_CAP
from jobs.models import Job
from quotas.models import MemberCap

from ..builders import make_flavor, make_job, make_quota, make_team

pytestmark = pytest.mark.django_db

PAGE = "/teams/vision/"
SET = "/teams/vision/caps/"
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "member-caps"}


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("jobs.actions.caps_changed", lambda team: None)
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)


def held(team, flavor, who, name, gpus=8) -> Job:
    return Job.objects.submit(team=team, submitter=who, flavor=flavor, name=name, image="ghcr.io/x/train:1",
                              gpus_per_worker=gpus)


def test_an_owner_sets_a_cap_with_the_htmx_form(client_for, owner, member, team, flavor):
    response = client_for(owner).post(SET, {"person": member.username, "flavor": "h100", "max_gpus": 8,
                                            "max_jobs": 2}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="member-caps"')  # the part, not the page
    assert f"{member.username} may hold 8 h100 GPUs at once in at most 2 jobs." in html
    cap = MemberCap.objects.get()
    assert (cap.user, cap.max_gpus, cap.max_jobs, cap.set_by) == (member, 8, 2, owner)
    # Setting it again changes the numbers of the same cap; "Everyone" is the team's default.
    client_for(owner).post(SET, {"person": member.username, "flavor": "h100", "max_gpus": 4}, **HTMX)
    client_for(owner).post(SET, {"person": "", "flavor": "h100", "max_gpus": 16}, **HTMX)
    assert set(MemberCap.objects.values_list("user", "max_gpus", "max_jobs")) == {
        (None, 16, None), (member.pk, 4, None)}


@pytest.mark.parametrize("data, field, message", [
    ({"max_gpus": -1}, "max_gpus", "Ensure this value is greater than or equal to 0."),
    ({"max_gpus": ""}, "max_gpus", "This field is required."),
    ({"max_jobs": 0}, "max_jobs", "Ensure this value is greater than or equal to 1."),
    ({"person": "nobody"}, "person", "Select a valid choice. nobody is not one of the available choices."),
    ({"flavor": "b200"}, "flavor", "Select a valid choice. That choice is not one of the available choices."),
], ids=["negative", "empty", "no jobs", "not a person of the team", "unknown flavor"])
def test_bad_input_is_a_field_error_and_keeps_what_was_typed(client_for, owner, member, team, flavor, data, field,
                                                            message):
    sent = {"person": member.username, "flavor": "h100", "max_gpus": 8, "max_jobs": 3, **data}
    response = client_for(owner).post(SET, sent, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert message.replace("'", "&#x27;") in html
    assert f'field-{field} has-error' in html
    if field != "max_jobs":
        assert 'name="max_jobs" value="3"' in html
    assert not MemberCap.objects.exists()


def test_a_viewer_cannot_be_given_a_cap(client_for, owner, viewer, team, flavor):
    # Not a choice at all: viewers submit nothing.
    response = client_for(owner).post(SET, {"person": viewer.username, "flavor": "h100", "max_gpus": 8}, **HTMX)
    assert response.status_code == 400 and not MemberCap.objects.exists()


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_see_the_caps_and_their_use_but_no_form(client_for, request, member, team, flavor, who):
    make_quota(team, flavor, nominal_gpus=32)
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    held(team, flavor, member, "first")
    held(team, flavor, member, "second")
    page = client_for(request.getfixturevalue(who)).get(PAGE).content.decode()
    assert "Per-person caps" in page and "8 of 8 · 1 waiting" in page
    assert 'action="/teams/vision/caps/"' not in page and "Remove the h100 cap" not in page
    if who == "member":
        assert "You hold <strong>8 of your 8</strong> h100 GPUs; 1 job waiting at the cap" in page


def test_the_team_default_shows_each_persons_use(client_for, owner, member, team, flavor):
    MemberCap.objects.create(team=team, flavor=flavor, user=None, max_gpus=8)
    held(team, flavor, member, "theirs", 2)
    held(team, flavor, owner, "mine", 8)
    page = client_for(owner).get(PAGE).content.decode()
    assert f"{member.username}: 2 of 8" in page and f"{owner.username}: 8 of 8" in page
    assert "(the team default)" in page  # the owner is held by it too


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_members_and_viewers_cannot_set_or_remove_caps(client_for, request, member, team, flavor, who):
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    web = client_for(request.getfixturevalue(who))
    assert web.post(SET, {"person": member.username, "flavor": "h100", "max_gpus": 64}).status_code == 403
    assert web.post(f"/teams/vision/caps/{cap.pk}/remove/").status_code == 403
    cap.refresh_from_db()
    assert cap.max_gpus == 8


def test_an_outsider_sees_nothing_and_changes_nothing(client_for, outsider, member, team, flavor):
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    make_team("other", members={outsider: "owner"})
    web = client_for(outsider)
    assert web.get(PAGE).status_code == 404
    assert web.post(SET, {"person": member.username, "flavor": "h100", "max_gpus": 64}).status_code == 404
    assert web.post(f"/teams/vision/caps/{cap.pk}/remove/").status_code == 404
    assert MemberCap.objects.get().max_gpus == 8


def test_an_owner_removes_a_cap(client_for, owner, member, team, flavor):
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    response = client_for(owner).post(f"/teams/vision/caps/{cap.pk}/remove/", **HTMX)
    assert response.status_code == 200 and not MemberCap.objects.exists()
    assert f"Removed the h100 cap of {member.username}." in response.content.decode()


def test_a_quota_manager_may_set_caps(client_for, quota_manager, member, team, flavor):
    make_flavor("a100")
    response = client_for(quota_manager).post(SET, {"person": member.username, "flavor": "a100", "max_gpus": 2})
    assert response.status_code == 302 and MemberCap.objects.get().flavor.name == "a100"


def test_the_job_list_and_page_show_why_a_job_waits(client_for, member, team, flavor):
    make_quota(team, flavor, nominal_gpus=32)
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    held(team, flavor, member, "first")
    waiting = held(team, flavor, member, "second")
    web = client_for(member)
    listed = web.get("/jobs/").content.decode()
    assert ">At cap</span>" in listed and "You hold 8 of your 8 h100 GPUs" in listed
    page = web.get(f"/jobs/{waiting.pk}/").content.decode()
    assert "You hold 8 of your 8 h100 GPUs in team vision; this job needs 8." in page
    assert AT_PERSONAL_CAP in page and "ahead in the team" not in page


def test_a_clone_over_the_cap_waits_too(client_for, member, team, flavor):
    make_quota(team, flavor, nominal_gpus=32)
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    original = held(team, flavor, member, "original")
    web = client_for(member)
    assert 'value="original-copy"' in web.get(f"/jobs/new/?clone={original.pk}").content.decode()
    # The clone's form is posted as any submission: the same door, the same cap.
    response = web.post("/jobs/new/", {
        "team": team.pk, "kind": "training", "name": "original-copy", "flavor": flavor.pk, "priority": "",
        "image": original.image, "command": "", "args": "", "env": "", "workers": 1, "gpus_per_worker": 8,
        "cpu_per_worker": 4, "memory_per_worker_gib": 16}, follow=True)
    copy = Job.objects.get(name="original-copy")
    assert copy.at_personal_cap
    assert "You hold 8 of your 8 h100 GPUs" in response.content.decode()


def test_a_draft_made_elsewhere_is_held_when_sent_on(member, team, flavor):
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    held(team, flavor, member, "first")
    draft = make_job(team, flavor, name="draft", submitter=member, gpus_per_worker=8)
    assert draft.submit_draft(member) and Job.objects.get(pk=draft.pk).at_personal_cap
