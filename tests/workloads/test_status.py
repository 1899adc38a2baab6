"""What the cluster shows, said in the lifecycle's words; and how the row catches up."""

import pytest

from jobs.lifecycle import State, path
from jobs.models import Job
from quotas.models import Scheduler
from workloads.kueue import observe_training as observe_kueue_training
from workloads.kueue_words import quota_message
from workloads.serving import observe_inference
from workloads.volcano import observe_training as observe_volcano_training

from ..builders import make_flavor, make_job

pytestmark = pytest.mark.django_db


def cond(kind, status="True", reason="", message=""):
    return {"type": kind, "status": status, "reason": reason, "message": message}


def workload(*conditions):
    return {"metadata": {"name": "w"}, "status": {"conditions": list(conditions)}}


def requeued(*conditions, count, at):
    return {**workload(*conditions), "status": {"conditions": list(conditions),
                                                "requeueState": {"count": count, "requeueAt": at}}}


def batch(*conditions, ready=0):
    return {"metadata": {"name": "j"}, "status": {"conditions": list(conditions), "ready": ready}}


OVER = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (32) > maximum capacity (16)")
MORE = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"

KUEUE_CASES = [
    ("no workload yet says nothing", None, None, None, None),
    ("a pending workload is queued", workload(), None, State.QUEUED, "Waiting for the scheduler."),
    ("over capacity can never start", workload(cond("QuotaReserved", "False", "Pending", OVER)), None,
     State.QUEUED, "Can never start: this job needs 32 h100 GPUs but team vision can use at most 16"),
    ("too little free quota waits", workload(cond("QuotaReserved", "False", "Pending", MORE)), None,
     State.QUEUED, "Waiting for quota: team vision has too few free h100 GPUs for this job (32 needed, 8 more"),
    ("admitted but not all workers ready", workload(cond("QuotaReserved"), cond("Admitted")), batch(ready=2),
     State.ADMITTED, "Quota reserved"),
    ("admitted with every worker ready runs", workload(cond("Admitted")), batch(ready=4), State.RUNNING,
     "All 4 workers are running."),
    ("preempted in the cohort", workload(cond("Evicted", reason="Preempted"),
                                         cond("Preempted", reason="InCohortReclamation",
                                              message="Preempted to accommodate a workload due to reclamation within the cohort")),
     None, State.PREEMPTED, "Preempted by a higher-priority job in the cohort"),
    ("over max runtime fails", workload(cond("Evicted", reason="MaximumExecutionTimeExceeded")), None,
     State.FAILED, "max runtime"),
    ("deactivated over max runtime fails (Kueue 0.17)",
     workload(cond("Evicted", reason="DeactivatedDueToMaximumExecutionTimeExceeded"),
              cond("QuotaReserved", status="False")), batch(), State.FAILED, "max runtime"),
    ("deactivated for another cause fails with Kueue's words",
     workload(cond("Evicted", reason="DeactivatedDueToSomethingElse", message="deactivated by an admin")),
     None, State.FAILED, "deactivated by an admin"),
    ("pods not ready in time after every retry fails, with Kueue's words",
     workload(cond("Evicted", reason="DeactivatedDueToRequeuingLimitExceeded",
                   message="exceeding the maximum number of re-queuing retries")),
     None, State.FAILED, "not all running in time after admission, again after every retry (exceeding the maximum"),
    ("pods not ready in time is evicted and requeued (WaitForPodsReady)",
     requeued(cond("Evicted", reason="PodsReadyTimeout", message="Exceeded the PodsReady timeout vision/w"),
              cond("QuotaReserved", "False", "Pending"), count=1, at="2026-12-07T20:15:00Z"),
     batch(), State.PREEMPTED, "not all running within Kueue's time limit after admission, so its GPUs went back "
                               "to the queue; it queues again from 20:15 UTC (retry 1)."),
    ("a workload whose object was deleted (a cancel) says nothing of the job's end (Kueue 0.19)",
     workload(cond("Finished", reason="OwnerNotFound", message="owner not found"), cond("Admitted", "False")), None,
     None, None),
    ("a complete batch job succeeded", workload(cond("Finished", reason="Succeeded")), batch(cond("Complete")),
     State.SUCCEEDED, "All workers finished successfully."),
    ("a failed batch job failed with its message", workload(), batch(cond("Failed", reason="BackoffLimitExceeded",
                                                                          message="Job has reached the specified backoff limit")),
     State.FAILED, "backoff limit"),
]


