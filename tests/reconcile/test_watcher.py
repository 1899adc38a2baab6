"""The status watcher on the in-memory cluster: events move jobs, resumes lose nothing."""

import threading
import time

import pytest

from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Job
from jobs.tasks import reconcile_job
from jobs.watch.watcher import StatusWatcher

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def running_watcher(fake):
    watcher = StatusWatcher(fake, resync_seconds=0.5, retry_seconds=0.05)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    yield watcher
    watcher.stop()
    thread.join(timeout=10)


def workload_for(job, *conditions):
    name = object_name(job)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"job-{name}-abcde", "namespace": job.team.namespace_name,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u"}]},
        "spec": {}, "status": {"conditions": [
            {"type": t, "status": "True", "reason": r, "message": m} for t, r, m in conditions]},
    }


def state_of(job):
    return Job.objects.get(pk=job.pk).state


def test_workload_admission_and_completion_move_the_job(fake, running_watcher, team, flavor):
    make_quota(team, flavor)
    job = make_job(team, flavor, workers=2)
    job.submit()
    reconcile_job(job.pk)
    assert state_of(job) == State.QUEUED
    fake.put(workload_for(job, ("QuotaReserved", "QuotaReserved", ""), ("Admitted", "Admitted", "")))
    assert wait_for(lambda: state_of(job) == State.ADMITTED)
    [batch] = fake.stored("batch/v1", "Job")
    batch["status"] = {"ready": 2}
    fake.put(batch)
    assert wait_for(lambda: state_of(job) == State.RUNNING)
    batch["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    fake.put(batch)
    assert wait_for(lambda: state_of(job) == State.SUCCEEDED)
    assert [e.to_state for e in Job.objects.get(pk=job.pk).events.all()] == [
        "submitted", "queued", "admitted", "running", "succeeded"]


def test_kueue_words_for_a_waiting_job_are_kept_verbatim_and_cleared_at_admission(fake, running_watcher, team,
                                                                                   flavor):
    make_quota(team, flavor)
    job = make_job(team, flavor, workers=2)
    job.submit()
    reconcile_job(job.pk)
    said = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
            "2 more needed")
    waiting = workload_for(job)
    waiting["status"]["conditions"] = [{"type": "QuotaReserved", "status": "False", "reason": "WaitingForQuota",
                                        "message": said, "lastTransitionTime": "2026-12-07T19:00:00Z"}]
    fake.put(waiting)
    assert wait_for(lambda: Job.objects.get(pk=job.pk).kueue_message == said)
    row = Job.objects.get(pk=job.pk)
    assert (row.state, row.kueue_reason, row.reason) == (State.QUEUED, "WaitingForQuota", "WaitingForQuota")
    assert "2 more must free up" in row.message
    fake.put(workload_for(job, ("QuotaReserved", "QuotaReserved", ""), ("Admitted", "Admitted", "")))
    assert wait_for(lambda: state_of(job) == State.ADMITTED)
    assert wait_for(lambda: Job.objects.get(pk=job.pk).kueue_reason == "")


def test_a_watch_that_lost_its_history_relists_and_catches_up(fake, running_watcher, team, flavor):
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    fake.compact()  # the next resume gets 410 Gone and must relist
    fake.put(workload_for(job, ("Admitted", "Admitted", "")))
    assert wait_for(lambda: state_of(job) == State.ADMITTED)


def test_events_for_objects_of_unknown_jobs_are_ignored(fake, running_watcher, team, flavor):
    fake.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "stray", "namespace": "team-vision", "labels": {"app.kubernetes.io/managed-by": "gpuplatform",
                                                                  "gpuplatform.io/job": "999999"}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    assert wait_for(lambda: running_watcher.transitions == 0 and not running_watcher.stop_event.is_set(), 1)


def test_a_cluster_warning_about_a_waiting_job_is_shown_with_its_state(fake, running_watcher, team, flavor):
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    name = object_name(job)
    # The event may well arrive before the pod it is about.
    fake.put({"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "FailedScheduling",
              "message": "0/9 nodes are available: 9 node(s) didn't match Pod's node affinity/selector.",
              "metadata": {"name": "e1", "namespace": "team-vision"},
              "involvedObject": {"kind": "Pod", "namespace": "team-vision", "name": f"{name}-0-abcde"}})
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{name}-0-abcde", "namespace": "team-vision",
        "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}}})
    fake.put(workload_for(job, ("Admitted", "Admitted", "")))
    assert wait_for(lambda: "FailedScheduling: 0/9 nodes" in Job.objects.get(pk=job.pk).message)
    assert Job.objects.get(pk=job.pk).state == State.ADMITTED


