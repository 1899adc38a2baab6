"""The platform's admission gate on the kinds beside the batch Job (issue 46 item 3,
docs/caps.md "Held inside Kueue"), on the local cluster's Kueue: a notebook (Kueue's StatefulSet
integration, a pod group) and a Ray job (its RayJob integration) held at their submitter's
per-person cap are on the cluster as gated Workloads (Kueue's reason AdmissionGated, naming the
platform's gate), take none of the team's quota, and are admitted after one sweep's reconcile
once the cap frees. The on-commit triggers are silenced (a lost message): the sweep alone lets
them go. (The batch Job's own case: test_member_caps_live.py.)"""

import uuid

import pytest

from jobs.lifecycle import AT_PERSONAL_CAP, State
from jobs.models import Job
from jobs.tasks import sync_job
from quotas.models import MemberCap
from tenants.models import Membership
from workloads import gates
from workloads.kueue import WORKLOAD
from workloads.pods import object_name

from ...support.cluster import OUTLIVES_THE_TEST, reaches, wait_until
from .test_eta_live import cancel_all

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

KINDS = {
    "notebook": ("apps/v1", "StatefulSet", {"kind": "notebook", "image": "quay.io/jupyter/base-notebook:latest",
                                            "command": [], "args": [], "env": {}, "port": 8888}),
    "ray-job": ("ray.io/v1", "RayJob", {"kind": "ray-job", "image": "rayproject/ray:2.52.0-py312-gpu",
                                        "ray_entrypoint": "python -c 'print(1)'", "env": OUTLIVES_THE_TEST}),
}


@pytest.fixture
def only_the_sweep(monkeypatch):
    """The on-commit messages are lost: only the sweep's reconcile lets a held job go."""
    monkeypatch.setattr("jobs.tasks.release_at_cap.delay", lambda *args: None)
    monkeypatch.setattr("jobs.tasks.reconcile_job.delay", lambda *args: None)


@pytest.fixture
def submit_as_owner(live, world):
    """Submit as `jobs.actions.submit` does (the cap asked), reconcile once; at the end cancel all."""
    team = world[0]
    owner = team.memberships.get(role=Membership.Role.OWNER).user
    submitted = []

    def make(flavor, **fields):
        fields = {"cpu_per_worker": 4, "memory_per_worker_gib": 2, "workers": 1, "gpus_per_worker": 1, **fields}
        job = Job.objects.submit(team=team, submitter=owner, flavor=flavor, name=f"g{uuid.uuid4().hex[:6]}", **fields)
        submitted.append(job)
        sync_job(live, job)
        job.refresh_from_db()
        return job

    yield make
    cancel_all(live, submitted)


def quota_reserved(live, job) -> dict | None:
    for workload in live.list(*WORKLOAD, namespace=job.team.namespace_name):
        if any(o.get("name") == object_name(job) for o in workload["metadata"].get("ownerReferences") or ()):
            return next((c for c in (workload.get("status") or {}).get("conditions") or ()
                         if c["type"] == "QuotaReserved"), None)
    return None


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_held_job_of_another_kueue_kind_is_a_gated_workload_and_goes_after_one_sweep(
        live, world, watcher, only_the_sweep, submit_as_owner, kind):
    team, h100, _ = world
    owner = team.memberships.get(role=Membership.Role.OWNER).user
    MemberCap.objects.create(team=team, flavor=h100, user=owner, max_gpus=1)
    holder = submit_as_owner(h100, env=OUTLIVES_THE_TEST, image="ghcr.io/example/train:1")
    reaches(holder, State.RUNNING, timeout=120)

    api_version, object_kind, fields = KINDS[kind]
    waiting = submit_as_owner(h100, **fields)
    assert (waiting.state, waiting.reason) == (State.SUBMITTED, AT_PERSONAL_CAP)
    obj = live.get(api_version, object_kind, object_name(waiting), team.namespace_name)
    assert gates.gates_of(obj) == [gates.MEMBER_CAP]
    wait_until(lambda: (quota_reserved(live, waiting) or {}).get("reason") == "AdmissionGated", timeout=90,
               message=f"the held {kind}'s Workload gated")
    assert quota_reserved(live, waiting)["message"] == f"Admission is gated by: {gates.MEMBER_CAP}"
    wait_until(lambda: waiting.events.filter(reason="AdmissionGated").exists(), timeout=60,
               message="Kueue's word noted beside the platform's")
    waiting.refresh_from_db()
    assert waiting.at_personal_cap

    holder.refresh_from_db()
    assert holder.request_cancel(owner)
    sync_job(live, holder)
    # ended (cancelled; Kueue v0.19 may first mark its Workload finished, OwnerNotFound: failed)
    wait_until(lambda: (holder.refresh_from_db(), holder.is_final)[1], timeout=120, message="the holder ended")
    waiting.refresh_from_db()
    assert waiting.at_personal_cap  # nothing let it go: the messages were lost
    sync_job(live, waiting)  # the sweep's reconcile
    assert gates.gates_of(live.get(api_version, object_kind, object_name(waiting), team.namespace_name)) == []
    wait_until(lambda: (waiting.refresh_from_db(), waiting.admitted_at is not None)[1], timeout=120,
               message=f"the released {kind} admitted by Kueue")
