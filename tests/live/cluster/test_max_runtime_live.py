"""A Kueue job whose maximum runtime passes is stopped by Kueue, and the platform says why
(issue 33, item 1), on the local cluster.

What Kueue (v0.17 to v0.19) does, read from its workload controller: past
`kueue.x-k8s.io/max-exec-time-seconds` of admitted time it sets the Workload's
DeactivationTarget condition (reason MaximumExecutionTimeExceeded), then `spec.active: false`,
then evicts it with reason `DeactivatedDueToMaximumExecutionTimeExceeded`; the Job is
suspended and its pods go. The kind's status mapping makes that `failed`, reason
`MaxRuntimeExceeded`.
"""

import pytest

from jobs.lifecycle import State
from workloads.kueue import API, MAX_EXEC_LABEL

from ...support.cluster import reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

LONG_RUN = {"GPUPLATFORM_FAKE_DURATION": "600s"}  # read by the local cluster's fake kubelet (kwok)


def test_kueue_stops_a_job_past_its_max_runtime_and_the_platform_says_why(live, world, watcher):
    team, h100, _ = world
    h100.default_max_runtime_seconds = 60  # the flavor's default: the job asks for none
    h100.save()
    job = submit(live, team, h100, workers=1, gpus_per_worker=1, env=LONG_RUN)
    assert job.max_runtime_seconds == 60
    namespace = team.namespace_name
    batch = live.list("batch/v1", "Job", namespace=namespace)
    assert [b["metadata"]["labels"][MAX_EXEC_LABEL] for b in batch] == ["60"]

    reaches(job, State.RUNNING, timeout=120)
    left = job.runtime_left()
    assert left is not None and left.total_seconds() <= 60

    reaches(job, State.FAILED, timeout=240)
    assert job.reason == "MaxRuntimeExceeded"
    assert job.message == "Stopped: the job ran longer than its max runtime of 1 min."
    # Kueue's own words, as the watcher read them
    workload = live.list(API, "Workload", namespace=namespace)[0]
    assert workload["spec"]["active"] is False
    evicted = next(c for c in workload["status"]["conditions"] if c["type"] == "Evicted")
    assert evicted["status"] == "True" and evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    # the Job is suspended: no pod of it stays running
    wait_until(lambda: not [p for p in live.list("v1", "Pod", namespace=namespace)
                            if (p.get("status") or {}).get("phase") == "Running"],
               timeout=60, message="the job's pods to stop")
    assert job.runtime_left() is None
