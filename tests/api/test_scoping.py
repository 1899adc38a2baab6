"""Nothing of a team leaks through any API route: every operation of the served schema
(a new route is walked as soon as it exists), asked by the team's owner, member and viewer,
by an outsider, and by a token narrowed to another team of the team's own owner.

The team's rows carry a marker (``vsecret``) in what each route shows of them. The outsider
and the narrowed token never see it, and their writes change nothing of the team; the
team's people see it exactly where their role may (webhooks and tokens: the owner's).
"""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, Volume
from notifications.models import Event, Kind, Webhook, WebhookDelivery
from quotas.models import Drain, MemberCap, QuotaGrant, QuotaRequest, StorageQuota, TrainingRuntime
from tenants.models import Membership
from tenants.models.identities import GroupMapping
from tenants.tokens import ApiToken

from ..builders import make_job, make_team, make_user
from ..support.api import JOB_BODY, add_pod, issue_token

pytestmark = pytest.mark.django_db

MARKER = "vsecret"
INSIDERS = ("owner", "member", "viewer")
# Who of the team sees its rows on a route, by the route's first segment under /api/v1/.
# A route not classified here fails the test once its leak checks have passed.
SEES = {
    "teams": INSIDERS, "jobs": INSIDERS, "quota-requests": INSIDERS, "quota-grants": INSIDERS,
    "member-caps": INSIDERS,  # what each person may hold: the team's people see it
    "volumes": INSIDERS,  # the team's volumes: its people mount them
    "training-runtimes": INSIDERS,  # a runtime limited to the team: its people run TrainJobs on it
    "webhooks": ("owner",),  # a webhook holds its signing secret
    "tokens": ("owner",),  # one's own tokens
    "group-mappings": (),  # quota managers only
    "flavors": (), "notification-preferences": (), "ping": (), "schema": (),
    "me": (),  # who you are, and the slugs and display names of the teams you are in
    "drains": (),  # a pool's drain is everyone's to read; the jobs on it quota managers' only
}


