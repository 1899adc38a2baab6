"""WatchStream against scripted stubs: the paths a live API server rarely shows on demand
(410 Gone, a broken stream, an ERROR event), each checked for what the caller sees."""

from __future__ import annotations

import pytest

from cluster import PermanentError, TransientError
from cluster.watch import Gone, WatchStream


def cm(name, rv, data="1"):
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}, "data": {"v": data}}


class Source:
    """One scripted watch response: events, then optionally a failure."""

    def __init__(self, events, fail_with=None):
        self.events, self.fail_with, self.closed = events, fail_with, False

    def __iter__(self):
        yield from self.events
        if self.fail_with:
            raise self.fail_with

    def close(self):
        self.closed = True


class Script:
    """Hands out scripted LIST results and watch responses and records what was asked."""

    def __init__(self, lists=(), opens=()):
        self.lists, self.opens = list(lists), list(opens)
        self.opened_at, self.sources = [], []
        self.stream = None

    def lister(self):
        return self.lists.pop(0)

    def opener(self, version, seconds):
        self.opened_at.append(version)
        if not self.opens:  # script exhausted: end the test's stream
            self.stream.stop()
            return Source([])
        step = self.opens.pop(0)
        if isinstance(step, Exception):
            raise step
        self.sources.append(step)
        return step

    def watch(self, **kwargs):
        self.stream = WatchStream(lister=self.lister, opener=self.opener, **kwargs)
        return self.stream


def names(events):
    return [(kind, obj["metadata"]["name"]) for kind, obj in events]


def test_a_stream_without_a_version_lists_first_and_watches_from_the_list_version():
    script = Script(lists=[([cm("a", 5)], "7")], opens=[Source([{"type": "ADDED", "object": cm("b", 8)}])])
    events = list(script.watch())
    assert names(events) == [("ADDED", "a"), ("ADDED", "b")]
    assert script.opened_at[0] == "7"


def test_a_broken_connection_resumes_from_the_last_version_without_replaying():
    script = Script(
        opens=[
            Source([{"type": "ADDED", "object": cm("a", 11)}], fail_with=TransientError("reset")),
            Source([{"type": "MODIFIED", "object": cm("a", 12, "2")}]),
        ]
    )
    events = list(script.watch(resource_version="10"))
    assert names(events) == [("ADDED", "a"), ("MODIFIED", "a")]
    assert script.opened_at[:2] == ["10", "11"]
    assert all(source.closed for source in script.sources)


def test_gone_on_open_relists_and_emits_what_changed_while_away():
    script = Script(
        lists=[([cm("kept", 3), cm("changed", 9, "new"), cm("new", 9)], "20")],
        opens=[
            Source([
                {"type": "ADDED", "object": cm("kept", 3)},
                {"type": "ADDED", "object": cm("changed", 4)},
                {"type": "ADDED", "object": cm("vanished", 5)},
            ], fail_with=TransientError("reset")),
            Gone("too old resource version"),
            Source([{"type": "DELETED", "object": cm("new", 21)}]),
        ],
    )
    stream = script.watch(resource_version="2")
    events = list(stream)
    assert names(events[3:]) == [("MODIFIED", "changed"), ("ADDED", "new"), ("DELETED", "vanished"), ("DELETED", "new")]
    assert stream.relists == 1
    assert script.opened_at[:4] == ["2", "5", "20", "21"]


def test_an_expired_error_event_in_the_stream_also_relists():
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}
    script = Script(
        lists=[([cm("a", 30)], "31")],
        opens=[Source([{"type": "ADDED", "object": cm("a", 6)}, gone, {"type": "ADDED", "object": cm("x", 7)}])],
    )
    stream = script.watch(resource_version="5")
    assert names(stream) == [("ADDED", "a"), ("MODIFIED", "a")]
    assert stream.relists == 1 and script.opened_at[1] == "31"


def test_bookmarks_move_the_version_but_are_not_events():
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "50"}}}
    script = Script(opens=[Source([bookmark])])
    stream = script.watch(resource_version="40")
    assert list(stream) == []
    assert script.opened_at == ["40", "50"] and stream.resource_version == "50"


def test_a_failure_to_reopen_is_raised_and_iterating_again_carries_on():
    script = Script(
        opens=[
            Source([{"type": "ADDED", "object": cm("a", 11)}], fail_with=TransientError("reset")),
            TransientError("connection refused"),
            Source([{"type": "MODIFIED", "object": cm("a", 12)}]),
        ]
    )
    stream = script.watch(resource_version="10")
    seen = []
    with pytest.raises(TransientError):
        seen.extend(stream)
    seen.extend(stream)
    assert names(seen) == [("ADDED", "a"), ("MODIFIED", "a")]
    assert script.opened_at[:3] == ["10", "11", "11"]


def test_a_permanent_error_event_ends_the_stream_with_that_error():
    forbidden = {"type": "ERROR", "object": {"kind": "Status", "code": 403, "message": "forbidden"}}
    script = Script(opens=[Source([forbidden])])
    with pytest.raises(PermanentError, match="forbidden"):
        list(script.watch(resource_version="1"))


def test_stop_ends_the_iteration_and_closes_the_open_response():
    first = Source([{"type": "ADDED", "object": cm("a", 2)}, {"type": "ADDED", "object": cm("b", 3)}])
    script = Script(opens=[first])
    stream = script.watch(resource_version="1")
    for _kind, _obj in stream:
        stream.stop()
    assert first.closed and script.opened_at == ["1"]


def test_the_timeout_ends_the_stream_and_bounds_each_request():
    now = [0.0]
    script = Script(opens=[Source([{"type": "ADDED", "object": cm("a", 2)}]), Source([]), Source([])])
    asked = []

    def opener(version, seconds):
        asked.append(seconds)
        now[0] += seconds  # the server held the request for its whole timeout
        return script.opener(version, seconds)

    stream = WatchStream(lister=script.lister, opener=opener, resource_version="1", timeout=90,
                         window=60, clock=lambda: now[0])
    script.stream = stream
    assert names(stream) == [("ADDED", "a")]
    assert asked == [60, 30]
    assert len(script.opens) == 1  # ended by the deadline, not by running out of script
