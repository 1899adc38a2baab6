"""Finding 12 (issue 29): no size limits or caps. A job took 2 MB of arguments, 300 KB of
environment and a 200 KB command item; a person could hold any number of API tokens, a team
any number of live jobs and webhooks, and a webhook stored 50,000 copies of one kind of event.

Now what a tenant types has bounds, declared once in the job spec (``workloads.spec.TEXT_BOUNDS``:
the command, its arguments and the environment each at most 256 items of 4096 characters and
32 KiB in all) and held by the model's validators, so the form and the API say the same field
error; a quota request's justification (what an owner writes to a quota manager, a
renewal's too) is at most ``MAX_JUSTIFICATION`` (4000) characters. What a tenant holds has
caps from settings: ``MAX_API_TOKENS_PER_USER`` live tokens a person,
``MAX_LIVE_JOBS_PER_TEAM`` jobs not finished and ``MAX_WEBHOOKS_PER_TEAM`` webhooks a team;
one more is refused (400 in the error shape, an error on the page) and nothing is made. Each
count is taken with the owner's row locked, so two requests at once cannot both take the
last place. A webhook names each kind of event once. Test events and resends by hand were
limited by finding 5 (``WEBHOOK_PINGS_PER_HOUR``, 297c619); a test here holds that."""

import importlib
import io
import shlex
import threading
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import Job
from notifications.models import Kind, Webhook, WebhookDelivery
from quotas import actions as quota_actions
from quotas.models import QuotaRequest
from quotas.models.requests import MAX_JUSTIFICATION
from tenants.models import Membership
from tenants.tokens import ApiToken
from tests.support.api import JOB_BODY, issue_token
from workloads import spec

from ..builders import make_job, make_quota, make_team, make_user
from ..locks import waits_for_a_lock

pytestmark = pytest.mark.django_db

BOUNDS = spec.TEXT_BOUNDS
SUBMIT = reverse("jobs:submit")
HOOK = "http://127.0.0.1:8080/hook"


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch, settings):
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: None)
    monkeypatch.setattr("notifications.actions.enqueue", lambda *a: None)
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]


@pytest.fixture
def quota(team, flavor):
    return make_quota(team, flavor, nominal_gpus=8)


def form_data(team, flavor, **fields):
    """The submit form's fields for JOB_BODY with ``fields`` (lists and maps typed as text)."""
    body = {**JOB_BODY, **fields}
    data = {**body, "team": team.pk, "flavor": flavor.pk, "priority": "",
            "command": shlex.join(body["command"]), "args": shlex.join(body["args"]),
            "env": "\n".join(f"{k}={v}" for k, v in body["env"].items())}
    return data


# --- what a job's spec holds -------------------------------------------------------------------
TOO_MUCH = [
    # The finding's own sizes.
    ("a 2 MB argument list", "args", ["x" * 4000] * 500, "At most 256 items; this has 500."),
    ("300 KB of environment", "env", {f"V{i}": "x" * 3000 for i in range(100)}, "bytes in all; at most 32,768"),
    ("a 200 KB command item", "command", ["x" * 200_000], "Item 1 is 200,000 characters long; at most 4096."),
    # Each bound on its own.
    ("257 arguments", "args", ["a"] * 257, "At most 256 items"),
    ("an argument of 4097 characters", "args", ["ok", "y" * 4097], "Item 2 is 4,097 characters long"),
    ("arguments of 33 KB in all", "args", ["z" * 4000] * 9, "36,000 bytes in all; at most 32,768 (32 KiB)."),
    ("bytes, not characters, in all", "args", ["é" * 2100] * 8, "33,600 bytes in all"),
    ("257 variables", "env", {f"V{i}": "1" for i in range(257)}, "At most 256 variables"),
    ("a value of 4097 characters", "env", {"BIG": "v" * 4097}, "The value of BIG is 4,097 characters long"),
    ("a name of 4097 characters", "env", {"N" * 4097: "1"}, "A variable name is at most 4096 characters"),
]


