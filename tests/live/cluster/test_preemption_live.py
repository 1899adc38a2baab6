"""The preemption contract on the local cluster (docs/preemption.md): a job's real pods get its
class's grace, and the pods Kueue's preemption deletes are deleted with it; a job inside its
minimum runtime is not preempted by a higher priority, which waits and then preempts; the
GPU-hours it lost appear on the preemptor's team's account.

On kwok's fake nodes no process runs: nothing receives SIGTERM, and no container writes a
termination message. What is proven here is what the API server does: the pods carry
`terminationGracePeriodSeconds` and the variable, and the Job controller's delete asks for
that grace (`metadata.deletionGracePeriodSeconds`). That the kubelet then sends SIGTERM and
waits is Kubernetes' contract, and the checkpoint read from a termination message is tested on
the pods' status as the kubelet writes it (tests/jobs/test_preemption.py)."""

import random
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from console import preemptions
from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Preemption
from quotas.models import PriorityClass
from quotas.tasks import sync_cluster_objects
from workloads import kueue
from workloads.pods import CHECKPOINT_GRACE_ENV

from ...support.cluster import reaches, stays_true, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

LONG_RUN = {"GPUPLATFORM_FAKE_DURATION": "600s"}  # read by the local cluster's fake kubelet (kwok)
MINIMUM_RUNTIME = 90
GRACE = 75


def pod_deletions(api_client, namespace: str, job_id: int, stop: threading.Event) -> list[dict]:
    """The job's pods as a watch sees them being deleted (kwok removes them at once)."""
    from kubernetes import client, watch

    seen: list[dict] = []

    def run():
        core = client.CoreV1Api(api_client)
        stream = watch.Watch()
        while not stop.is_set():
            for event in stream.stream(core.list_namespaced_pod, namespace, label_selector=f"gpuplatform.io/job={job_id}",
                                       timeout_seconds=5):
                pod = event["object"]
                if pod.metadata.deletion_timestamp is not None:
                    seen.append({"name": pod.metadata.name, "grace": pod.metadata.deletion_grace_period_seconds})
                if stop.is_set():
                    break

    threading.Thread(target=run, daemon=True).start()
    return seen


