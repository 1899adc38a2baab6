"""Every page of the site has unique element ids, so that each label points at its own field
and each htmx target is one element (issue 52: two forms of the team page once both rendered
``id="id_flavor"``). Each page (tests/support/pages.py) is rendered by the test client as the
person who uses it, over demo-like data (`every_page`, tests/fixtures/demo.py), and parsed with
html.parser. The browser's accessibility run (axe-core) over the same pages:
tests/web/test_accessibility.py."""

from collections import Counter
from html.parser import HTMLParser

import pytest

from ..support.pages import NOT_PAGES, PAGES, POSTS, path_of, url_names

pytestmark = pytest.mark.django_db

# The team page as each of its people sees it: the owner's forms are what once collided.
TEAM_PAGE_READERS = ("alice", "bob", "carol", "quinn")


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


@pytest.fixture
def pages(every_page, client_for, client):
    """``get(name)``: the page rendered as the person who uses it (or as ``who``)."""
    def get(name, who=None):
        who = who or PAGES[name][0]
        response = (client_for(every_page["people"][who]) if who else client).get(path_of(name, every_page))
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