@pytest.mark.parametrize("case, field, value, message", TOO_MUCH, ids=[c[0] for c in TOO_MUCH])
def test_finding_12_the_api_refuses_a_job_spec_beyond_its_bounds(client_as, owner, team, flavor, case, field,
                                                                   value, message):
    response = client_as(owner).post("/api/v1/jobs", {**JOB_BODY, field: value})
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["code"] == "invalid" and list(body["fields"]) == [field]
    assert message in body["fields"][field][0]
    assert not Job.objects.exists()


@pytest.mark.parametrize("case, field, value, message", TOO_MUCH[3:], ids=[c[0] for c in TOO_MUCH[3:]])
def test_finding_12_the_form_refuses_the_same_with_a_field_error_and_keeps_the_input(client_for, owner, team, flavor,
                                                                                     quota, case, field, value,
                                                                                     message):
    data = form_data(team, flavor, **{field: value})
    response = client_for(owner).post(SUBMIT, data)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field] and message in errors[field][0]
    typed = value[0] if isinstance(value, list) else next(iter(value))
    assert typed[:100] in response.content.decode()  # what was typed is still there
    assert not Job.objects.exists()


def test_finding_12_a_spec_at_its_bounds_is_taken(client_as, owner, team, flavor):
    most = BOUNDS.total_bytes // BOUNDS.items  # 256 items of 128 characters: 32 KiB exactly
    body = {**JOB_BODY, "command": ["c" * BOUNDS.item_chars], "args": ["a" * most] * BOUNDS.items,
            "env": {f"V{i:03}": "v" * (most - 4) for i in range(BOUNDS.items)}}
    response = client_as(owner).post("/api/v1/jobs", body)
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert len(job.args) == BOUNDS.items and sum(len(a) for a in job.args) == BOUNDS.total_bytes


def test_finding_12_the_bounds_are_declared_once_in_the_spec_and_held_by_the_model(team, flavor):
    for name in ("command", "args", "env"):
        assert spec.BY_NAME[name].bounds is BOUNDS
        assert f"{BOUNDS.item_chars} characters" in spec.BY_NAME[name].help
    job = Job(team=team, flavor=flavor, name="x", image="ghcr.io/example/train:1", args=["a"] * (BOUNDS.items + 1))
    with pytest.raises(ValidationError) as raised:
        job.full_clean()
    assert "At most 256 items" in raised.value.message_dict["args"][0]


# --- live jobs per team --------------------------------------------------------------------------
def end(job):
    job.transition(State.CANCELLING, reason="CancelRequested")
    job.transition(State.CANCELLED, reason="Cancelled")


@pytest.fixture
def two_live_jobs(team, flavor, settings):
    settings.MAX_LIVE_JOBS_PER_TEAM = 2
    first = make_job(team, flavor, name="one")
    first.submit()
    make_job(team, flavor, name="two")  # a draft counts: it is one step from the cluster
    ended = make_job(team, flavor, name="ended")
    ended.submit()
    end(ended)  # a finished one does not