def test_a_job_keeps_its_minimum_runtime_then_is_preempted_with_its_grace_and_charged(
        live, world, watcher, eager_tasks, api_client, keep_classes):
    team, h100, _ = world
    # Job ids of their own: another session's orphan prune (its database) removes the objects
    # labelled with job ids it does not want, on the one shared cluster.
    from django.db import connection
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER SEQUENCE jobs_job_id_seq RESTART WITH {random.randint(10**7, 10**9)}")
    low = PriorityClass.objects.create(name=f"low-{team.slug}", value=10, checkpoint_grace_seconds=GRACE,
                                       minimum_runtime_seconds=MINIMUM_RUNTIME)
    high = PriorityClass.objects.create(name=f"high-{team.slug}", value=1000)
    keep_classes += [low, high]
    sync_cluster_objects(live)
    assert live.get(kueue.API, "WorkloadPriorityClass", kueue.PROTECTED_PRIORITY_CLASS)["value"] == 1_000_000_000
    namespace = team.namespace_name

    victim = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=low, env=LONG_RUN)
    reaches(victim, State.RUNNING)
    victim.refresh_from_db()
    # 1. The real pods carry the grace and are told it.
    pods = live.list("v1", "Pod", namespace=namespace, label_selector=f"gpuplatform.io/job={victim.pk}")
    assert pods and {p["spec"]["terminationGracePeriodSeconds"] for p in pods} == {GRACE}
    assert {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0]["env"]}[CHECKPOINT_GRACE_ENV] == str(GRACE)

    # 2. The watcher raised the running Job to the protected class and Kueue followed.
    def workload():
        found = live.list(kueue.API, "Workload", namespace=namespace)
        return next(w for w in found if w["metadata"]["ownerReferences"][0]["name"] == object_name(victim))

    wait_until(lambda: live.get("batch/v1", "Job", object_name(victim), namespace)["metadata"]["labels"][
        kueue.PRIORITY_LABEL] == kueue.PROTECTED_PRIORITY_CLASS, timeout=30, message="the protected label")
    wait_until(lambda: workload()["spec"].get("priority") == kueue.PROTECTED_PRIORITY_VALUE, timeout=30,
               message="Kueue to give the Workload the protected priority")
    assert workload()["spec"]["priorityClassRef"]["name"] == kueue.PROTECTED_PRIORITY_CLASS

    # 3. A higher priority waits while the minimum runtime lasts.
    stop = threading.Event()
    deleted = pod_deletions(api_client, namespace, victim.pk, stop)
    urgent = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=high, env=LONG_RUN)
    protected_until = victim.run_admitted_at + timedelta(seconds=MINIMUM_RUNTIME)
    left = (protected_until - timezone.now()).total_seconds()
    assert left > 10, f"the test reached the waiting job too late ({left:.0f} s of protection left)"

    def victim_runs_and_urgent_waits():
        victim.refresh_from_db()
        urgent.refresh_from_db()
        return victim.state == State.RUNNING and urgent.state in (State.SUBMITTED, State.QUEUED)

    def dump():
        import json
        for w in live.list(kueue.API, "Workload", namespace=namespace):
            print("WORKLOAD", w["metadata"]["name"], json.dumps(w["spec"].get("priority")),
                  w["spec"].get("priorityClassRef"), json.dumps(w.get("status", {}).get("conditions"))[:2500])
        for j in live.list("batch/v1", "Job", namespace=namespace):
            print("JOB", j["metadata"]["name"], j["metadata"]["labels"], j["spec"].get("suspend"))
        for job in (victim, urgent):
            job.refresh_from_db()
            print("ROW", job.name, job.state, job.reason, job.message, job.run_admitted_at, job.protected_until(),
                  timezone.now(), [(e.created_at, e.to_state, e.reason) for e in job.events.all()])

    try:
        stays_true(victim_runs_and_urgent_waits, seconds=left - 3, message="the victim's protection")
    except BaseException:
        dump()
        raise

    # 4. Then it preempts, the victim's pods are deleted with its grace.
    try:
        reaches(urgent, State.RUNNING, timeout=120)
    except BaseException:
        dump()
        raise
    wait_until(lambda: Preemption.objects.filter(job=victim).exists(), timeout=60, message="the preemption's record")
    preemption = Preemption.objects.get(job=victim)
    assert preemption.preempted_at >= protected_until
    wait_until(lambda: deleted, timeout=30, message="the victim's pods deleted")
    stop.set()
    # The Job controller deletes each pod with its grace; kwok, the fake kubelet, then removes it
    # at once (grace 0), where a real kubelet would send SIGTERM and wait that long.
    first = {}
    for d in deleted:
        first.setdefault(d["name"], d["grace"])
    assert set(first.values()) == {GRACE}, deleted

    # 5. Charged to the preemptor's team, said to the victim.
    assert (preemption.by_job_id, preemption.by_team_id, preemption.by_priority) == (urgent.pk, team.pk, high.name)
    held = Decimal(8 * (preemption.preempted_at - victim.run_admitted_at).total_seconds() / 3600)
    assert abs(preemption.lost_gpu_hours - held) <= Decimal("0.05"), (preemption.lost_gpu_hours, held)
    assert preemption.lost_gpu_hours > 0
    month = (timezone.now() - timedelta(days=1), timezone.now() + timedelta(days=1))
    line = {t.team: t for t in preemptions.totals(*month)}[team.slug]
    assert line.charged_gpu_hours == preemption.lost_gpu_hours and line.preempting == 1
    assert preemption.explanation().startswith(f"Preempted by {team.slug}'s job {urgent.name} (priority {high.name}); ")
    # Seen again by the watcher's resyncs: still one.
    stays_true(lambda: Preemption.objects.filter(job=victim).count() == 1, seconds=8, message="one record")