@pytest.mark.parametrize("name, wl, bj, state, message", KUEUE_CASES, ids=[c[0] for c in KUEUE_CASES])
def test_kueue_training_observations(team, flavor, name, wl, bj, state, message):
    job = make_job(team, flavor, workers=4, gpus_per_worker=8)
    seen = observe_kueue_training(job, wl, bj)
    if state is None:
        assert seen is None
    else:
        assert seen.state == state
        assert message in seen.message


def vcjob(phase, **extra):
    return {"metadata": {"name": "v"}, "status": {"state": {"phase": phase, **extra}}}


VOLCANO_CASES = [
    ("pending gang waits for room", vcjob("Pending"), {"status": {"phase": "Pending", "conditions": [
        cond("Unschedulable", message="2/2 tasks in gang unschedulable: 0/6 nodes are available")]}},
     State.QUEUED, "Waiting for room for all 2 workers at once: 2/2 tasks in gang unschedulable"),
    ("pending gang without a word from volcano", vcjob("Pending"), {"status": {"phase": "Pending"}},
     State.QUEUED, "Waiting for room for all 2 workers at once."),
    ("inqueue gang is admitted", vcjob("Pending"), {"status": {"phase": "Inqueue"}}, State.ADMITTED, "The gang fits"),
    # Volcano's enqueue counts every node's GPUs; the flavor's nodes may not hold the gang.
    ("inqueue gang that cannot be placed waits for room", vcjob("Pending"), {"status": {"phase": "Inqueue", "conditions": [
        cond("Unschedulable", message="2/2 tasks in gang unschedulable: 0/9 nodes are available")]}},
     State.ADMITTED, "Admitted by the queue. Waiting for room for all 2 workers at once: 2/2 tasks in gang unschedulable"),
    ("running", vcjob("Running"), None, State.RUNNING, "All workers are running."),
    ("completed", vcjob("Completed"), None, State.SUCCEEDED, "finished successfully"),
    ("aborted fails", vcjob("Aborted"), None, State.FAILED, "aborted"),
    ("restarting after eviction", vcjob("Restarting"), None, State.PREEMPTED, "evicted"),
]


@pytest.mark.parametrize("name, vj, pg, state, message", VOLCANO_CASES, ids=[c[0] for c in VOLCANO_CASES])
def test_volcano_training_observations(team, name, vj, pg, state, message):
    job = make_job(team, make_flavor("a100", scheduler=Scheduler.VOLCANO), workers=2)
    seen = observe_volcano_training(job, vj, pg)
    assert seen.state == state and message in seen.message


def test_a_gang_beyond_the_quota_can_never_start(team):
    job = make_job(team, make_flavor("a100", scheduler=Scheduler.VOLCANO), workers=3, gpus_per_worker=8)
    seen = observe_volcano_training(job, vcjob("Pending"), {"status": {"phase": "Pending"}}, ceiling_gpus=lambda: 8)
    assert (seen.state, seen.reason) == (State.QUEUED, "ExceedsQuota")
    assert seen.message == ("Can never start: this job needs 24 a100 GPUs but team vision can use at most 8, "
                            "borrowing included.")
    within = observe_volcano_training(job, vcjob("Pending"), {"status": {"phase": "Pending"}}, ceiling_gpus=lambda: 32)
    assert within.reason == "WaitingForResources"


