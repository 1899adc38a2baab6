"""Grants and their renewals over the API (issue 34, item 3): everyone in the team reads the
team's grants; an owner asks to renew one (POST /api/v1/quota-grants/{id}/renew), which
files a quota request a quota manager decides in the console; a non-renewable grant
refuses; an outsider sees nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from quotas import actions
from quotas.grants import last_day
from quotas.models import QuotaGrant, QuotaRequest
from tenants.models import Membership

from ..builders import make_team, make_user
from ..support.api import caller_clients, issue_token

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-grants"


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("quotas.actions.enqueue", lambda task, pk: None)


@pytest.fixture
def grant(team, flavor):
    now = timezone.now()
    return actions.grant(team=team, flavor=flavor, gpus=8, cpu_cores=96, memory_gib=960,
                         granted_by=make_user("ruth", quota_manager=True),
                         starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=5))


@pytest.fixture
def as_caller(request, client_as, team, owner):
    return caller_clients(request, client_as, team, owner)


def body(grant, days=30, **overrides):
    return {"ends_on": (last_day(grant.ends_at) + timedelta(days=days)).isoformat(),
            "justification": "The sweep needs another month.", **overrides}


CALLERS = ["anonymous", "outsider", "viewer", "member", "owner", "quota_manager",
           "token_read", "token_submit", "token_expired", "token_revoked"]
#              anon outsider viewer member owner qm   read submit expired revoked
READ_LIST = [401, 200,     200,   200,   200,  200, 200, 403,   401,    401]
READ_ONE = [401, 404,      200,   200,   200,  200, 200, 403,   401,    401]
RENEW = [401, 404,         403,   403,   201,  403, 403, 201,   401,    401]


@pytest.mark.parametrize("caller, expected", list(zip(CALLERS, READ_ONE, strict=True)))
def test_each_caller_reads_the_grant_or_not(as_caller, grant, caller, expected):
    response = as_caller(caller).get(f"{URL}/{grant.pk}")
    assert response.status_code == expected, response.content
    if expected == 200:
        data = response.json()
        assert (data["id"], data["team"], data["flavor"], data["gpus"], data["renewable"]) == (
            grant.pk, "vision", "h100", 8, True)
    else:
        assert set(response.json()) == {"code", "message", "fields"}


@pytest.mark.parametrize("caller, expected", list(zip(CALLERS, READ_LIST, strict=True)))
def test_each_caller_lists_the_grants_of_their_teams_only(as_caller, grant, caller, expected):
    response = as_caller(caller).get(URL)
    assert response.status_code == expected, response.content
    if expected == 200:
        ids = {g["id"] for g in response.json()["results"]}
        assert grant.pk in ids if caller != "outsider" else not ids & set(
            QuotaGrant.objects.filter(team=grant.team).values_list("pk", flat=True))


@pytest.mark.parametrize("caller, expected", list(zip(CALLERS, RENEW, strict=True)))
def test_only_the_owner_asks_to_renew(as_caller, grant, owner, caller, expected):
    response = as_caller(caller).post(f"{URL}/{grant.pk}/renew", body(grant), format="json")
    assert response.status_code == expected, response.content
    if expected == 201:
        renewal = QuotaRequest.objects.get()
        data = response.json()
        assert (data["id"], data["renews"], data["status"], data["gpus"], data["requested_by"]) == (
            renewal.pk, grant.pk, "pending", 8, "olivia")
        assert response["Location"].endswith(f"/api/v1/quota-requests/{renewal.pk}")
        assert (renewal.renews, renewal.requested_by, renewal.ends_on) == (
            grant, owner, last_day(grant.ends_at) + timedelta(days=30))
    else:
        assert set(response.json()) == {"code", "message", "fields"}
        assert not QuotaRequest.objects.exists()


def test_a_renewal_with_other_numbers_is_filed_as_asked(client_as, owner, grant):
    response = client_as(owner).post(f"{URL}/{grant.pk}/renew", body(grant, gpus=4), format="json")
    assert response.status_code == 201
    assert QuotaRequest.objects.get().gpus == 4


@pytest.mark.parametrize("overrides, field", [
    ({"ends_on": "2020-01-01"}, "ends_on"),
    ({"ends_on": "not-a-day"}, "ends_on"),
    ({"justification": ""}, "justification"),
    ({"gpus": 10**9}, "gpus"),
    ({"starts_on": "2030-01-01"}, "starts_on"),  # not a field of a renewal: refused by name
])
def test_bad_input_is_a_400_on_its_field(client_as, owner, grant, overrides, field):
    response = client_as(owner).post(f"{URL}/{grant.pk}/renew", body(grant, **overrides), format="json")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert not QuotaRequest.objects.exists()


def test_a_renewal_ending_before_the_grant_does_is_a_400_on_ends_on(client_as, owner, grant):
    response = client_as(owner).post(f"{URL}/{grant.pk}/renew", body(grant, days=-2), format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["ends_on"]


def test_a_non_renewable_grant_refuses_with_the_reason(client_as, owner, grant):
    QuotaGrant.objects.filter(pk=grant.pk).update(renewable=False)
    response = client_as(owner).post(f"{URL}/{grant.pk}/renew", body(grant), format="json")
    assert response.status_code == 400
    assert "is not renewable" in response.json()["fields"]["renews"][0]
    assert not QuotaRequest.objects.exists()


def test_a_second_renewal_waits_for_the_first_to_be_decided(client_as, owner, grant):
    client = client_as(owner)
    assert client.post(f"{URL}/{grant.pk}/renew", body(grant), format="json").status_code == 201
    response = client.post(f"{URL}/{grant.pk}/renew", body(grant, days=60), format="json")
    assert response.status_code == 400 and "already waiting" in response.json()["fields"]["renews"][0]
    assert QuotaRequest.objects.count() == 1


def test_a_team_token_renews_only_its_teams_grants(client_as, owner, flavor, grant):
    nlp = make_team("nlp", members={owner: Membership.Role.OWNER})
    theirs = actions.grant(team=nlp, flavor=flavor, gpus=2, granted_by=make_user("sam", quota_manager=True),
                           starts_at=timezone.now(), ends_at=timezone.now() + timedelta(days=3))
    client = client_as(token=issue_token(owner, team=grant.team))
    assert client.post(f"{URL}/{theirs.pk}/renew", body(theirs), format="json").status_code == 404
    assert not QuotaRequest.objects.filter(team=nlp).exists()


def test_the_renewal_is_listed_with_the_teams_requests_and_says_what_it_renews(client_as, owner, member, grant):
    client_as(owner).post(f"{URL}/{grant.pk}/renew", body(grant), format="json")
    [row] = client_as(member).get("/api/v1/quota-requests").json()["results"]
    assert row["renews"] == grant.pk
