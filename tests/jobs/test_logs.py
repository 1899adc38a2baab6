"""Container logs: the bounded tail kept of a failed container, how a pod's failures are read,
the plain words for what the door says, and the watcher keeping a failed run's last lines
while its pod still exists (a failed job's pods do not stay)."""

import pytest

from cluster import FakeCluster, NotFound, PermanentError, TransientError
from jobs.models.logtails import MAX_TAIL_BYTES, MAX_TAIL_LINES, MAX_TAILS_PER_JOB, LogTail, bounded_tail
from jobs.watch.logs import failures_of, keep_failed, pod_view, problem_of
from jobs.watch.watcher import POD, StatusWatcher

from ..builders import make_flavor, make_job, make_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def job():
    return make_job(make_team("vision"), make_flavor("h100"), name="train")


def pod(job, name="train-1-0-abc", *, state=None, last=None, restarts=0, uid=None):
    status = {"name": "main", "restartCount": restarts, "state": state or {"running": {}}}
    if last:
        status["lastState"] = last
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": job.team.namespace_name, "uid": uid or f"uid-{name}",
                         "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}},
            "spec": {"containers": [{"name": "main", "image": "x"}], "nodeName": "h100-0"},
            "status": {"phase": "Failed" if state and "terminated" in state else "Running",
                       "containerStatuses": [status]}}


def ended(code, reason="Error", at="2026-01-05T09:01:00Z", message=""):
    return {"terminated": {"exitCode": code, "reason": reason, "finishedAt": at, "message": message}}


# --- the bounded tail ---------------------------------------------------------------------------------
def test_a_tail_keeps_the_last_200_lines():
    text = "".join(f"line {i}\n" for i in range(1, 1001))
    kept = bounded_tail(text)
    assert kept.splitlines() == [f"line {i}" for i in range(801, 1001)] and MAX_TAIL_LINES == 200


def test_a_tail_keeps_at_most_64_kib_cut_at_a_line_start():
    text = "".join(f"{i:04d} " + "x" * 1000 + "\n" for i in range(150))
    kept = bounded_tail(text)
    assert len(kept.encode()) <= MAX_TAIL_BYTES == 64 * 1024
    assert kept.startswith(f"{150 - len(kept.splitlines()):04d} ") and kept.endswith("0149 " + "x" * 1000 + "\n")


def test_a_tail_of_one_long_line_is_cut_at_a_character_boundary():
    kept = bounded_tail("é" * 40_000)  # 80,000 bytes, no newline
    assert len(kept.encode()) <= MAX_TAIL_BYTES and set(kept) == {"é"}


# --- reading a pod ------------------------------------------------------------------------------------
def test_failures_are_the_current_or_last_run_ending_non_zero(job):
    assert failures_of(pod(job, state=ended(0, "Completed"))) == []
    current = failures_of(pod(job, state=ended(137, "OOMKilled", message="out of memory")))
    assert [(f.exit_code, f.reason, f.message, f.previous) for f in current] == [(137, "OOMKilled", "out of memory", False)]
    restarted = failures_of(pod(job, state={"running": {}}, last=ended(1), restarts=1))
    assert [(f.exit_code, f.previous, f.restarts) for f in restarted] == [(1, True, 1)]


def test_a_pod_view_says_how_a_failed_container_ended(job):
    view = pod_view(pod(job, state=ended(1, "Error")))
    assert view.failed and view.detail == "exit code 1 (Error)" and view.node == "h100-0"


@pytest.mark.parametrize("error, previous, said", [
    (TransientError("dial tcp :10250: connect: connection refused"), False, "The cluster did not answer just now"),
    (NotFound('pods "p" not found', status=404), False, "This pod is gone from the cluster"),
    (PermanentError("pods/log is forbidden", status=403), False, "does not let the platform read"),
    (PermanentError('previous terminated container "main" in pod "p" not found', status=400), True,
     "has not restarted"),
    (PermanentError('container "main" in pod "p" is waiting to start: ContainerCreating', status=400), False,
     "has not started yet"),
    (PermanentError("Get https://127.0.0.1:16250/containerLogs/...: remote error", status=500), False,
     "has no logs for this container yet"),
])
def test_what_the_door_says_is_told_in_plain_words(error, previous, said):
    sentence = problem_of(error, previous=previous)
    assert said in sentence
    assert error.message not in sentence and "10250" not in sentence and "dial" not in sentence


