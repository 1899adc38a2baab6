"""On the local cluster: a job over its team's quota waits with Kueue's own reason and message
shown verbatim, on its page and in the API, beside what GPU Platform adds (issue 46 item 3).

- The team's 8 H100 GPUs are held by a running job; a second 8-GPU job waits. Its Workload's
  QuotaReserved=False condition (Kueue v0.19 with the gate UnadmittedWorkloadsObservability:
  reason WaitingForQuota) is the job's kueue_reason and kueue_message, word for word; the page
  shows it under "Kueue says" before "GPU Platform", and Kueue's own position in its
  ClusterQueue (the visibility API); the API gives both apart.
- A 16-GPU job (more than the team can ever use) is told so by Kueue (ExceedsMaxQuota): it
  reads "Cannot start" and the verdict is Kueue's "never".
"""

import html

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.lifecycle import State
from jobs.outlook import feasibility
from tenants.models import Membership
from workloads.pods import object_name

from ...support.cluster import OUTLIVES_THE_TEST, reaches, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")
GATE = ("Kueue reports granular reasons only with its feature gate UnadmittedWorkloadsObservability on "
        "(off by default in v0.19): deploy/local-cluster/config/kueue-config.yaml featureGates")


def quota_reserved(live, job) -> dict | None:
    """Kueue's QuotaReserved condition on the job's Workload, as the cluster holds it."""
    for workload in live.list(*WORKLOAD, namespace=job.team.namespace_name):
        owners = (workload.get("metadata") or {}).get("ownerReferences") or ()
        if any(owner.get("name") == object_name(job) for owner in owners):
            for condition in (workload.get("status") or {}).get("conditions") or ():
                if condition.get("type") == "QuotaReserved":
                    return condition
    return None


def kueue_said(live, job) -> dict:
    """Wait until Kueue has said why it does not admit the job and the watcher kept its words."""
    def kept():
        said = quota_reserved(live, job)
        job.refresh_from_db()
        if said is None or said.get("status") != "False" or not said.get("reason"):
            return None
        return said if (job.kueue_reason, job.kueue_message) == (said["reason"], said.get("message", "")) else None

    return wait_until(kept, timeout=120, message=f"Kueue's reason for {job.name} on the job (is {job.kueue_reason!r})")


def owner_of(team):
    return team.memberships.get(role=Membership.Role.OWNER).user


def page_of(job) -> str:
    client = Client()
    client.force_login(owner_of(job.team))
    return html.unescape(client.get(f"/jobs/{job.pk}/").content.decode())


def api_of(job) -> dict:
    client = APIClient()
    client.force_login(owner_of(job.team))
    return client.get(f"/api/v1/jobs/{job.pk}").json()


def test_a_job_over_its_teams_quota_waits_with_kueues_own_words_beside_ours(live, world, watcher, submit):
    team, h100, _ = world
    holder = submit(live, team, h100, workers=1, gpus_per_worker=8, env=OUTLIVES_THE_TEST)
    reaches(holder, State.RUNNING)
    waiting = submit(live, team, h100, workers=1, gpus_per_worker=8, env=OUTLIVES_THE_TEST)
    reaches(waiting, State.QUEUED)
    said = kueue_said(live, waiting)
    assert said["reason"] == "WaitingForQuota", GATE

    page = page_of(waiting)
    kueue = page.index("Kueue says</span>")
    assert page.index(f'<code class="kueue-reason">{said["reason"]}</code>') > kueue
    if said.get("message"):
        assert f'<q class="kueue-message">{said["message"]}</q>' in page
    waiting.refresh_from_db()
    assert kueue < page.index(f"GPU Platform</span> {waiting.message}")
    assert "Kueue's pending list</span>" in page  # the visibility API's own position

    body = api_of(waiting)
    assert (body["kueue_reason"], body["kueue_message"]) == (said["reason"], said.get("message", ""))
    assert body["reason"] == "WaitingForQuota" and body["message"] == waiting.message
    assert body["queue"]["kueue_position"] is not None and body["queue"]["in_kueue_order"]


def test_a_job_bigger_than_its_team_may_ever_use_is_told_so_by_kueue(live, world, watcher, submit):
    team, h100, _ = world
    big = submit(live, team, h100, workers=2, gpus_per_worker=8, env=OUTLIVES_THE_TEST)
    reaches(big, State.QUEUED)
    said = kueue_said(live, big)
    assert said["reason"] == "ExceedsMaxQuota", GATE
    big.refresh_from_db()
    assert big.never_starts and big.get_state_display() == "Cannot start"
    verdict = feasibility.assess(big)
    assert (verdict.verdict, verdict.kueue_reason, verdict.kueue_message) == ("never", said["reason"], said["message"])
    page = page_of(big)
    assert page.index("Kueue says</span>") < page.index("GPU Platform</span> Can never start")
    assert api_of(big)["kueue_reason"] == "ExceedsMaxQuota"
