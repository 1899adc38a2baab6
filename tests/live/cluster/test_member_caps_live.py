"""Per-person caps on the local cluster (issue 34, item 4, docs/caps.md): a member at their cap
waits with the reason while a teammate's job starts; the waiting job is on the cluster behind
the platform's admission gate (issue 46 item 3: the annotation on its batch Job, its Workload
not admitted with Kueue's reason AdmissionGated, noted beside ours), taking none of the team's
quota; when the member's running job ends, the waiting one is let go by the on-commit trigger of
that end, its gate taken off by one reconcile, and admitted by Kueue.

Celery's messages are taken by this test's main thread, as a worker would take them: the
status watcher (a thread) records the end, and the release it enqueues on commit runs here.
"""

import queue
import uuid

import pytest

from cluster.errors import NotFound
from jobs import actions
from jobs import tasks as job_tasks
from jobs.lifecycle import AT_PERSONAL_CAP, State
from jobs.manifests import object_name
from quotas.models import MemberCap
from tenants.models import Membership
from workloads import gates
from workloads.kueue import WORKLOAD

from ...builders import make_user
from ...support.cluster import reaches, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

FIELDS = {"image": "ghcr.io/example/train:1", "workers": 1, "gpus_per_worker": 4, "cpu_per_worker": 4,
          "memory_per_worker_gib": 2}


@pytest.fixture
def worker(monkeypatch):
    """Messages sent by any thread, run by ``worker.run_until`` in the test's own."""
    sent: queue.Queue = queue.Queue()
    for task in (job_tasks.reconcile_job, job_tasks.release_at_cap):
        monkeypatch.setattr(task, "delay", lambda *args, task=task: sent.put((task, args)))

    class Worker:
        def __init__(self):
            self.ran: list = []

        def run_until(self, name: str, timeout: float = 120) -> None:
            """Run every message as it comes, until one of task ``name`` has run."""
            def step():
                try:
                    task, args = sent.get(timeout=1)
                except queue.Empty:
                    return False
                task.apply(args=args)
                self.ran.append((task.name.rsplit(".", 1)[-1], *args))
                return self.ran[-1][0] == name
            wait_until(step, timeout=timeout, interval=0, message=f"a {name} message")

        def run_all(self) -> None:
            while not sent.empty():
                task, args = sent.get()
                task.apply(args=args)
                self.ran.append((task.name.rsplit(".", 1)[-1], *args))

    return Worker()


def submit(team, flavor, person, name, duration):
    job = actions.submit(team=team, submitter=person, flavor=flavor, name=f"{name}-{uuid.uuid4().hex[:4]}",
                         env={"GPUPLATFORM_FAKE_DURATION": duration}, **FIELDS)
    job.refresh_from_db()
    return job


def on_cluster(live, job) -> bool:
    try:
        return bool(live.get("batch/v1", "Job", object_name(job), job.team.namespace_name))
    except NotFound:
        return False


def gate_on(live, job) -> str | None:
    obj = live.get("batch/v1", "Job", object_name(job), job.team.namespace_name)
    return (obj["metadata"].get("annotations") or {}).get(gates.ANNOTATION)


def quota_reserved(live, job) -> dict | None:
    """The QuotaReserved condition of the job's Workload (Kueue names it after the batch Job)."""
    for workload in live.list(*WORKLOAD, namespace=job.team.namespace_name):
        if any(o.get("name") == object_name(job) for o in workload["metadata"].get("ownerReferences") or ()):
            return next((c for c in (workload.get("status") or {}).get("conditions") or ()
                         if c["type"] == "QuotaReserved"), None)
    return None


def test_a_member_at_the_cap_waits_while_a_teammate_starts_then_goes_ahead_when_their_job_ends(
        live, world, watcher, worker):
    team, h100, _ = world
    ana, bo = make_user(f"ana-{team.slug}"), make_user(f"bo-{team.slug}")
    for person in (ana, bo):
        Membership.objects.create(team=team, user=person, role=Membership.Role.MEMBER)
    MemberCap.objects.create(team=team, flavor=h100, user=ana, max_gpus=4)  # the team's quota is 8

    first = submit(team, h100, ana, "first", "20s")
    worker.run_all()
    reaches(first, State.RUNNING, timeout=120)

    second = submit(team, h100, ana, "second", "5s")
    worker.run_all()
    second.refresh_from_db()
    assert (second.state, second.reason) == (State.SUBMITTED, AT_PERSONAL_CAP)
    assert second.message == (f"You hold 4 of your 4 {h100.name} GPUs in team {team.slug}; this job needs 4. "
                              f"It starts by itself when enough of your other {h100.name} jobs end.")
    # on the cluster, held inside Kueue by the platform's gate: Kueue, kubectl and its metrics see it
    assert gate_on(live, second) == gates.MEMBER_CAP
    gated = f"Admission is gated by: {gates.MEMBER_CAP}"
    wait_until(lambda: (quota_reserved(live, second) or {}).get("reason") == "AdmissionGated", timeout=60,
               message="Kueue's Workload of the held job gated")
    assert quota_reserved(live, second)["status"] == "False" and quota_reserved(live, second)["message"] == gated
    wait_until(lambda: second.events.filter(reason="AdmissionGated", message__contains=gated).exists(), timeout=60,
               message="Kueue's words noted beside the platform's")

    teammate = submit(team, h100, bo, "teammate", "600s")  # the other 4 GPUs of the team are free
    worker.run_all()
    reaches(teammate, State.RUNNING, timeout=120)
    second.refresh_from_db()
    assert second.at_personal_cap and gate_on(live, second) == gates.MEMBER_CAP

    reaches(first, State.SUCCEEDED, timeout=180)
    worker.run_until("release_at_cap")  # enqueued on commit of the end the watcher recorded
    worker.run_until("reconcile_job")  # one reconcile takes the gate off
    assert ("reconcile_job", second.pk) in worker.ran
    assert gate_on(live, second) is None
    wait_until(lambda: (second.refresh_from_db(), second.admitted_at is not None)[1], timeout=120,
               message="the released job admitted by Kueue")
    assert second.events.filter(reason="UnderPersonalCap").exists()
    teammate.refresh_from_db()
    assert teammate.state == State.RUNNING
