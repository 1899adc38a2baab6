"""The reconciler and the status watcher against the real local cluster (Kueue, Volcano,
kwok GPU nodes): onboarding, idempotence, drift healing, jobs moving through their
lifecycle with plain-language reasons, cancellation."""

import sys
import uuid
from pathlib import Path

import pytest

from jobs import actions
from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.models import Job
from jobs.tasks import sync_job
from quotas.models import Cohort, PriorityClass, Quota
from quotas.tasks import sync_cluster_objects, sync_team_quotas
from tenants.models import Team
from tenants.tasks import offboard, sync_team
from workloads import pod_ended

from ...builders import make_quota
from ...support.cluster import CLUSTER_SH, REPO, reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def test_onboarding_creates_every_object_and_a_second_pass_writes_nothing(live, world):
    team, h100, a100 = world
    ns = team.namespace_name
    assert live.get("v1", "Namespace", ns)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for api, kind, name in [("v1", "ResourceQuota", "team-quota"), ("v1", "LimitRange", "defaults"),
                            ("v1", "ServiceAccount", "workload"), ("networking.k8s.io/v1", "NetworkPolicy", "default-deny-ingress"),
                            ("kueue.x-k8s.io/v1beta2", "LocalQueue", h100.name)]:
        assert live.get(api, kind, name, ns)
    wait_until(lambda: any(c["type"] == "Active" and c["status"] == "True" for c in
                           live.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"{ns}-{h100.name}")
                           .get("status", {}).get("conditions", [])), timeout=60, message="ClusterQueue active")
    assert live.get("scheduling.volcano.sh/v1beta1", "Queue", f"{ns}-{a100.name}")
    team.refresh_from_db()
    assert team.status == Team.Status.READY

    live.reset_counts()
    outcome = sync_cluster_objects(live) + sync_team(live, team) + sync_team_quotas(live, team)
    assert outcome.writes == 0, outcome.lines()
    assert sum(live.requests[v] for v in ("POST", "PUT", "PATCH", "DELETE")) == 0, live.requests


def test_hand_edits_on_the_cluster_are_healed(live, world):
    team, h100, _ = world
    ns = team.namespace_name
    live.delete("kueue.x-k8s.io/v1beta2", "LocalQueue", h100.name, ns)
    quota = live.get("v1", "ResourceQuota", "team-quota", ns)
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = "999"
    quota["metadata"].pop("managedFields", None)
    live.apply([{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-quota", "namespace": ns,
                 "labels": quota["metadata"]["labels"]}, "spec": {"hard": quota["spec"]["hard"]}}])
    outcome = sync_team(live, team) + sync_team_quotas(live, team)
    assert outcome.writes >= 2
    assert live.get("kueue.x-k8s.io/v1beta2", "LocalQueue", h100.name, ns)
    assert live.get("v1", "ResourceQuota", "team-quota", ns)["spec"]["hard"]["requests.nvidia.com/gpu"] == "16"


def test_a_kueue_job_is_queued_admitted_run_and_succeeds(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, workers=2, gpus_per_worker=4)
    reaches(job, State.SUCCEEDED, timeout=180)
    states = [e.to_state for e in job.events.all()]
    # The watcher may see the admission before the reconciler records "queued".
    assert states[0] == "submitted" and states[-1] == "succeeded"
    assert states.index("admitted") < states.index("running") < states.index("succeeded")
    assert job.admitted_at and job.finished_at


def test_a_job_larger_than_the_quota_waits_with_a_plain_reason(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, workers=3, gpus_per_worker=8)
    wait_until(lambda: (job.refresh_from_db(), job.reason == "ExceedsQuota")[1], timeout=90,
               message="a quota reason")  # more than the team can ever use: it never starts
    assert job.state == State.QUEUED
    assert "24" in job.message and team.slug in job.message, job.message
    batch = live.get("batch/v1", "Job", object_name(job), team.namespace_name)
    assert batch["spec"]["suspend"] is True


def test_a_volcano_gang_runs_and_succeeds(live, world, watcher):
    team, _, a100 = world
    job = submit(live, team, a100, workers=2, gpus_per_worker=4)
    reaches(job, State.SUCCEEDED, timeout=180)
    assert "running" in [e.to_state for e in job.events.all()]


