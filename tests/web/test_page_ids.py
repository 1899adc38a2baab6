"""Every page of the site has unique element ids, so that each label points at its own field
and each htmx target is one element (issue 52: two forms of the team page once both rendered
``id="id_flavor"``). Each page is rendered by the test client as the person who uses it, over
demo-like data (tests/fixtures/demo.py), and parsed with html.parser. Every URL of the site
is either one of these pages or named below as a POST, a download or a redirect, so a new page
is checked from the start. The browser's accessibility run (axe-core) over the same pages:
tests/web/test_accessibility.py."""

from collections import Counter
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import Job, Volume
from notifications.messages import unsubscribe_token
from notifications.models import Kind
from quotas.models import Drain, GpuFlavor, MemberCap, QuotaGrant, StorageQuota
from tenants.models import GroupMapping

pytestmark = pytest.mark.django_db

# url name -> (who sees it, its arguments from the data); None: signed out
PAGES = {
    "dashboard": ("alice", lambda d: []),
    "login": (None, lambda d: []),
    "accounts:tokens": ("alice", lambda d: []),
    "accounts:group-mappings": ("quinn", lambda d: []),
    "accounts:access": ("alice", lambda d: ["vision"]),
    "jobs:list": ("alice", lambda d: []),
    "jobs:submit": ("alice", lambda d: []),
    "jobs:detail": ("alice", lambda d: [d["running"].pk]),
    "jobs:pods": ("alice", lambda d: [d["running"].pk]),
    "jobs:gpus": ("alice", lambda d: [d["running"].pk]),
    "jobs:logs": ("alice", lambda d: [d["running"].pk]),
    "notifications:preferences": ("alice", lambda d: []),
    "notifications:unsubscribe": (None, lambda d: [unsubscribe_token(d["people"]["alice"], Kind.JOB_FAILED)]),
    "notifications:webhooks": ("alice", lambda d: ["vision"]),
    "notifications:webhook": ("alice", lambda d: ["vision", d["hook"].pk]),
    "console:team": ("alice", lambda d: ["vision"]),
    "console:grant": ("bob", lambda d: ["nlp", d["grant"].pk]),
    "console:quotas": ("quinn", lambda d: []),
    "console:usage": ("quinn", lambda d: []),
    "console:capacity": ("quinn", lambda d: []),
    "console:requests": ("quinn", lambda d: []),
    "console:request": ("quinn", lambda d: [d["pending"].pk]),
    "console:grants": ("quinn", lambda d: []),
    "console:drains": ("quinn", lambda d: []),
    "console:drain": ("quinn", lambda d: [d["drain"].pk]),
    "console:history": ("quinn", lambda d: []),
    "console:eta-accuracy": ("quinn", lambda d: []),
    "console:object-history": ("quinn", lambda d: ["team", d["vision"].pk]),
}
# The team page as each of its people sees it: the owner's forms are what once collided.
TEAM_PAGE_READERS = ("alice", "bob", "carol", "quinn")
POSTS = {
    "logout", "accounts:token-revoke", "accounts:group-mapping-delete", "jobs:preview", "jobs:cancel", "jobs:stop",
    "jobs:start", "jobs:exempt_idle", "jobs:submit_draft", "notifications:webhook-delete",
    "notifications:webhook-ping", "notifications:webhook-rotate", "notifications:delivery-resend",
    "console:member-add", "console:member-remove", "console:cap-set", "console:cap-remove", "console:volume-create",
    "console:volume-delete", "console:grant-renew", "console:request-create", "console:approve", "console:deny",
    "console:grant-end", "console:drain-end",
}
NOT_PAGES = {
    "jobs:log_download", "console:usage-csv",  # text and CSV downloads
    "oidc_authentication_callback", "oidc_authentication_init", "oidc_logout",  # redirects to the IdP
}
ELSEWHERE = ("admin", "api")  # Django's admin, and the API (JSON; its docs page is Swagger UI's)


class Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = Counter()

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for name, value in attrs if name == "id")

    handle_startendtag = handle_starttag


def duplicate_ids(html: str) -> list[str]:
    parser = Ids()
    parser.feed(html)
    return sorted(i for i, n in parser.ids.items() if n > 1)


def url_names(patterns=None, namespace="") -> set[str]:
    names = set()
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            inner = ":".join(filter(None, [namespace, pattern.namespace]))
            if inner.split(":")[0] not in ELSEWHERE and not str(pattern.pattern).startswith(ELSEWHERE):
                names |= url_names(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(":".join(filter(None, [namespace, pattern.name])))
    return names


@pytest.fixture
def pages(demo, client_for, client, fake, monkeypatch):
    """The demo, and what only some pages show: caps, a volume, a drain, a mapping; then
    ``get(name)`` renders one page as the person who uses it."""
    monkeypatch.setattr("quotas.actions.quotas_changed", lambda team: None)
    people, vision = demo["people"], demo["vision"]
    h100 = GpuFlavor.objects.get(name="h100")
    MemberCap.objects.create(team=vision, flavor=h100, user=None, max_gpus=8)
    MemberCap.objects.create(team=vision, flavor=h100, user=people["bob"], max_gpus=4, max_jobs=2)
    StorageQuota.objects.create(team=vision, storage_class="standard", storage_gib=100, volumes=2)
    Volume.objects.create(team=vision, name="datasets", size_gib=10, storage_class="standard")
    GroupMapping.objects.create(group="ml-vision", role=GroupMapping.Role.MEMBER, team=vision)
    now = timezone.now()
    drain = Drain.objects.create(flavor=h100, nodes=["gpu-a"], starts_at=now, deadline=now + timedelta(hours=2),
                                 reopens_at=now + timedelta(hours=3), reason="firmware", created_by=people["quinn"])
    data = {**demo, "drain": drain, "grant": QuotaGrant.objects.filter(team__slug="nlp").first(),
            "running": Job.objects.filter(team=vision, state=State.RUNNING).first()}

    def get(name, who=None):
        default, args = PAGES[name]
        who = who or default
        response = (client_for(people[who]) if who else client).get(reverse(name, args=args(data)))
        assert response.status_code == 200, f"{name} as {who}: HTTP {response.status_code}"
        return response.content.decode()

    return get


def test_every_url_of_the_site_is_a_checked_page_or_named_as_something_else():
    assert url_names() == set(PAGES) | POSTS | NOT_PAGES


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_id_on_the_page_is_unique(pages, name):
    html = pages(name)
    assert 'id="' in html  # a page, with ids to compare
    assert duplicate_ids(html) == []


@pytest.mark.parametrize("who", TEAM_PAGE_READERS)
def test_every_id_on_the_team_page_is_unique_whoever_reads_it(pages, who):
    html = pages("console:team", who)
    assert duplicate_ids(html) == []
    if who == "alice":  # the owner: every form of the page is there
        assert {"request_flavor", "cap_flavor"} <= _ids(html)


def _ids(html: str) -> set[str]:
    parser = Ids()
    parser.feed(html)
    return set(parser.ids)


def test_the_checker_finds_a_duplicate_id():
    assert duplicate_ids('<label for="a"></label><input id="a"><select id="a"></select><br id="b"/>') == ["a"]
