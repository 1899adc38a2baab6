"""`cluster.informer`: one kind's store and indexes, kept in step by one watch loop with one
backoff, under both the worker's watch cache and the status watcher. On the in-memory fake."""


from cluster import TransientError
from cluster.fake import FakeCluster
from cluster.informer import Informer, Store

from ..waits import CountedWaits

POD = ("v1", "Pod")


def pod(name: str, *, owners=(), job=None, version=None) -> dict:
    meta = {"name": name, "namespace": "team-a", "labels": {"job": job} if job else {},
            "ownerReferences": [{"name": o} for o in owners]}
    if version:
        meta["resourceVersion"] = version
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def by_owner(obj):
    return [o["name"] for o in obj["metadata"]["ownerReferences"]]


def informer(fake, **options) -> tuple[Informer, list]:
    seen = []
    made = Informer(fake, *POD, on_event=lambda event, obj: (seen.append((event, obj["metadata"]["name"])),
                                                             made.store.apply(event, obj)), **options)
    return made, seen


def test_an_object_that_stays_under_an_index_value_keeps_its_place_there():
    store = Store({"owner": by_owner})
    store.put(pod("a", owners=["x"]))
    store.put(pod("b", owners=["x"]))
    store.put(pod("a", owners=["x", "y"]))
    assert store.by("owner", "x") == [("team-a", "a"), ("team-a", "b")]
    assert store.by("owner", "y") == [("team-a", "a")]


def test_an_object_moved_or_deleted_leaves_no_empty_index_value_behind():
    store = Store({"owner": by_owner})
    store.put(pod("a", owners=["x"]))
    store.put(pod("a", owners=["y"]))
    assert "x" not in store.indexes["owner"]
    store.apply("DELETED", pod("a"))
    assert store.indexes["owner"] == {} and store.objects == {}


def test_an_informer_lists_then_follows_the_watch_from_where_it_stands():
    fake = FakeCluster()
    fake.put(pod("a"))
    made, seen = informer(fake)
    made.pump()
    assert made.state() == "watching" and list(made.objects) == [("team-a", "a")]
    fake.put(pod("b"))
    made.pump()
    assert seen == [("ADDED", "a"), ("ADDED", "b")]  # a is not told again
    assert fake.requests["LIST"] == 1


def test_a_relist_drops_what_the_list_lacks_even_if_the_stream_never_saw_it():
    fake = FakeCluster()
    vanished = []
    made, _ = informer(fake, on_listed=vanished.extend)
    made.pump()
    made.store.put(pod("written-by-us", version="1"))  # as the cache records its own writes
    made.resource_version = None  # as after 410 Gone
    made.pump()
    assert made.objects == {} and [o["metadata"]["name"] for o in vanished] == ["written-by-us"]


def test_failures_are_retried_with_one_growing_backoff_up_to_its_cap():
    fake = FakeCluster()
    fake.fail_next("LIST", TransientError("connection refused"), times=10)
    stop = CountedWaits(limit=6)
    failures = []
    made, _ = informer(fake, stopping=stop, retry=0.5, retry_max=4, on_error=failures.append)
    made.run()
    assert stop.waits == [0.5, 1.0, 2.0, 4.0, 4, 4]
    assert len(failures) == 6 and made.state() == "starting"


def test_a_watch_that_opens_again_starts_the_next_backoff_from_the_first_wait():
    """An API-server restart fails every kind at once: a kind that saw no event since the
    last outage must not start this one from the long wait that outage had grown to."""
    fake = FakeCluster()
    fake.fail_next("LIST", TransientError("connection refused"), times=3)

    class Outage(CountedWaits):
        def wait(self, timeout=None):
            if len(self.waits) == 3:  # the watch is open again (its finite stream ran out): fail it
                fake.fail_next("WATCH", TransientError("connection refused"), times=2)
            return super().wait(timeout)

    stop = Outage(limit=6)
    made, _ = informer(fake, stopping=stop, retry=0.5, retry_max=4)
    made.run()
    assert stop.waits == [0.5, 1.0, 2.0, 0.5, 0.5, 1.0]


def test_a_kind_not_served_is_said_as_such_and_looked_for_again_with_the_same_backoff():
    fake = FakeCluster(missing_kinds=[POD])
    stop = CountedWaits(limit=3)
    made, _ = informer(fake, stopping=stop, retry=1.0)
    made.run()
    assert made.state() == "not served" and made.synced.is_set()
    assert stop.waits == [1.0, 2.0, 4.0]


def test_a_kind_not_served_ends_the_loop_when_its_owner_looks_again_itself():
    fake = FakeCluster(missing_kinds=[POD])
    stop = CountedWaits(limit=3)
    made, _ = informer(fake, stopping=stop, retry_unserved=False)
    made.run()
    assert made.state() == "not served" and stop.waits == []