def test_a_burst_of_changes_is_read_in_one_evaluation(fake, team, flavor):
    """A pod, its Workload and its Job change together: the watcher waits `gather_seconds`
    after the first mark, then evaluates every job marked meanwhile at once."""
    watcher = StatusWatcher(fake, resync_seconds=3600, retry_seconds=0.05, gather_seconds=0.5)
    batches = []
    watcher.evaluate = lambda ids: batches.append((time.monotonic(), set(ids))) or 0
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        jobs = [make_job(team, flavor, name=f"burst-{i}") for i in range(3)]  # drafts: no resync reads them
        time.sleep(0.3)  # the loop is running
        started = time.monotonic()
        for job in jobs:
            watcher._record(("kueue.x-k8s.io/v1beta2", "Workload"), "ADDED", {
                **workload_for(job), "metadata": {**workload_for(job)["metadata"], "labels": {"gpuplatform.io/job": str(job.pk)}}})
            time.sleep(0.1)
        assert wait_for(lambda: batches, timeout=5)
        time.sleep(0.6)
        [(at, ids)] = batches
        assert ids == {job.pk for job in jobs}
        assert 0.5 <= at - started < 1.5
    finally:
        watcher.stop()
        thread.join(timeout=10)


def test_the_watcher_reads_only_warning_events(fake, team, flavor):
    """The API server filters Events (``type=Warning``): a pod's Normal ones never reach it."""
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    about = {"kind": "Pod", "namespace": "team-vision", "name": f"{object_name(job)}-0-abcde"}
    for name, kind in [("normal", "Normal"), ("warning", "Warning")]:
        fake.put({"apiVersion": "v1", "kind": "Event", "type": kind, "reason": "Why", "message": name,
                  "metadata": {"name": name, "namespace": "team-vision"}, "involvedObject": about})
    watcher = StatusWatcher(fake, resync_seconds=3600, retry_seconds=0.05)
    recorded = []
    record = watcher._record
    watcher._record = lambda kind, event, obj: (recorded.append((kind, obj["metadata"]["name"])), record(kind, event, obj))
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: (("v1", "Event"), "warning") in recorded)
    finally:
        watcher.stop()
        thread.join(timeout=10)
    assert [name for kind, name in recorded if kind == ("v1", "Event")] == ["warning"]


# --- a cancel's end: seen by the watcher's loop, not only at its resync -------------------------
def watching(fake) -> tuple[StatusWatcher, threading.Thread]:
    """A watcher whose resync never comes during a test, listed and running."""
    watcher = StatusWatcher(fake, resync_seconds=3600, retry_seconds=0.05)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    assert wait_for(watcher._listed)
    time.sleep(1.5)  # past its first loop, whose resync reads every live job
    return watcher, thread


def stop(watcher: StatusWatcher, thread: threading.Thread) -> None:
    watcher.stop()
    thread.join(timeout=10)


def pod_on_a_node(job) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{object_name(job)}-0-abcde", "namespace": job.team.namespace_name,
        "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


def test_a_cancel_with_nothing_left_on_the_cluster_ends_at_the_watchers_next_loop(fake, team, flavor, owner):
    """No event tells of a job whose objects were never created (or went while nobody watched):
    the watcher looks at the jobs being cancelled in every loop, not only at its resync."""
    watcher, thread = watching(fake)
    try:
        job = make_job(team, flavor)
        job.submit()
        assert job.request_cancel(owner)  # its reconcile never runs (a broker down)
        assert wait_for(lambda: state_of(job) == State.CANCELLED)
    finally:
        stop(watcher, thread)


def test_a_watcher_restarted_mid_cancel_still_ends_it(fake, team, flavor, owner):
    make_quota(team, flavor)
    job = make_job(team, flavor)
    job.submit()
    reconcile_job(job.pk)
    fake.put(pod_on_a_node(job))
    watcher, thread = watching(fake)
    try:
        assert Job.objects.get(pk=job.pk).request_cancel(owner)
        reconcile_job(job.pk)  # deletes its batch Job; the pod is the garbage collector's
        time.sleep(1.5)  # a few loops: the pod is still there
        assert state_of(job) == State.CANCELLING
    finally:
        stop(watcher, thread)
    fake.remove("v1", "Pod", pod_on_a_node(job)["metadata"]["name"], team.namespace_name)  # while none watches
    watcher, thread = watching(fake)
    try:
        assert wait_for(lambda: state_of(job) == State.CANCELLED)
    finally:
        stop(watcher, thread)
