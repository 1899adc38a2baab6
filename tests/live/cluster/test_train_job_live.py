"""TrainJobs on the local cluster's real Kubeflow Trainer, JobSet and Kueue (docs/trainjobs.md):
a 2-node x 2-GPU TrainJob on torch-distributed is queued, admitted by Kueue, its JobSet's pods
run on the kwok nodes and end (the fake kubelet's duration), and its page shows its pods, its
logs and its state up to Succeeded; a second one over the quota waits with Kueue's own reason
shown; a TrainJob whose trainer publishes its progress (written here on its status
subresource, as Trainer's progress endpoint would) shows it on its page, and a job queued
behind it gets an ETA from its remaining time.

Needs the cluster with Trainer and JobSet started (deploy/stack/components trainer, jobset) and
their CRDs: without them every test here fails (the TrainJob cannot be created), none skips.
The torch-distributed ClusterTrainingRuntime is the cluster admin's: the fixture installs
Trainer's own copy from its module when the cluster has none."""

import uuid

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from core.ownership import WORKLOAD_SERVICE_ACCOUNT
from jobs.lifecycle import State
from jobs.outlook import estimates
from tenants.models import Membership
from workloads import kueue, trainer
from workloads.pods import object_name

from ...builders import make_flavor, make_quota, make_user
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, reaches, team_of_its_own, wait_until
from ...support.trainer import a_train_job, ensure_torch_runtime, node_pods

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

@pytest.fixture
def trainers(live):
    """A team (slug tj-...) with a 4-GPU H100 quota on Kueue, an owner and a member."""
    slug = f"tj-{uuid.uuid4().hex[:6]}"
    team, owner = team_of_its_own(slug)
    member = make_user(f"member-{slug}")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    h100 = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION)
    make_quota(team, h100, nominal_gpus=4, cpu_cores=64, memory_gib=512)
    ensure_torch_runtime(live)
    with on_the_cluster(live, [team], [h100]):
        yield team, h100, owner


def page(job, person, name="jobs:detail") -> str:
    client = Client()
    client.force_login(person)
    return client.get(reverse(name, args=[job.pk])).content.decode()


def test_a_two_node_train_job_is_admitted_runs_on_kwok_and_succeeds_with_its_pods_and_logs_shown(
        live, trainers, watcher):
    team, h100, owner = trainers
    job = a_train_job(live, team, h100, seconds=45)
    [obj] = live.list(*trainer.TRAIN_JOB, namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    assert obj["metadata"]["labels"][kueue.QUEUE_LABEL] == h100.name
    reaches(job, State.RUNNING, timeout=240)
    # Kueue admitted its Workload, owned by the TrainJob; Trainer made the JobSet named like it.
    [workload] = [w for w in live.list(*kueue.WORKLOAD, namespace=team.namespace_name)
                  if any(r.get("kind") == "TrainJob" for r in w["metadata"].get("ownerReferences") or [])]
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in workload["status"]["conditions"])
    jobset = live.get(*trainer.JOBSET, object_name(job), team.namespace_name)
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    # Its two node pods run on the H100 fake nodes, hardened and labelled by our runtime patch.
    pods = wait_until(lambda: [p for p in node_pods(live, job) if p["spec"].get("nodeName")], timeout=60,
                      message="the TrainJob's node pods on nodes")
    assert len(pods) == 2 and all(p["spec"]["nodeSelector"] == h100.node_labels for p in pods)
    assert [p["spec"].get("serviceAccountName") for p in pods] == [WORKLOAD_SERVICE_ACCOUNT] * 2
    wait_until(lambda: job.refresh_from_db() or job.gpus_in_use == 4, timeout=60, message="its 4 GPUs counted")
    shown = page(job, owner, "jobs:pods")
    assert all(p["metadata"]["name"] in shown for p in pods)
    logs = page(job, owner, "jobs:logs")
    assert "No logs yet" not in logs and "This job has no pods" not in logs
    reaches(job, State.SUCCEEDED, timeout=300)
    assert "Succeeded" in page(job, owner)


def test_a_second_train_job_over_the_quota_waits_with_kueues_own_reason(live, trainers, watcher):
    team, h100, owner = trainers
    first = a_train_job(live, team, h100, seconds=600)
    reaches(first, State.RUNNING, timeout=240)
    second = a_train_job(live, team, h100, seconds=600)
    reaches(second, State.QUEUED, timeout=60)
    [workload] = wait_until(lambda: [
        w for w in live.list(*kueue.WORKLOAD, namespace=team.namespace_name)
        if any(r.get("name") == object_name(second) for r in w["metadata"].get("ownerReferences") or [])
        and any(c["type"] == "QuotaReserved" and c["status"] == "False" for c in (w.get("status") or {}).get(
            "conditions") or [])], timeout=60, message="Kueue to say why the second Workload waits")
    said = next(c for c in workload["status"]["conditions"] if c["type"] == "QuotaReserved")
    wait_until(lambda: second.refresh_from_db() or second.reason == "WaitingForQuota", timeout=60,
               message="the second job to wait for quota")
    shown = page(second, owner)
    assert "Waiting for quota" in shown
    # Kueue's own words beside ours (issue 46 item 3: the condition reading in workloads/kueue.py).
    assert escape(said["message"]) in shown, said  # verbatim, as the page escapes it
    assert f"<code class=\"kueue-reason\">{said['reason']}</code>" in shown
    [obj] = live.list(*trainer.TRAIN_JOB, namespace=team.namespace_name,
                      label_selector=f"gpuplatform.io/job={second.pk}")
    assert obj["spec"]["suspend"] is True and not node_pods(live, second)


def test_a_trainers_published_progress_is_shown_and_moves_the_eta_of_the_job_behind_it(
        live, api_client, trainers, watcher):
    from kubernetes import client as k8s

    team, h100, owner = trainers
    running = a_train_job(live, team, h100, seconds=3600, max_runtime_seconds=4 * 3600)
    reaches(running, State.RUNNING, timeout=240)
    behind = a_train_job(live, team, h100, seconds=600, max_runtime_seconds=3600)
    reaches(behind, State.QUEUED, timeout=60)
    by_maximum = estimates.estimate(behind).eta.p50
    assert by_maximum is not None and by_maximum > 3 * 3600  # its maximum runtime's end, nothing else known

    group, version = trainer.API.split("/")
    k8s.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(
        group, version, team.namespace_name, "trainjobs", object_name(running),
        {"status": {"trainerStatus": {"progressPercentage": 50, "estimatedRemainingSeconds": 600,
                                      "lastUpdatedTime": timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")}}})
    wait_until(lambda: running.refresh_from_db() or running.trainer_progress_percent == 50, timeout=60,
               message="the watcher to record the trainer's progress")
    assert running.trainer_remaining_seconds == 600
    shown = page(running, owner)
    assert 'value="50"' in shown and "50%" in shown and "left" in shown
    by_trainer = estimates.estimate(behind).eta.p50
    assert by_trainer == pytest.approx(600, abs=120), by_trainer