@pytest.fixture
def world(team, owner, member, viewer, outsider, flavor, fake, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    team.display_name, team.description = "Vsecret vision", f"{MARKER} research"
    team.save()
    make_team("nlp", members={owner: Membership.Role.OWNER})
    job = make_job(team, flavor, name=f"{MARKER}-train", image=f"registry.example/{MARKER}:1", submitter=member)
    job.submit()
    job.note("Info", f"{MARKER} note")
    add_pod(fake, job, f"{MARKER}-train-pod", f"{MARKER} log line\n")
    request = QuotaRequest.objects.create(team=team, flavor=flavor, gpus=4, starts_on="2099-01-01",
                                          justification=f"{MARKER} justification", requested_by=owner)
    grant = QuotaGrant.objects.add(QuotaGrant(team=team, flavor=flavor, gpus=2, cpu_cores=8, memory_gib=64,
                                              starts_at=timezone.now(), ends_at=timezone.now() + timedelta(days=30),
                                              note=f"{MARKER} grant note"))
    hook = Webhook.objects.create(team=team, url=f"http://127.0.0.1:9/{MARKER}", kinds=[Kind.JOB_FAILED],
                                  created_by=owner)
    event = Event.objects.create(kind=Kind.JOB_FAILED, key=f"{MARKER}:1", team=team, title=f"{MARKER} failed")
    delivery = WebhookDelivery.objects.create(webhook=hook, event=event)
    mapping = GroupMapping.objects.create(group=f"{MARKER}-group", role=GroupMapping.Role.MEMBER, team=team)
    token = ApiToken.objects.issue(user=owner, name=f"{MARKER}-token", team=team)[0]
    person = make_user(f"{MARKER}-person")
    Membership.objects.create(team=team, user=person, role=Membership.Role.MEMBER)
    cap = MemberCap.objects.create(team=team, flavor=flavor, user=person, max_gpus=8)
    drain = Drain(flavor=flavor, deadline=timezone.now() + timedelta(hours=1),
                  reopens_at=timezone.now() + timedelta(hours=2), reason="maintenance")
    drain.declare_by(make_user("drain-quinn", quota_manager=True))
    StorageQuota.objects.create(team=team, storage_class="standard", storage_gib=100, volumes=5)
    volume = Volume.objects.create(team=team, name=f"{MARKER}-data", storage_class="standard", size_gib=10)
    TrainingRuntime.objects.create(name=f"{MARKER}-runtime", label="Limited", limited_to_teams=True).teams.add(team)
    ids = {"drains": drain.pk, "volumes": volume.pk, "member-caps": cap.pk, "jobs": job.pk, "quota-requests": request.pk, "quota-grants": grant.pk, "webhooks": hook.pk, "group-mappings": mapping.pk,
           "tokens": token.pk}
    values = {"slug": team.slug, "name": flavor.name, "kind": "job.started", "delivery_id": delivery.pk}
    names = {"training-runtimes": f"{MARKER}-runtime"}
    return {"ids": ids, "names": names, "values": values, "team": team, "job": job, "hook": hook}


@pytest.fixture
def callers(client_as, owner, member, viewer, outsider):
    nlp = make_team("nlp-tokens", members={owner: Membership.Role.OWNER})
    return {
        "owner": client_as(owner), "member": client_as(member), "viewer": client_as(viewer),
        "outsider": client_as(outsider),
        "token for another team": client_as(token=issue_token(owner, team=nlp)),
    }


def routes(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    for path, item in schema["paths"].items():
        for method in item:
            yield method.upper(), path


def url_of(path: str, world) -> str:
    segment = section(path)
    url = path.replace("{id}", str(world["ids"].get(segment, "")))
    if segment in world["names"]:  # a route whose rows are named, not numbered
        url = url.replace("{name}", world["names"][segment])
    for name, value in world["values"].items():
        url = url.replace("{" + name + "}", str(value))
    assert "{" not in url, f"{path}: give the new path parameter a value of the team in the world fixture"
    return url


def section(path: str) -> str:
    return path.removeprefix("/api/v1/").removeprefix("/api/").split("/")[0]


def body_of(method: str, path: str, world) -> dict | None:
    """A body that would change the team if the caller were allowed to."""
    bodies = {
        ("POST", "/api/v1/jobs"): {**JOB_BODY, "name": "intruder"},
        ("POST", "/api/v1/jobs/dry-run"): {**JOB_BODY, "name": "intruder"},
        ("POST", "/api/v1/jobs/{id}/cancel"): None,
        ("POST", "/api/v1/jobs/{id}/stop"): None,
        ("POST", "/api/v1/jobs/{id}/start"): None,
        ("POST", "/api/v1/jobs/{id}/exempt-idle"): {"reason": "intruder"},
        ("POST", "/api/v1/tokens"): {"name": "intruder", "team": "vision"},
        ("DELETE", "/api/v1/tokens/{id}"): None,
        ("POST", "/api/v1/quota-requests"): {"team": "vision", "flavor": "h100", "gpus": 8,
                                             "starts_on": "2099-01-01", "justification": "intruder"},
        ("POST", "/api/v1/quota-grants/{id}/renew"): {"ends_on": "2099-01-01", "justification": "intruder"},
        ("POST", "/api/v1/webhooks"): {"team": "vision", "url": "http://127.0.0.1:9/intruder", "kinds": ["job.failed"]},
        ("PATCH", "/api/v1/webhooks/{id}"): {"url": "http://127.0.0.1:9/intruder", "is_active": False},
        ("DELETE", "/api/v1/webhooks/{id}"): None,
        ("POST", "/api/v1/volumes"): {"team": "vision", "name": "intruder", "storage_class": "standard", "size_gib": 1},
        ("DELETE", "/api/v1/volumes/{id}"): None,
        ("POST", "/api/v1/webhooks/{id}/deliveries/{delivery_id}/resend"): None,
        ("POST", "/api/v1/webhooks/{id}/rotate-secret"): {"keep_previous": False},
        ("PATCH", "/api/v1/notification-preferences/{kind}"): {"email": True},
        ("POST", "/api/v1/group-mappings"): {"group": "intruder", "role": "owner", "team": "vision"},
        ("DELETE", "/api/v1/group-mappings/{id}"): None,
        ("POST", "/api/v1/member-caps"): {"team": "vision", "flavor": "h100", "max_gpus": 0},
        ("PATCH", "/api/v1/member-caps/{id}"): {"max_gpus": 0},
        ("DELETE", "/api/v1/member-caps/{id}"): None,
        ("POST", "/api/v1/drains"): {"flavor": "h100", "deadline": "2099-01-01T00:00:00Z",
                                     "reopens_at": "2099-01-02T00:00:00Z", "reason": "intruder"},
        ("POST", "/api/v1/drains/{id}/end"): None,
    }
    assert (method, path) in bodies, f"{method} {path}: add a body that would change the team"
    return bodies[(method, path)]


def snapshot(team) -> dict:
    """Everything of the team a write could change."""
    return {
        "jobs": sorted(Job.objects.filter(team=team).values_list("id", "name", "state")),
        "requests": sorted(QuotaRequest.objects.filter(team=team).values_list("id", "status")),
        "grants": sorted(QuotaGrant.objects.filter(team=team).values_list("id", "gpus", "ends_at")),
        "webhooks": sorted(Webhook.objects.filter(team=team).values_list("id", "url", "is_active")),
        "deliveries": WebhookDelivery.objects.filter(webhook__team=team).count(),
        "tokens": sorted(ApiToken.objects.filter(team=team).values_list("id", "revoked_at")),
        "mappings": sorted(GroupMapping.objects.filter(team=team).values_list("id", "group", "role")),
        "members": sorted(team.memberships.values_list("user__username", "role")),
        "caps": sorted(MemberCap.objects.filter(team=team).values_list("id", "user", "max_gpus", "max_jobs")),
        "drains": sorted(Drain.objects.values_list("id", "ended_at")),
        "volumes": sorted(Volume.objects.filter(team=team).values_list("id", "name", "size_gib")),
    }


def shows_marker(response) -> bool:
    return MARKER in response.content.decode(errors="replace")


def test_no_route_shows_anything_of_a_team_to_those_outside_it(world, callers):
    walked = set()
    for method, path in routes(callers["owner"]):
        if method not in ("GET",):
            continue
        url = url_of(path, world)
        for name, client in callers.items():
            queries = [{}] + ([{"team": "vision"}] if "{" not in path else [])
            answers = [client.get(url, query) for query in queries]
            seen = any(shows_marker(answer) for answer in answers)
            if name in INSIDERS:
                assert section(path) in SEES, f"{path}: say who of the team may see it in SEES"
                assert seen == (name in SEES[section(path)]), (path, name, answers[0].status_code)
            else:
                assert not seen, (path, name, answers[0].content[:300])
                assert all(answer.status_code < 500 for answer in answers), (path, name)
        walked.add(path)
    assert {"/api/v1/jobs/{id}/logs", "/api/v1/teams/{slug}/access", "/api/v1/webhooks/{id}/deliveries"} <= walked


def test_no_write_by_those_outside_a_team_changes_it_or_says_anything_of_it(world, callers):
    before = snapshot(world["team"])
    writes = [(method, path) for method, path in routes(callers["owner"]) if method not in ("GET", "HEAD", "OPTIONS")]
    assert writes
    for method, path in writes:
        body = body_of(method, path, world)
        for name in ("outsider", "token for another team"):
            response = callers[name].generic(method, url_of(path, world), json.dumps(body) if body else "",
                                             content_type="application/json")
            assert not shows_marker(response), (method, path, name, response.content[:300])
            assert response.status_code < 500, (method, path, name)
            assert snapshot(world["team"]) == before, (method, path, name, response.status_code)


def test_the_team_token_of_its_own_owner_sees_the_team(world, client_as, owner):
    """The walk is not vacuous for tokens: narrowed to the team itself, the same person's
    token sees its rows."""
    client = client_as(token=issue_token(owner, team=world["team"]))
    assert shows_marker(client.get(f"/api/v1/jobs/{world['job'].pk}"))
    assert shows_marker(client.get("/api/v1/teams/vision"))
    assert shows_marker(client.get(f"/api/v1/webhooks/{world['hook'].pk}"))