def test_finding_12_a_team_at_its_live_jobs_cap_is_refused_in_the_api(client_as, owner, team, two_live_jobs):
    response = client_as(owner).post("/api/v1/jobs", {**JOB_BODY, "name": "three"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and list(body["fields"]) == ["team"]
    assert "Team vision has 2 live jobs, the most a team may have at once (2)" in body["fields"]["team"][0]
    assert not Job.objects.filter(name="three").exists()
    # The same with an Idempotency-Key: nothing made, and the key is not spent.
    keyed = client_as(owner).post("/api/v1/jobs", {**JOB_BODY, "name": "three"}, HTTP_IDEMPOTENCY_KEY="k")
    assert keyed.status_code == 400 and not Job.objects.filter(name="three").exists()


def test_finding_12_a_team_at_its_live_jobs_cap_is_refused_in_the_form(client_for, owner, team, flavor, quota,
                                                                      two_live_jobs):
    response = client_for(owner).post(SUBMIT, form_data(team, flavor, name="three"))
    assert response.status_code == 400
    assert "the most a team may have at once (2)" in response.context["form"].errors["team"][0]
    assert 'value="three"' in response.content.decode()
    assert not Job.objects.filter(name="three").exists()


def test_finding_12_the_cap_is_per_team_and_frees_up_as_jobs_end(client_as, owner, outsider, team, flavor,
                                                                 two_live_jobs):
    other = make_team("other", members={outsider: Membership.Role.OWNER})
    elsewhere = client_as(outsider).post("/api/v1/jobs", {**JOB_BODY, "team": other.slug, "name": "three"})
    assert elsewhere.status_code == 201, elsewhere.json()
    end(Job.objects.get(name="one"))
    assert client_as(owner).post("/api/v1/jobs", {**JOB_BODY, "name": "three"}).status_code == 201


def test_finding_12_the_live_jobs_are_counted_with_the_team_row_locked(client_as, owner, team, flavor):
    with CaptureQueriesContext(connection) as queries:
        assert client_as(owner).post("/api/v1/jobs", JOB_BODY).status_code == 201
    sql = [q["sql"] for q in queries]
    lock = next(i for i, q in enumerate(sql) if "FOR UPDATE" in q and '"tenants_team"' in q)
    assert any("COUNT(" in q and '"jobs_job"' in q for q in sql[lock + 1:])  # counted once it holds the lock


# --- API tokens per person -----------------------------------------------------------------------
def test_finding_12_a_person_at_the_tokens_cap_is_refused_in_the_api(client_as, owner, team, settings):
    settings.MAX_API_TOKENS_PER_USER = 2
    api = client_as(owner)
    made = [api.post("/api/v1/tokens", {"name": f"ci {i}", "team": team.slug}).status_code for i in range(3)]
    assert made == [201, 201, 400]
    refused = api.post("/api/v1/tokens", {"name": "ci 3", "team": team.slug}).json()
    assert refused["code"] == "invalid"
    assert refused["message"] == ("You have 2 live API tokens, the most one person may hold (2); revoke one you no "
                                  "longer use, then create this one.")
    assert ApiToken.objects.filter(user=owner).count() == 2
    # A revoked or expired token holds no place.
    first, second = ApiToken.objects.filter(user=owner)
    first.revoke()
    ApiToken.objects.filter(pk=second.pk).update(created_at=timezone.now() - timedelta(days=2),
                                                  expires_at=timezone.now() - timedelta(days=1))
    assert [api.post("/api/v1/tokens", {"name": f"again {i}"}).status_code for i in range(3)] == [201, 201, 400]


def test_finding_12_a_person_at_the_tokens_cap_is_refused_on_the_tokens_page(client_for, owner, member, team,
                                                                             settings):
    settings.MAX_API_TOKENS_PER_USER = 1
    issue_token(owner, team=team)
    issue_token(member, team=team)  # someone else's token holds none of the owner's places
    page = client_for(owner).post("/account/tokens/", {"name": "ci of repo x", "team": team.slug,
                                                       "scopes": ["read"], "expires_in_days": 30})
    assert page.status_code == 400
    html = page.content.decode()
    assert "You have 1 live API tokens, the most one person may hold (1)" in html
    assert 'value="ci of repo x"' in html
    assert ApiToken.objects.filter(user=owner).count() == 1


def test_finding_12_create_token_is_held_to_the_same_cap(owner, team, settings):
    settings.MAX_API_TOKENS_PER_USER = 1
    call_command("create_token", owner.username, "--team", team.slug, stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match=r"^You have 1 live API tokens, the most one person may hold \(1\)"):
        call_command("create_token", owner.username, "--team", team.slug)
    assert ApiToken.objects.filter(user=owner).count() == 1


def test_finding_12_tokens_are_counted_with_the_person_row_locked(owner, team):
    with CaptureQueriesContext(connection) as queries:
        issue_token(owner, team=team)
    assert any("FOR UPDATE" in q["sql"] and '"auth_user"' in q["sql"] for q in queries)


# --- webhooks per team, and the kinds of each ----------------------------------------------------
def test_finding_12_a_team_at_its_webhooks_cap_is_refused_in_the_api(client_as, owner, outsider, team, settings):
    settings.MAX_WEBHOOKS_PER_TEAM = 2
    api = client_as(owner)
    body = {"team": team.slug, "url": HOOK, "kinds": ["job.failed"]}
    assert [api.post("/api/v1/webhooks", body).status_code for _ in range(3)] == [201, 201, 400]
    refused = api.post("/api/v1/webhooks", body).json()
    assert refused["code"] == "invalid"
    assert refused["message"].startswith("Team vision has 2 webhooks, the most a team may have (2)")
    assert Webhook.objects.filter(team=team).count() == 2
    # Changing one at the cap is no new one; another team has places of its own.
    hook = Webhook.objects.filter(team=team).first()
    assert api.patch(f"/api/v1/webhooks/{hook.pk}", {"kinds": ["job.succeeded"]}).status_code == 200
    other = make_team("other", members={outsider: Membership.Role.OWNER})
    assert client_as(outsider).post("/api/v1/webhooks", {**body, "team": other.slug}).status_code == 201


def test_finding_12_a_team_at_its_webhooks_cap_is_refused_on_the_page(client_for, owner, team, settings):
    settings.MAX_WEBHOOKS_PER_TEAM = 1
    hook = Webhook.objects.create(team=team, url=HOOK, kinds=[Kind.JOB_FAILED])
    web = client_for(owner)
    page = web.post(f"/notifications/teams/{team.slug}/webhooks/",
                    {"url": "http://127.0.0.1:8080/second", "kinds": ["job.failed"], "is_active": "on"})
    assert page.status_code == 400
    html = page.content.decode()
    assert "Team vision has 1 webhooks, the most a team may have (1)" in html
    assert "http://127.0.0.1:8080/second" in html  # what was typed is still there
    assert Webhook.objects.filter(team=team).count() == 1
    edited = web.post(f"/notifications/teams/{team.slug}/webhooks/{hook.pk}/",
                      {"url": HOOK, "kinds": ["job.succeeded"], "is_active": "on"})
    assert edited.status_code == 302


def test_finding_12_the_webhooks_cap_holds_however_a_webhook_is_saved_with_the_team_row_locked(team, settings):
    settings.MAX_WEBHOOKS_PER_TEAM = 1
    with CaptureQueriesContext(connection) as queries:
        Webhook.objects.create(team=team, url=HOOK, kinds=[Kind.JOB_FAILED])
    assert any("FOR UPDATE" in q["sql"] and '"tenants_team"' in q["sql"] for q in queries)
    with pytest.raises(ValidationError, match="the most a team may have"):
        Webhook.objects.create(team=team, url=HOOK, kinds=[Kind.JOB_FAILED])  # past any form's check
    assert Webhook.objects.count() == 1


def test_finding_12_a_webhook_names_each_kind_of_event_once(client_as, owner, team):
    api = client_as(owner)
    twice = api.post("/api/v1/webhooks", {"team": team.slug, "url": HOOK, "kinds": ["job.failed", "job.failed"]})
    assert twice.status_code == 400
    assert twice.json()["fields"]["kinds"] == ["Name each kind of event once: job.failed more than once."]
    # The finding's 50,000 copies: refused before they are looked at one by one.
    many = api.post("/api/v1/webhooks", {"team": team.slug, "url": HOOK, "kinds": ["job.failed"] * 50_000})
    assert many.status_code == 400 and "kinds" in many.json()["fields"]
    assert not Webhook.objects.exists()
    with pytest.raises(ValidationError, match="Name each kind of event once"):  # the admin's way too
        Webhook(team=team, url=HOOK, kinds=["job.failed", "job.succeeded", "job.failed"]).full_clean()


def test_finding_12_webhooks_stored_with_repeated_kinds_keep_each_once():
    migration = importlib.import_module("notifications.migrations.0004_webhook_kinds_once")
    team = make_team("stored")
    hook = Webhook.objects.create(team=team, url=HOOK, kinds=["job.failed"])
    Webhook.objects.filter(pk=hook.pk).update(kinds=["job.failed", "job.succeeded"] + ["job.failed"] * 500)
    migration.kinds_once(apps, None)
    hook.refresh_from_db()
    assert hook.kinds == ["job.failed", "job.succeeded"]


def test_finding_12_test_events_by_hand_were_limited_by_finding_5(client_for, owner, team, settings):
    # WEBHOOK_PINGS_PER_HOUR (297c619; tests/security/test_finding_05_webhook_sender.py)
    settings.WEBHOOK_PINGS_PER_HOUR = 2
    hook = Webhook.objects.create(team=team, url=HOOK, kinds=[Kind.JOB_FAILED])
    web = client_for(owner)
    for _ in range(4):
        web.post(f"/notifications/teams/{team.slug}/webhooks/{hook.pk}/ping/")
    assert WebhookDelivery.objects.filter(event__kind=Kind.PING).count() == 2


# --- what an owner writes to a quota manager ---------------------------------------------------
def test_finding_12_a_quota_requests_justification_is_bounded_in_the_api_and_the_form(client_as, client_for, owner,
                                                                                      team, flavor):
    today = timezone.localdate()
    body = {"team": team.slug, "flavor": flavor.name, "gpus": 8, "starts_on": today.isoformat(),
            "ends_on": (today + timedelta(days=30)).isoformat(), "justification": "x" * (MAX_JUSTIFICATION + 1)}
    api = client_as(owner).post("/api/v1/quota-requests", body)
    assert api.status_code == 400 and list(api.json()["fields"]) == ["justification"]
    assert "4000 characters" in api.json()["fields"]["justification"][0]
    page = client_for(owner).post(reverse("console:request-create", args=[team.slug]),
                                  {**body, "flavor": flavor.pk})
    assert page.status_code == 400 and "4000 characters" in page.content.decode()
    assert not QuotaRequest.objects.exists()
    assert client_as(owner).post("/api/v1/quota-requests",
                                 {**body, "justification": "x" * MAX_JUSTIFICATION}).status_code == 201


def test_finding_12_a_renewals_justification_is_bounded_too(client_as, owner, team, flavor, monkeypatch):
    monkeypatch.setattr("quotas.actions.enqueue", lambda task, pk: None)
    now = timezone.now()
    grant = quota_actions.grant(team=team, flavor=flavor, gpus=8, cpu_cores=96, memory_gib=960,
                                granted_by=make_user("ruth", quota_manager=True),
                                starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=5))
    body = {"ends_on": (timezone.localdate() + timedelta(days=40)).isoformat(),
            "justification": "x" * (MAX_JUSTIFICATION + 1)}
    response = client_as(owner).post(f"/api/v1/quota-grants/{grant.pk}/renew", body)
    assert response.status_code == 400 and list(response.json()["fields"]) == ["justification"]
    assert not QuotaRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_finding_12_two_submissions_at_once_cannot_both_take_the_last_place(team, flavor, member, owner, settings,
                                                                           monkeypatch):
    """The first holds the team's row between its count and its insert; the second waits on
    that lock (seen in pg_stat_activity, not guessed by a sleep), then counts the first's job."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    settings.MAX_LIVE_JOBS_PER_TEAM = 1
    go, first_counted = threading.Event(), threading.Event()
    save_submitted = Job.save_submitted

    def held_open(job, because=None):  # the first submission pauses after its count, inside its transaction
        if job.name == "first":
            first_counted.set()
            assert go.wait(60)
        save_submitted(job, because)

    monkeypatch.setattr(Job, "save_submitted", held_open)
    outcome = {}

    def submit(name, person):
        try:
            Job.objects.submit(team=team, submitter=person, flavor=flavor, name=name, image="ghcr.io/x/train:1")
            outcome[name] = "submitted"
        except ValidationError as err:
            outcome[name] = err.message_dict["team"][0]
        finally:
            connections.close_all()

    first = threading.Thread(target=submit, args=("first", owner))
    first.start()
    assert first_counted.wait(60)
    second = threading.Thread(target=submit, args=("second", member))
    second.start()
    waited = waits_for_a_lock(second)
    go.set()
    first.join(60)
    second.join(60)
    assert waited, "the second submission did not wait for the first's lock"
    assert outcome["first"] == "submitted"
    assert outcome["second"].startswith("Team vision has 1 live jobs, the most a team may have at once (1)")
    assert list(Job.objects.values_list("name", flat=True)) == ["first"]