def test_cancelling_removes_the_workload_and_ends_cancelled(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=8, env={"SLEEP": "1"})
    job.refresh_from_db()
    while not job.transition(State.CANCELLING, reason="CancelRequested"):
        job.refresh_from_db()  # the watcher moved it on (queued -> admitted) in between
    sync_job(live, job)  # deletes the workload and returns: the garbage collector deletes the pods after it
    assert live.list("batch/v1", "Job", namespace=team.namespace_name,
                     label_selector=f"gpuplatform.io/job={job.pk}") == []
    reaches(job, State.CANCELLED, timeout=120)  # the watcher saw nothing of it left
    pods = live.list("v1", "Pod", namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    assert all(pod_ended(pod) for pod in pods)  # none runs or could still run


def test_a_gang_that_cannot_fit_stays_queued_with_its_reason(live, world, watcher):
    team, _, a100 = world
    Quota.objects.filter(team=team, flavor=a100).update(nominal_gpus=32)  # the quota is not the limit
    sync_team(live, team)
    sync_team_quotas(live, team)
    job = submit(live, team, a100, workers=3, gpus_per_worker=8)  # 24 GPUs; the a100 pool has 16
    wait_until(lambda: (job.refresh_from_db(), job.reason == "WaitingForResources")[1], timeout=90,
               message="the gang's reason")
    # Volcano's enqueue weighs the free GPUs of every node (H100s too), so whether it lets the
    # gang into its queue (admitted) depends on what else runs; either way no node of the
    # flavor has room, and the job says so.
    assert job.state in (State.QUEUED, State.ADMITTED)
    assert "all 3 workers at once" in job.message
    pods = live.list("v1", "Pod", namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
    assert not [p for p in pods if p["spec"].get("nodeName")]  # no member of the gang was bound


def test_a_gang_beyond_the_quota_says_it_can_never_start(live, world, watcher):
    team, _, a100 = world
    job = submit(live, team, a100, workers=3, gpus_per_worker=8)  # 24 GPUs; the team may use 8
    wait_until(lambda: (job.refresh_from_db(), job.reason == "ExceedsQuota")[1], timeout=90,
               message="the over-quota reason")
    assert job.state == State.QUEUED and "at most 8" in job.message


def test_an_inference_server_runs_and_is_counted_against_quota(live, world, watcher):
    team, h100, _ = world
    job = submit(live, team, h100, kind=Job.Kind.INFERENCE, port=8000, min_replicas=2, max_replicas=2,
                 gpus_per_worker=2, readiness_path="/healthz", readiness_initial_delay_seconds=0)
    reaches(job, State.RUNNING, timeout=120)
    assert job.message == "2 replicas ready."

    def gpus_in_use():
        usage = live.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"{team.namespace_name}-{h100.name}")["status"]
        return {r["name"]: r["total"] for f in usage.get("flavorsUsage", []) for r in f["resources"]}.get("nvidia.com/gpu")
    wait_until(lambda: gpus_in_use() == "4", timeout=60, message="4 GPUs counted in the team's ClusterQueue")


def test_the_sweep_heals_hand_edits_and_spares_unlabelled_objects(live, world, settings):
    from gpuplatform.celery import app
    from gpuplatform.tasks import sweep

    team, h100, _ = world
    ns = team.namespace_name
    app.conf.task_always_eager = True
    try:
        live.delete("networking.k8s.io/v1", "NetworkPolicy", "default-deny-ingress", ns)
        live.apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hand-made", "namespace": ns},
                     "data": {"a": "b"}},
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "hand-made", "namespace": ns}}])
        sweep.apply()
    finally:
        app.conf.task_always_eager = False
    assert live.get("networking.k8s.io/v1", "NetworkPolicy", "default-deny-ingress", ns)
    assert live.get("v1", "ConfigMap", "hand-made", ns) and live.get("v1", "ServiceAccount", "hand-made", ns)


def test_offboarding_removes_the_namespace_and_the_teams_cluster_scoped_objects(live, world):
    team, h100, a100 = world
    ns = team.namespace_name
    Team.objects.filter(pk=team.pk).update(status=Team.Status.DELETING)
    team.refresh_from_db()
    offboard(live, team)
    assert not Team.objects.filter(pk=team.pk).exists()
    assert live.list("kueue.x-k8s.io/v1beta2", "ClusterQueue", label_selector=f"gpuplatform.io/team={team.slug}") == []
    assert live.list("scheduling.volcano.sh/v1beta1", "Queue", label_selector=f"gpuplatform.io/team={team.slug}") == []
    namespace = live.list("v1", "Namespace", label_selector=f"gpuplatform.io/team={team.slug}")
    assert [n["metadata"]["name"] for n in namespace] in ([], [ns])
    assert not namespace or namespace[0]["status"]["phase"] == "Terminating"


