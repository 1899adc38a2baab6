"""TrainJobs (workloads/trainer.py, workloads/kinds/train_job.py, jobs/models/trainer.py): what
they render for Kueue and Kubeflow Trainer, which runtimes a team may name, how Trainer's and
Kueue's words become the job's state, its pods' names, and its stop."""

import re
from datetime import UTC, datetime

import pytest

from cluster.fake import FakeCluster
from jobs.manifests import job_fields, render_job
from jobs.models import Job
from quotas.models import TrainingRuntime
from workloads import Phase, Progress
from workloads.kinds import NotStopped, for_job, train_job
from workloads.kueue import MAX_EXEC_LABEL, QUEUE_LABEL
from workloads.pods import object_name
from workloads.trainer import (
    NODE_STEP,
    PATCH_MANAGER,
    REPLICATED_JOB_LABEL,
    observe_train_job,
    pod_template_of,
    progress,
)

from ..builders import build_job, make_flavor, make_job, make_quota, make_team
from ..schemas import validate
from ..security import assert_hardened

pytestmark = pytest.mark.django_db
RUNTIME = train_job.TORCH_RUNTIME


@pytest.fixture
def team():
    return make_team("trainers")


@pytest.fixture
def flavor(team):
    flavor = make_flavor("h100", nccl_socket_ifname="eth0")
    make_quota(team, flavor, nominal_gpus=16)
    return flavor


def a_train_job(team, flavor, **fields) -> Job:
    return make_job(team, flavor, kind=Job.Kind.TRAIN_JOB, training_runtime=RUNTIME, command=["torchrun"],
                    args=["train.py"], **{"workers": 2, "gpus_per_worker": 4, **fields})