# --- kept with the job --------------------------------------------------------------------------------
def test_a_later_failure_of_the_same_container_replaces_its_tail(job):
    assert LogTail.objects.keep(job.pk, pod="p-0", container="main", text="first\n", exit_code=1)
    assert LogTail.objects.keep(job.pk, pod="p-0", container="main", text="second\n", exit_code=2, restarts=1)
    tail = LogTail.objects.get()
    assert (tail.text, tail.exit_code, tail.restarts) == ("second\n", 2, 1)


def test_a_job_keeps_at_most_a_few_failed_containers(job):
    for i in range(MAX_TAILS_PER_JOB + 3):
        LogTail.objects.keep(job.pk, pod=f"p-{i}", container="main", text="Traceback\n")
    assert job.log_tails.count() == MAX_TAILS_PER_JOB


def test_nothing_is_kept_for_a_job_that_is_gone(job):
    job_id = job.pk
    job.delete()
    assert not LogTail.objects.keep(job_id, pod="p-0", container="main", text="x")
    assert not LogTail.objects.exists()


def test_keeping_reads_the_failed_run_and_not_twice(job):
    fake = FakeCluster()
    failed = pod(job, state=ended(1, message="failed on purpose"))
    fake.set_pod_logs(job.team.namespace_name, "train-1-0-abc", "".join(f"step {i}\n" for i in range(500)),
                      container="main")
    assert keep_failed(fake, job.pk, failed) == 1
    tail = job.log_tails.get()
    assert tail.text.splitlines()[0] == "step 300" and tail.text.endswith("step 499\n")
    assert tail.ended == "exit code 1 (Error): failed on purpose"
    fake.reset_counts()
    assert keep_failed(fake, job.pk, failed) == 0 and fake.requests["GET"] == 0


def test_a_restarted_container_is_kept_from_its_previous_run(job):
    fake = FakeCluster()
    namespace = job.team.namespace_name
    fake.set_pod_logs(namespace, "train-1-0-abc", "running again\n", container="main")
    fake.set_pod_logs(namespace, "train-1-0-abc", "CUDA out of memory\n", container="main", previous=True)
    keep_failed(fake, job.pk, pod(job, last=ended(1), restarts=1))
    assert job.log_tails.get().text == "CUDA out of memory\n"


def test_a_pod_gone_before_its_logs_were_read_still_keeps_how_it_ended(job):
    keep_failed(FakeCluster(), job.pk, pod(job, state=ended(137, "OOMKilled")))
    tail = job.log_tails.get()
    assert (tail.text, tail.exit_code, tail.reason) == ("", 137, "OOMKilled")


# --- the watcher --------------------------------------------------------------------------------------
def test_the_watcher_keeps_the_last_lines_of_a_container_it_sees_fail(job):
    fake = FakeCluster()
    watcher = StatusWatcher(fake)
    fake.set_pod_logs(job.team.namespace_name, "train-1-0-abc", "step 9 loss 2.1\nRuntimeError: NCCL timeout\n",
                      container="main")
    watcher._record(POD, "ADDED", pod(job))  # running: nothing to keep
    assert watcher.keep_failed_tails() == 0
    watcher._record(POD, "MODIFIED", pod(job, state=ended(1)))
    assert watcher.keep_failed_tails() == 1
    assert job.log_tails.get().text.endswith("RuntimeError: NCCL timeout\n")
    # the same run seen again (a resync, a relist) is not read again
    fake.reset_counts()
    watcher._record(POD, "MODIFIED", pod(job, state=ended(1)))
    assert watcher.keep_failed_tails() == 0 and fake.requests["GET"] == 0


def test_the_watcher_keeps_each_failed_run_of_a_restarting_container(job):
    fake = FakeCluster()
    watcher = StatusWatcher(fake)
    namespace = job.team.namespace_name
    fake.set_pod_logs(namespace, "train-1-0-abc", "first run died\n", container="main")
    watcher._record(POD, "MODIFIED", pod(job, state=ended(1, at="2026-01-05T09:01:00Z")))
    watcher.keep_failed_tails()
    fake.set_pod_logs(namespace, "train-1-0-abc", "second run died\n", container="main")
    watcher._record(POD, "MODIFIED", pod(job, state=ended(1, at="2026-01-05T09:05:00Z"), restarts=1))
    watcher.keep_failed_tails()
    assert job.log_tails.get().text == "second run died\n"