LONG_RUN = {"GPUPLATFORM_FAKE_DURATION": "300s"}  # read by the local cluster's fake kubelet (kwok)


def test_a_higher_priority_job_preempts_a_lower_one_and_the_victim_says_why(live, world, watcher):
    team, h100, _ = world
    low = PriorityClass.objects.create(name=f"low-{team.slug}", value=10)
    high = PriorityClass.objects.create(name=f"high-{team.slug}", value=1000)
    sync_cluster_objects(live)
    victim = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=low, env=LONG_RUN)
    reaches(victim, State.RUNNING)
    urgent = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=high, env=LONG_RUN)
    reaches(urgent, State.RUNNING, timeout=120)
    wait_until(lambda: (victim.refresh_from_db(), "preempted" in [e.to_state for e in victim.events.all()])[1],
               timeout=60, message="the victim's preemption event")
    event = victim.events.get(to_state=State.PREEMPTED)
    assert event.reason == "Preempted"
    assert "higher-priority job of the same team" in event.message
    assert victim.state in (State.PREEMPTED, State.QUEUED)
    # A sweep over the preempted victim and the running winner changes nothing of either.
    live.reset_counts()
    for job in (victim, urgent, victim):
        job.refresh_from_db()
        sync_job(live, job)
    assert live.writes == 0, dict(live.requests)


def test_borrowing_within_a_cohort_admits_a_job_beyond_the_nominal_quota(live, world, watcher):
    team, h100, _ = world
    cohort = Cohort.objects.create(name=f"research-{team.slug}")
    Quota.objects.filter(team=team, flavor=h100).update(cohort=cohort, borrowing_limit_gpus=8)
    lender = Team.objects.create(slug=f"{team.slug}-lender", display_name="lender")
    make_quota(lender, h100, nominal_gpus=8, lending_limit_gpus=8, cohort=cohort, cpu_cores=64, memory_gib=512)
    sync_cluster_objects(live)
    sync_team(live, team)
    sync_team_quotas(live, team)
    sync_team(live, lender)
    sync_team_quotas(live, lender)
    try:
        job = submit(live, team, h100, workers=2, gpus_per_worker=8, env=LONG_RUN)  # 16 > nominal 8
        reaches(job, State.RUNNING, timeout=120)

        def borrowed():
            status = live.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"{team.namespace_name}-{h100.name}")["status"]
            return {r["name"]: r.get("borrowed") for f in status.get("flavorsReservation", []) for r in f["resources"]}
        wait_until(lambda: borrowed().get("nvidia.com/gpu") == "8", timeout=60, message="8 borrowed GPUs")
    finally:
        offboard(live, lender)