# --- rendering ----------------------------------------------------------------------------------
def test_a_train_job_is_a_suspended_queued_trainjob_on_its_runtime(team, flavor):
    job = a_train_job(team, flavor, max_runtime_seconds=3600)
    [obj] = render_job(job)
    assert (obj["apiVersion"], obj["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert obj["metadata"]["labels"][QUEUE_LABEL] == "h100" and obj["metadata"]["labels"][MAX_EXEC_LABEL] == "3600"
    spec = obj["spec"]
    assert spec["suspend"] is True  # Kueue unsuspends it on admission
    assert spec["runtimeRef"] == {"name": RUNTIME, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"}
    trainer = spec["trainer"]
    assert (trainer["numNodes"], trainer["command"], trainer["args"]) == (2, ["torchrun"], ["train.py"])
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "4"
    assert trainer["resourcesPerNode"]["requests"]["cpu"] == "4"
    validate(obj)
    assert assert_hardened([obj], job) == 1
    assert job_fields(job) == for_job(job).fields


def test_multi_node_train_jobs_get_the_flavors_nccl_defaults_and_a_single_node_one_does_not(team, flavor):
    env = {e["name"]: e.get("value") for e in render_job(a_train_job(team, flavor))[0]["spec"]["trainer"]["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_IB_DISABLE"] == "1" and env["EPOCHS"] == "3"
    alone = {e["name"] for e in render_job(a_train_job(team, flavor, name="alone", workers=1))[0]["spec"]["trainer"]["env"]}
    assert "NCCL_SOCKET_IFNAME" not in alone and "NCCL_IB_DISABLE" not in alone


def test_our_runtime_patch_puts_our_labels_and_the_flavors_placement_on_the_node_pods(team, flavor):
    job = a_train_job(team, flavor)
    [obj] = render_job(job)
    [patch] = obj["spec"]["runtimePatches"]
    assert patch["manager"] == PATCH_MANAGER
    template = pod_template_of(obj)
    assert template["metadata"]["labels"]["gpuplatform.io/job"] == str(job.pk)
    assert template["spec"]["nodeSelector"] == flavor.node_labels
    assert [c["name"] for c in template["spec"]["containers"]] == [NODE_STEP]


# --- runtimes -----------------------------------------------------------------------------------
def test_a_train_job_needs_a_runtime_its_team_may_use_and_says_which_it_may(team, flavor):
    other = make_team("others")
    TrainingRuntime.objects.create(name="deepspeed", label="DeepSpeed", limited_to_teams=True).teams.add(other)
    TrainingRuntime.objects.create(name="jax-old", label="JAX", enabled=False)
    for name in ("", "deepspeed", "jax-old", "made-up"):
        job = build_job(team, flavor, kind=Job.Kind.TRAIN_JOB, training_runtime=name)
        with pytest.raises(Exception) as raised:
            job.full_clean()
        [error] = raised.value.message_dict["training_runtime"]
        assert RUNTIME in error and "deepspeed" not in error.split("may use:")[1], error
    job = build_job(team, flavor, kind=Job.Kind.TRAIN_JOB, training_runtime="deepspeed")
    job.team = other
    job.full_clean(exclude=["name"])  # the team it is limited to may


def test_a_runtime_is_refused_on_other_kinds(team, flavor):
    job = build_job(team, flavor, kind=Job.Kind.TRAINING, training_runtime=RUNTIME)
    with pytest.raises(Exception) as raised:
        job.full_clean()
    assert "training_runtime" in raised.value.message_dict


def test_the_chart_seeds_runtimes_once_and_never_overwrites_a_quota_managers_change():
    from quotas.models.runtimes import seed_from_settings

    TrainingRuntime.objects.filter(name=RUNTIME).update(enabled=False, label="Torch (off)")
    assert seed_from_settings([RUNTIME, "deepspeed-distributed"]) == ["deepspeed-distributed"]
    assert TrainingRuntime.objects.get(name=RUNTIME).enabled is False
    assert TrainingRuntime.objects.get(name="deepspeed-distributed").framework == "deepspeed"


def test_a_runtimes_preset_is_a_train_job_on_it():
    runtime = TrainingRuntime(name="deepspeed", label="DeepSpeed", image="ghcr.io/x/ds:1", command=["deepspeed"],
                              args=["train.py"], env={"A": "b"}, nodes=4, gpus_per_node=2)
    assert runtime.preset() == {"kind": "train-job", "training_runtime": "deepspeed", "workers": 4, "gpus_per_worker": 2,
                                "image": "ghcr.io/x/ds:1", "command": ["deepspeed"], "args": ["train.py"],
                                "env": {"A": "b"}}


# --- what the cluster says ----------------------------------------------------------------------
def _condition(kind, status="True", reason="", message="", at="2026-12-01T10:00:00Z"):
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def _pod(phase="Running", step=NODE_STEP):
    return {"metadata": {"labels": {REPLICATED_JOB_LABEL: step}}, "status": {"phase": phase}}


ADMITTED = {"status": {"conditions": [_condition("QuotaReserved"), _condition("Admitted")]}}
WAITING = {"status": {"conditions": [_condition("QuotaReserved", "False", "Pending",
                                                "insufficient unused quota for nvidia.com/gpu in flavor h100, "
                                                "8 more needed")]}}
TRAIN_JOB = {"status": {"conditions": [_condition("Suspended", reason="Suspended")]}}


@pytest.mark.parametrize(("case", "workload", "conditions", "pods", "state", "reason"), [
    ("created, no Workload yet: queued", None, [], [], Phase.QUEUED, "Queued"),
    ("waiting for quota in Kueue's words", WAITING, [], [], Phase.QUEUED, "WaitingForQuota"),
    ("admitted, one node running of two", ADMITTED, [], [_pod(), _pod("Pending")], Phase.ADMITTED, "Admitted"),
    ("admitted, an initializer running is no node", ADMITTED, [], [_pod(), _pod(step="dataset-initializer")],
     Phase.ADMITTED, "Admitted"),
    ("admitted, both nodes running", ADMITTED, [], [_pod(), _pod()], Phase.RUNNING, "Running"),
    ("Trainer says complete", ADMITTED, [_condition("Complete", reason="JobSetCompleted")], [], Phase.SUCCEEDED,
     "Completed"),
    ("Trainer says failed", ADMITTED, [_condition("Failed", reason="DeadlineExceeded", message="too long")], [],
     Phase.FAILED, "DeadlineExceeded"),
])
def test_a_train_jobs_state_comes_from_trainer_kueue_and_its_pods(team, flavor, case, workload, conditions, pods,
                                                                  state, reason):
    job = a_train_job(team, flavor)
    obj = {"status": {"conditions": TRAIN_JOB["status"]["conditions"] + conditions}}
    seen = observe_train_job(job, workload, obj, None, pods)
    assert (seen.state, seen.reason) == (state, reason), case


def test_a_waiting_train_job_keeps_kueues_own_words(team, flavor):
    seen = observe_train_job(a_train_job(team, flavor), WAITING, TRAIN_JOB, None, [])
    assert (seen.kueue_reason, seen.kueue_message) == (
        "Pending", "insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed")


def test_nothing_is_said_of_a_train_job_not_on_the_cluster(team, flavor):
    assert observe_train_job(a_train_job(team, flavor), None, None, None, []) is None


def test_the_trainers_progress_and_remaining_time_are_read_when_published():
    assert progress({"status": {}}) is None
    said = progress({"status": {"trainerStatus": {"progressPercentage": 40, "estimatedRemainingSeconds": 900,
                                                  "lastUpdatedTime": "2026-12-01T10:00:00Z"}}})
    assert said == Progress(40, 900, datetime(2026, 12, 1, 10, tzinfo=UTC))


def test_a_running_train_job_carries_its_progress_to_the_row_only_when_it_changed(team, flavor):
    job = a_train_job(team, flavor)
    obj = {"status": {"trainerStatus": {"progressPercentage": 25, "estimatedRemainingSeconds": 600,
                                        "lastUpdatedTime": "2026-12-01T10:00:00Z"}}}
    seen = observe_train_job(job, ADMITTED, obj, None, [_pod(), _pod()])
    assert seen.state == Phase.RUNNING and job.record_progress(seen.progress)
    assert not job.record_progress(seen.progress)
    job.refresh_from_db()
    assert (job.trainer_progress_percent, job.trainer_remaining_seconds) == (25, 600)


def test_its_pod_pattern_matches_its_node_pods_and_no_other_jobs(team, flavor):
    job, other = a_train_job(team, flavor, name="train"), a_train_job(team, flavor, name="train-node-0")
    pattern = re.compile(for_job(job).pod_pattern(job))
    name = object_name(job)
    assert pattern.fullmatch(f"{name}-node-0-1-abcde")
    assert not pattern.fullmatch(f"{object_name(other)}-node-0-0-abcde")
    assert not pattern.fullmatch(f"{name}-dataset-initializer-0-0-abcde")


def test_its_stop_deactivates_the_workload_its_trainjob_owns():
    fake = FakeCluster()
    team, flavor = make_team("stopper"), make_flavor("a100")
    make_quota(team, flavor)
    job = a_train_job(team, flavor)
    stop = for_job(job).stop
    with pytest.raises(NotStopped):
        stop(fake, job)
    namespace, name = team.namespace_name, object_name(job)
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    fake.put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
              "metadata": {"name": f"trainjob-{name}-1a2b3", "namespace": namespace,
                           "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                                "name": name, "uid": "u-1", "controller": True}]},
              "spec": {"active": True, "queueName": flavor.name, "podSets": [{"name": "node", "count": 2}]}})
    stop(fake, job)
    [live] = fake.stored("kueue.x-k8s.io/v1beta2", "Workload")
    assert live["spec"]["active"] is False


# --- the status watcher -------------------------------------------------------------------------
def test_the_watcher_follows_a_train_job_through_its_workload_and_pods_and_records_its_progress(team, flavor):
    from core.ownership import ownership_labels
    from jobs.watch.watcher import StatusWatcher
    from workloads import kueue, trainer

    job = a_train_job(team, flavor)
    Job.objects.filter(pk=job.pk).update(state=Job.State.QUEUED)
    namespace, name = team.namespace_name, object_name(job)
    owner = [{"apiVersion": trainer.API, "kind": "TrainJob", "name": name, "uid": "tj-1", "controller": True}]
    labels = ownership_labels(team=team.slug, job=job.pk)
    watcher = StatusWatcher(cluster=None)
    watcher._record(trainer.TRAIN_JOB, "ADDED", {
        "apiVersion": trainer.API, "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace,
                                                                   "labels": labels, "uid": "tj-1"},
        "status": {"trainerStatus": {"progressPercentage": 10, "estimatedRemainingSeconds": 3000,
                                     "lastUpdatedTime": "2026-12-01T10:00:00Z"}}})
    watcher._record(kueue.WORKLOAD, "ADDED", {"apiVersion": kueue.API, "kind": "Workload", "metadata": {
        "name": f"trainjob-{name}-1a2b3", "namespace": namespace, "ownerReferences": owner}, **ADMITTED})
    for index in range(2):
        watcher._record(("v1", "Pod"), "ADDED", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{name}-node-0-{index}-abcde", "namespace": namespace,
            "labels": {**labels, REPLICATED_JOB_LABEL: NODE_STEP}},
            "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}})
    watcher.evaluate([job.pk])
    job.refresh_from_db()
    assert (job.state, job.gpus_in_use) == (Job.State.RUNNING, 8)
    assert (job.trainer_progress_percent, job.trainer_remaining_seconds) == (10, 3000)
