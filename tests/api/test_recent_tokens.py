"""A web process reuses the tokens it found (tenants/recent_tokens.py), and never past a
change of what they may do: revoking, deleting, deactivating, group and permission changes
reach every process at once; a change behind Django's back, after ``API_TOKEN_CACHE_SECONDS``."""

import pytest
from django.contrib.auth.models import Group

from tenants import recent_tokens
from tenants.recent_tokens import RecentTokens
from tenants.roles import QUOTA_MANAGER_GROUP
from tenants.tokens import ApiToken

from ..builders import make_job, make_team
from ..support.api import issue_token

pytestmark = pytest.mark.django_db


def _first_use(client_as, secret):
    api = client_as(token=secret)
    assert api.get("/api/v1/jobs").status_code == 200  # found, and remembered
    return api


def test_a_revoked_token_is_refused_on_the_next_request(client_as, member, team):
    secret = issue_token(member)
    api = _first_use(client_as, secret)
    ApiToken.objects.get().revoke()
    response = api.get("/api/v1/jobs")
    assert response.status_code == 401 and response.json()["message"] == "This API token was revoked."


def test_a_deleted_token_is_refused_on_the_next_request(client_as, member, team):
    api = _first_use(client_as, issue_token(member))
    ApiToken.objects.get().delete()
    assert api.get("/api/v1/jobs").json()["message"] == "Unknown API token."


def test_a_deactivated_user_is_refused_on_the_next_request(client_as, member, team):
    api = _first_use(client_as, issue_token(member))
    member.is_active = False
    member.save()
    assert api.get("/api/v1/jobs").json()["message"] == "The token's user is inactive."


def test_leaving_the_quota_managers_narrows_the_next_request(client_as, quota_manager, team, flavor):
    """The quota-manager flag is part of what a process keeps: a group change drops it."""
    make_job(team, flavor, name="theirs")
    api = _first_use(client_as, issue_token(quota_manager))
    assert [j["name"] for j in api.get("/api/v1/jobs").json()["results"]] == ["theirs"]
    quota_manager.groups.remove(Group.objects.get(name=QUOTA_MANAGER_GROUP))
    assert api.get("/api/v1/jobs").json()["results"] == []


def test_another_process_forgets_the_token_too(member, team):
    """Two processes share only the cache: a revocation in one reaches the other."""
    secret = issue_token(member)
    other_process = RecentTokens()
    assert other_process.find(secret, ApiToken.objects.find).revoked_at is None
    ApiToken.objects.get().revoke()
    assert other_process.find(secret, ApiToken.objects.find).revoked_at is not None


def test_a_change_behind_djangos_back_holds_until_the_cache_age(member, team, settings, monkeypatch):
    """An UPDATE in SQL sends no signal: what was found holds at most API_TOKEN_CACHE_SECONDS."""
    settings.API_TOKEN_CACHE_SECONDS = 30
    secret = issue_token(member)
    process = RecentTokens()
    now = [1000.0]
    monkeypatch.setattr(recent_tokens.time, "monotonic", lambda: now[0])
    assert process.find(secret, ApiToken.objects.find).user.is_active
    type(member).objects.filter(pk=member.pk).update(is_active=False)
    now[0] += 29
    assert process.find(secret, ApiToken.objects.find).user.is_active
    now[0] += 2
    assert not process.find(secret, ApiToken.objects.find).user.is_active


def test_a_login_does_not_make_every_process_look_its_tokens_up_again(member, team, django_assert_num_queries):
    secret = issue_token(member)
    process = RecentTokens()
    process.find(secret, ApiToken.objects.find)
    member.save(update_fields=["last_login"])
    with django_assert_num_queries(0):
        process.find(secret, ApiToken.objects.find)
    member.first_name = "Max"
    member.save()
    with django_assert_num_queries(1):
        process.find(secret, ApiToken.objects.find)


def test_each_request_gets_its_own_token_and_user(member, team):
    secret = issue_token(member)
    process = RecentTokens()
    first = process.find(secret, ApiToken.objects.find)
    first.user.first_name = "changed by one request"
    first.scopes.append("admin")
    second = process.find(secret, ApiToken.objects.find)
    assert second is not first and second.user is not first.user
    assert second.user.first_name != "changed by one request" and "admin" not in second.scopes


def test_unknown_secrets_are_not_remembered(member, team, django_assert_num_queries):
    process = RecentTokens()
    for _ in range(2):
        with django_assert_num_queries(1):
            assert process.find("gpp_00000000" + "x" * 40, ApiToken.objects.find) is None


def test_the_last_use_is_written_once_a_minute_not_once_a_request(client_as, member, team, django_assert_num_queries):
    api = _first_use(client_as, issue_token(member))
    used = ApiToken.objects.get().last_used_at
    for _ in range(3):
        with django_assert_num_queries(1):  # the page; no UPDATE of last_used_at
            api.get("/api/v1/jobs")
    assert ApiToken.objects.get().last_used_at == used


def test_a_token_for_one_team_stays_narrowed(client_as, member, team, flavor):
    other = make_team("nlp", members={member: "member"})
    make_job(other, flavor, name="nlp-job")
    make_job(team, flavor, name="vision-job")
    api = _first_use(client_as, issue_token(member, team=team))
    assert [j["name"] for j in api.get("/api/v1/jobs").json()["results"]] == ["vision-job"]


def test_the_cache_keeps_at_most_its_size_and_not_the_secrets(member, team, django_assert_num_queries):
    process = RecentTokens(size=2)
    secrets = [issue_token(member) for _ in range(3)]
    for secret in secrets:
        process.find(secret, ApiToken.objects.find)
    assert len(process._found) == 2 and not set(secrets) & set(process._found)
    with django_assert_num_queries(0):
        process.find(secrets[2], ApiToken.objects.find)
    with django_assert_num_queries(1):  # the oldest was forgotten
        process.find(secrets[0], ApiToken.objects.find)


def test_a_change_is_saved_even_when_the_cache_is_down(member, team, settings, caplog):
    """A migration or an admin save must not fail because Redis is away; the processes'
    tokens then stay at most API_TOKEN_CACHE_SECONDS."""
    settings.CACHES = {"default": {"BACKEND": "core.redis_cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}}
    member.is_active = False
    member.save()
    assert "could not tell the web processes" in caplog.text
