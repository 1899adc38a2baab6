"""Kueue's own words for a workload it has not admitted, kept verbatim, then the platform's.

The conditions are shaped as Kueue v0.19.2 writes them (workload.UnsetQuotaReservationWithCondition
from scheduler.requeueAndUpdate); the messages are copied from its tests
(pkg/scheduler/scheduler_test.go, scheduler_tas_test.go) with this platform's flavor names.
"""

import pytest

from jobs.lifecycle import NEVER_STARTS_REASONS, State
from workloads.kueue import observe_training
from workloads.kueue_words import ADMISSION_GATED, NEXT, PENDING

from ..builders import make_job

pytestmark = pytest.mark.django_db

NOW = "2026-12-07T19:00:00Z"


def quota_reserved(reason: str, message: str) -> dict:
    """QuotaReserved=False and the Admitted=False Kueue syncs with it (SyncAdmittedCondition)."""
    return {"status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message,
         "lastTransitionTime": NOW, "observedGeneration": 1},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "The workload has no reservation",
         "lastTransitionTime": NOW, "observedGeneration": 1},
    ]}, "metadata": {"name": "job-train-1-abcde", "namespace": "team-vision"}}


MORE = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
        "8 more needed")
OVER = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, previously "
        "considered podsets requests (0) + current podset request (32) > maximum capacity (16)")
UNAVAILABLE = "couldn't assign flavors to pod set main: resource example.com/gpu unavailable in ClusterQueue"
TOPOLOGY = 'couldn\'t assign flavors to pod set main: topology "h100" allows to fit only 3 out of 4 pod(s)'
NO_LONGER_FITS = "Workload no longer fits after processing another workload"

CASES = [
    # name, Kueue's reason, Kueue's message, the platform's reason, what the platform's message says
    ("waiting for quota says how many more GPUs must free up", "WaitingForQuota", MORE, "WaitingForQuota",
     "too few free h100 GPUs for this job (32 needed, 8 more must free up)"),
    ("waiting for quota with a message of no numbers does not repeat Kueue", "WaitingForQuota", NO_LONGER_FITS,
     "WaitingForQuota", "Waiting for quota. It starts when"),
    ("more than the quota can ever hold never starts", "ExceedsMaxQuota", OVER, "ExceedsQuota",
     "team vision can use at most 16, borrowing included. As it is, it will never start"),
    ("no matching flavor never starts as it is", "NoMatchingFlavor", UNAVAILABLE, "NoMatchingFlavor",
     "Can never start as it is: team vision's h100 queue offers nothing that fits it."),
    ("a topology that does not fit waits for room", "TopologyPlacementFailed", TOPOLOGY, "TopologyPlacementFailed",
     "do not fit together on the h100 nodes"),
    ("waiting for preempted workloads is about to start", "WaitingForPreemptedWorkloads",
     "Workload has overlapping preemption targets with another workload, but will fit after these preemptions "
     "complete", "WaitingForPreemptedWorkloads", "lower-priority work is being preempted"),
    ("a suspended queue is a drained pool", "Suspended", "ClusterQueue team-vision-h100 is inactive", "Suspended",
     "the h100 pool admits nothing new now"),
    ("a misconfigured queue cannot be queued", "Misconfigured", "workload namespace doesn't match ClusterQueue selector",
     "Misconfigured", "Cannot be queued"),
    ("pending evaluation waits for the scheduler", "PendingEvaluation", "The workload has failed admission checks",
     "PendingEvaluation", "Waiting for the scheduler."),
    ("waiting for pods ready waits for the others' pods", "WaitingForPodsReady",
     "waiting for all admitted workloads to be in PodsReady condition", "WaitingForPodsReady",
     "once the pods of those it admitted are ready"),
    # Without the gate UnadmittedWorkloadsObservability (off by default in v0.19): "Pending".
    ("pending without the gate reads Kueue's message", "Pending", MORE, "WaitingForQuota", "8 more must free up"),
    ("pending over capacity without the gate never starts", "Pending", OVER, "ExceedsQuota", "at most 16"),
    ("a reason newer than the table reads Kueue's message", "SomethingNew", "a new way to wait", "WaitingForQuota",
     "Waiting for quota: a new way to wait"),
]


@pytest.mark.parametrize("name, kueue_reason, kueue_message, reason, says", CASES, ids=[c[0] for c in CASES])
def test_kueue_words_come_first_and_the_platform_adds_its_own(team, flavor, name, kueue_reason, kueue_message,
                                                               reason, says):
    job = make_job(team, flavor, workers=4, gpus_per_worker=8)
    seen = observe_training(job, quota_reserved(kueue_reason, kueue_message), None)
    assert seen.state == State.QUEUED
    assert (seen.kueue_reason, seen.kueue_message) == (kueue_reason, kueue_message)  # verbatim
    assert seen.reason == reason
    assert says in seen.message


def test_every_reason_kueue_says_never_starts_is_one_the_platform_never_queues():
    never = {name for name, found in NEXT.items() if found.reason in NEVER_STARTS_REASONS}
    assert never == {"ExceedsMaxQuota", "NoMatchingFlavor"}


def test_the_table_leaves_admission_gated_and_pending_to_others():
    # AdmissionGated is the platform's gates' to say (held); "Pending" is read from the message.
    assert ADMISSION_GATED not in NEXT and PENDING not in NEXT


def test_kueue_says_nothing_before_it_has_looked(team, flavor):
    job = make_job(team, flavor)
    seen = observe_training(job, {"metadata": {"name": "w"}, "status": {}}, None)
    assert (seen.reason, seen.message) == ("Queued", "Waiting for the scheduler.")
    assert (seen.kueue_reason, seen.kueue_message) == ("", "")


def test_an_admitted_job_carries_no_kueue_reason(team, flavor):
    job = make_job(team, flavor)
    admitted = {"status": {"conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in "
         "ClusterQueue team-vision-h100", "lastTransitionTime": NOW},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
         "lastTransitionTime": NOW}]}}
    seen = observe_training(job, admitted, None)
    assert seen.state == State.ADMITTED and (seen.kueue_reason, seen.kueue_message) == ("", "")


def test_a_job_that_can_never_start_as_kueue_says_is_not_in_the_queue(team, flavor):
    job = make_job(team, flavor, workers=4, gpus_per_worker=8)
    job.submit()
    seen = observe_training(job, quota_reserved("NoMatchingFlavor", UNAVAILABLE), None)
    job.observe(seen.state, reason=seen.reason, message=seen.message)
    assert job.never_starts and job.get_state_display() == "Cannot start"


def test_hearing_kueue_writes_only_when_its_words_change(team, flavor, django_assert_num_queries):
    job = make_job(team, flavor)
    job.submit()
    assert job.hear_kueue("WaitingForQuota", MORE) is True
    with django_assert_num_queries(0):
        assert job.hear_kueue("WaitingForQuota", MORE) is False
    job.refresh_from_db()
    assert (job.kueue_reason, job.kueue_message) == ("WaitingForQuota", MORE)
    assert job.hear_kueue("", "") is True  # admitted: Kueue no longer says why it waits
    job.refresh_from_db()
    assert (job.kueue_reason, job.kueue_message) == ("", "")


def test_kueues_words_go_when_the_job_stops_waiting(team, flavor):
    job = make_job(team, flavor)
    job.submit()
    job.hear_kueue("WaitingForQuota", MORE)
    job.transition(State.CANCELLING, reason="CancelRequested")  # its Workload goes: nobody would clear them
    job.refresh_from_db()
    assert (job.kueue_reason, job.kueue_message) == ("", "")
