"""No answer of the MCP server carries another team's data: a property over generated
questions (every tool, with ids and team names of both teams and of none) and identities
(an owner's, a member's, a viewer's and an outsider's token, team tokens of a person in both
teams, a revoked token, no token).

What marks a team's data: its jobs' names (in every row, every detail, every error that
quoted one), a string equal to its slug (a job's or a quota's ``team``) and the usernames
of the people only it has. A question may name another team; the API's refusal may then
echo the name in a sentence, which is the caller's own word, not the team's data.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.lifecycle import State
from tenants.models import Membership

from ..builders import make_job, make_quota, make_user
from ..support.api import issue_token
from ..support.mcp import call_tool, waiting_job

pytestmark = pytest.mark.django_db

JOB_TOOLS = ["get_job", "why_waiting", "job_eta", "job_events"]
TEAM_TOOLS = ["team_quotas", "member_caps"]
PLAIN_TOOLS = ["whoami", "list_teams", "gpu_use"]
# Who may see which teams' data; None: refused outright.
IDENTITIES = {
    "owner": {"vision"}, "member": {"vision"}, "viewer": {"vision"}, "outsider": {"other-team"},
    "member_team_token": {"vision"}, "both_teams_personal": {"vision", "other-team"},
    "both_teams_token_for_other": {"other-team"}, "both_teams_token_for_vision": {"vision"},
    "revoked": None, "none": None,
}


def running_job(team, flavor, name):
    job = make_job(team, flavor, name=name, gpus_per_worker=4)
    job.submit()
    job.observe(State.RUNNING, reason="Running", message="", gpus=4)
    return job


@pytest.fixture
def world(team, flavor, owner, member, viewer, outsider):
    """Two teams with waiting, running and ended jobs, and a token for every identity."""
    other = outsider.memberships.get().team
    both = make_user("tess")
    Membership.objects.create(team=team, user=both, role=Membership.Role.MEMBER)
    Membership.objects.create(team=other, user=both, role=Membership.Role.MEMBER)
    jobs = {}
    for each in (team, other):
        make_quota(each, flavor, nominal_gpus=8)
        tag = "vsn" if each == team else "oth"
        made = [waiting_job(each, flavor, name=f"{tag}-secret-waits"), running_job(each, flavor, f"{tag}-secret-runs"),
                make_job(each, flavor, name=f"{tag}-secret-draft")]
        jobs[each.slug] = made
    tokens = {
        "owner": issue_token(owner), "member": issue_token(member), "viewer": issue_token(viewer),
        "outsider": issue_token(outsider), "member_team_token": issue_token(member, team=team),
        "both_teams_personal": issue_token(both), "both_teams_token_for_other": issue_token(both, team=other),
        "both_teams_token_for_vision": issue_token(both, team=team),
        "revoked": issue_token(member, revoked=True), "none": None,
    }
    markers = {
        "vision": {"names": {job.name for job in jobs["vision"]}, "people": {"olivia", "max", "vera"}},
        "other-team": {"names": {job.name for job in jobs["other-team"]}, "people": {"oscar"}},
    }
    ids = [job.pk for made in jobs.values() for job in made]
    return tokens, markers, ids


def questions(job_ids: list[int]):
    """A tool and its arguments, as an agent might ask them (a job or team of anyone, or of no one)."""
    job_id = st.sampled_from([*job_ids, max(job_ids) + 1000])
    team = st.sampled_from(["vision", "other-team", "nobody"])
    listing = st.fixed_dictionaries({}, optional={
        "team": team, "state": st.lists(st.sampled_from(State.values), max_size=3),
        "name_contains": st.sampled_from(["secret", "runs", "oth", "vsn"]), "limit": st.integers(1, 5),
    })
    return st.one_of(
        st.tuples(st.just("list_jobs"), listing),
        st.tuples(st.sampled_from(JOB_TOOLS), st.fixed_dictionaries({"job_id": job_id})),
        st.tuples(st.sampled_from(TEAM_TOOLS), st.fixed_dictionaries({"team": team})),
        st.tuples(st.just("gpu_use"), st.fixed_dictionaries({}, optional={"team": team})),
        st.tuples(st.sampled_from(PLAIN_TOOLS), st.just({})),
    )


def strings_in(value):
    """Every string of an answer, keys and values, however deep."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from strings_in(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from strings_in(inner)


def leaks(answer, markers: dict, hidden: set[str]) -> list[str]:
    """What of the hidden teams' data the answer carries."""
    found = []
    for text in strings_in(answer):
        for slug in hidden:
            if text == slug or text in markers[slug]["people"]:
                found.append(text)
            found.extend(name for name in markers[slug]["names"] if name in text)
    return found


def answer_of(body: dict):
    """The tool's answer: its JSON, or its error sentence."""
    result = body["result"]
    text = result["content"][0]["text"]
    return text if result["isError"] else json.loads(text)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), identity=st.sampled_from(sorted(IDENTITIES)))
def test_no_answer_carries_another_teams_data(world, data, identity):
    tokens, markers, ids = world
    name, arguments = data.draw(questions(ids), label="question")
    status, body = call_tool(name, arguments, tokens[identity])
    visible = IDENTITIES[identity]
    if visible is None:
        assert status == 401 and "result" not in body
        return
    assert status == 200
    answer = answer_of(body)
    assert leaks(answer, markers, set(markers) - visible) == []


@pytest.mark.parametrize("identity", ["member_team_token", "both_teams_personal", "both_teams_token_for_other"])
def test_each_identity_sees_all_of_its_own_teams_jobs(world, identity):
    """The property is not kept by answering nothing: each sees every job of its teams."""
    tokens, markers, _ = world
    status, body = call_tool("list_jobs", {}, tokens[identity])
    names = {job["name"] for job in answer_of(body)["jobs"]}
    assert names == set().union(*(markers[slug]["names"] for slug in IDENTITIES[identity]))