def test_gpuctl_submits_over_the_api_and_waits_until_the_job_succeeds(live, world, watcher, worker,
                                                                    live_server, tmp_path):
    """The CI path end to end: gpuctl -> REST API -> Celery -> cluster -> watcher -> gpuctl."""
    import os
    import subprocess
    import sys

    from tenants.tokens import ApiToken

    team, h100, _ = world
    _, secret = ApiToken.objects.issue(user=team.memberships.get().user, name="ci", team=team,
                                       scopes=["read", "submit", "cancel"])
    job_file = tmp_path / "job.yaml"
    job_file.write_text(f"""team: {team.slug}
name: ci-train
flavor: {h100.name}
image: ghcr.io/example/train:1
command: [python, train.py]
workers: 2
gpus_per_worker: 2
cpu_per_worker: 1
memory_per_worker_gib: 2
""")
    env = {**os.environ, "GPUPLATFORM_URL": live_server.url, "GPUPLATFORM_TOKEN": secret}
    result = subprocess.run([sys.executable, "-m", "gpuctl", "submit", "-f", str(job_file), "--wait"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "succeeded" in result.stdout
    job = Job.objects.get(team=team, name="ci-train")
    assert job.state == State.SUCCEEDED and job.started_at is not None


# --- faults: run last in this module, the first one restarts the cluster -----------------------
@pytest.fixture
def worker(live):
    """A real Celery worker (in this process, solo pool) on the suite's Redis broker."""
    from celery.contrib.testing.worker import start_worker

    from gpuplatform.celery import app

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30):
        yield app


def test_after_a_redis_flush_the_sweep_restores_convergence(live, world):
    import redis
    from django.conf import settings

    from gpuplatform.celery import app

    team, h100, _ = world
    owner = team.memberships.get().user
    job = actions.submit(team=team, submitter=owner, flavor=h100, name=f"j{uuid.uuid4().hex[:6]}",
                         image="ghcr.io/x/train:1", cpu_per_worker=1, memory_per_worker_gib=2)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # the reconcile message is lost
    job.refresh_from_db()
    assert job.state == State.SUBMITTED
    assert live.list("batch/v1", "Job", namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}") == []
    from celery.contrib.testing.worker import start_worker

    from gpuplatform.tasks import sweep

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        sweep.delay()
        wait_until(lambda: live.list("batch/v1", "Job", namespace=team.namespace_name,
                                     label_selector=f"gpuplatform.io/job={job.pk}"), timeout=90,
                   message="the sweep to re-apply the lost job")
        reaches(job, State.QUEUED, timeout=30)


def test_tasks_retry_while_the_api_server_is_down_and_the_watcher_carries_on(live, world, worker, watcher):
    import subprocess

    from quotas.tasks import reconcile_team_quotas

    team, h100, _ = world
    late = Team.objects.create(slug=f"{team.slug}-late", display_name="late")
    make_quota(late, h100, nominal_gpus=8, cpu_cores=64, memory_gib=512)
    subprocess.run([str(CLUSTER_SH), "down"], check=True, capture_output=True)
    try:
        reconcile_team_quotas.delay(late.pk)
        # While the API server is away the task fails, backs off and tries again.
        wait_until(lambda: not Team.objects.filter(pk=late.pk, status=Team.Status.READY).exists(), timeout=5)
    finally:
        subprocess.run([str(CLUSTER_SH), "up"], check=True, capture_output=True)
    wait_until(lambda: Team.objects.filter(pk=late.pk, status=Team.Status.READY).exists(), timeout=180,
               message="the retried reconcile to converge")
    wait_until(lambda: live.get("kueue.x-k8s.io/v1beta2", "LocalQueue", h100.name, late.namespace_name),
               timeout=60, message="the late team's LocalQueue")
    # The watcher that lived through the restart still brings status back.
    job = submit(live, team, h100, workers=1, gpus_per_worker=1)
    reaches(job, State.SUCCEEDED, timeout=180)
    offboard(live, late)


def test_a_worker_killed_mid_task_loses_nothing(live, world, kube_cluster, tmp_path):
    """SIGKILL a real worker process while it holds a reconcile; a new worker runs it again."""
    import os
    import signal
    import subprocess

    import redis
    from django.conf import settings
    from django.db import connection

    from quotas.tasks import reconcile_team_quotas

    team, h100, _ = world
    late = Team.objects.create(slug=f"{team.slug}-kill", display_name="kill")
    make_quota(late, h100, nominal_gpus=8, cpu_cores=64, memory_gib=512)
    db = settings.DATABASES["default"]
    env = {**os.environ, "KUBECONFIG": kube_cluster, "CELERY_VISIBILITY_TIMEOUT": "5", "DEBUG": "true",
           "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{connection.settings_dict['NAME']}"}
    command = [str(Path(sys.executable).with_name("celery")), "-A", "gpuplatform", "worker", "-P", "prefork",
               "-c", "1", "--without-mingle", "--without-gossip", "--loglevel", "INFO"]
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)

    def start_worker(log):
        return subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    with open(tmp_path / "workers.log", "w") as log:
        subprocess.run([str(CLUSTER_SH), "down"], check=True, capture_output=True)
        try:
            first = start_worker(log)
            try:
                reconcile_team_quotas.delay(late.pk)
                # The worker takes the task, cannot reach the API server and holds its retry.
                wait_until(lambda: broker.hlen("unacked") > 0, timeout=60, message="the worker to hold the task")
            finally:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
        finally:
            subprocess.run([str(CLUSTER_SH), "up"], check=True, capture_output=True)
        second = start_worker(log)
        try:
            wait_until(lambda: live.get("kueue.x-k8s.io/v1beta2", "LocalQueue", h100.name, late.namespace_name),
                       timeout=180, message="a new worker to run the killed worker's task")
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(timeout=30)
    assert Team.objects.filter(pk=late.pk, status=Team.Status.READY).exists()
    offboard(live, late)
