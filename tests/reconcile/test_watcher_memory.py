"""The watcher's memory of cluster Warnings is bounded: a stream of Warnings about pods that
come and go (a crash-looping job, a busy cluster) cannot grow it without end."""

import threading

import pytest

from jobs.watch.watcher import MAX_WARNINGS, StatusWatcher

from .test_watcher import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_watcher(fake):
    watcher = StatusWatcher(fake, resync_seconds=60, retry_seconds=0.05, max_warnings=50)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    yield watcher
    watcher.stop()
    thread.join(timeout=10)


def warning(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "BackOff",
            "message": f"Back-off restarting failed container (#{i})",
            "metadata": {"name": f"e{i}", "namespace": "team-vision"},
            "involvedObject": {"kind": "Pod", "namespace": "team-vision", "name": f"pod-{i}"}}


def test_the_watchers_memory_of_warnings_is_bounded(fake, small_watcher):
    # Once the first Warning is in, the watcher has listed and is watching: the rest arrive
    # in the order they happen (a list would hand them over in name order).
    fake.put(warning(0))
    assert wait_for(lambda: ("Pod", "team-vision", "pod-0") in small_watcher._warnings)
    for i in range(1, 300):
        fake.put(warning(i))
    assert wait_for(lambda: ("Pod", "team-vision", "pod-299") in small_watcher._warnings)
    assert len(small_watcher._warnings) == 50
    assert ("Pod", "team-vision", "pod-0") not in small_watcher._warnings  # the oldest went first
    assert MAX_WARNINGS >= 1000  # the default leaves room for every pod of a busy cluster


def test_a_deleted_pod_takes_its_warning_with_it(fake, small_watcher):
    fake.put(warning(1))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pod-1", "namespace": "team-vision", "labels": {"app.kubernetes.io/managed-by": "gpuplatform"}}}
    fake.put(pod)
    assert wait_for(lambda: ("Pod", "team-vision", "pod-1") in small_watcher._warnings
                    and ("team-vision", "pod-1") in small_watcher._cache[("v1", "Pod")])
    fake.remove("v1", "Pod", "pod-1", "team-vision")
    assert wait_for(lambda: ("Pod", "team-vision", "pod-1") not in small_watcher._warnings)