def test_inference_states(team, flavor):
    job = make_job(team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=2)
    gated = {"spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
    placed = {"spec": {"nodeName": "h100-0"}}
    assert observe_inference(job, None, []) is None
    assert observe_inference(job, {"status": {}}, [gated]).state == State.QUEUED
    assert observe_inference(job, {"status": {}}, [placed]).state == State.ADMITTED
    assert observe_inference(job, {"status": {"readyReplicas": 2}}, [placed, placed]).message == "2 replicas ready."


def test_unknown_kueue_wording_is_passed_through(team, flavor):
    job = make_job(team, flavor)
    assert quota_message(job, "something new") == "Waiting for quota: something new"


@pytest.mark.parametrize("current, target, expected", [
    (State.SUBMITTED, State.RUNNING, [State.ADMITTED, State.RUNNING]),
    (State.QUEUED, State.SUCCEEDED, [State.ADMITTED, State.SUCCEEDED]),
    (State.RUNNING, State.PREEMPTED, [State.PREEMPTED]),
    (State.PREEMPTED, State.RUNNING, [State.ADMITTED, State.RUNNING]),
    # Going backwards is never a preemption the cluster did not report.
    (State.RUNNING, State.QUEUED, None),
    (State.RUNNING, State.ADMITTED, None),
    (State.QUEUED, State.QUEUED, []),
    (State.SUCCEEDED, State.RUNNING, None),
])
def test_path_finds_the_missed_steps(current, target, expected):
    assert path(current, target) == expected


def test_observe_fills_in_missed_steps_with_events_and_timestamps(team, flavor):
    job = make_job(team, flavor)
    job.submit()
    assert job.observe(State.RUNNING, reason="Running", message="All 1 workers are running.")
    job.refresh_from_db()
    assert job.state == State.RUNNING and job.admitted_at and job.started_at
    assert [e.to_state for e in job.events.all()] == ["submitted", "admitted", "running"]


def test_observe_writes_nothing_when_nothing_changed(team, flavor, django_assert_num_queries):
    job = make_job(team, flavor)
    job.submit()
    job.observe(State.QUEUED, reason="WaitingForQuota", message="m1")
    with django_assert_num_queries(0):
        assert job.observe(State.QUEUED, reason="WaitingForQuota", message="m1") is False
    assert job.observe(State.QUEUED, reason="WaitingForQuota", message="m2") is True
    job.refresh_from_db()
    assert job.message == "m2" and job.events.count() == 2


def test_a_cancelling_job_ignores_progress_but_not_an_end(team, flavor):
    job = make_job(team, flavor)
    job.submit()
    job.transition(State.CANCELLING)
    assert job.observe(State.RUNNING, reason="Running", message="") is False
    assert job.observe(State.SUCCEEDED, reason="Completed", message="") is True


def test_a_running_job_whose_workers_finish_one_by_one_is_not_recorded_as_preempted(team, flavor):
    job = make_job(team, flavor, workers=2)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        job.transition(state)
    # Kueue still admits it; one worker has finished, so fewer are ready than workers.
    seen = observe_kueue_training(job, workload(cond("Admitted")), batch(ready=1))
    assert seen.state == State.ADMITTED
    assert job.observe(seen.state, reason=seen.reason, message=seen.message) is False
    job.refresh_from_db()
    assert job.state == State.RUNNING
    assert not job.events.filter(to_state=State.PREEMPTED).exists()


def test_a_completing_volcano_gang_is_still_running(team):
    a100 = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    job = make_job(team, a100, workers=2)
    assert observe_volcano_training(job, vcjob("Completing"), None).state == State.RUNNING


def test_a_pods_ready_timeout_names_no_preemptor_and_keeps_kueues_reason(team, flavor):
    job = make_job(team, flavor, workers=4, gpus_per_worker=8)
    seen = observe_kueue_training(job, workload(cond("Evicted", reason="PodsReadyTimeout")), batch())
    assert (seen.state, seen.reason, seen.preempted) == (State.PREEMPTED, "PodsReadyTimeout", None)
    assert "queues again after a backoff." in seen.message
