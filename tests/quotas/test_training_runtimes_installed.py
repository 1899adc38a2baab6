"""Which ClusterTrainingRuntimes the cluster has (quotas/tasks.py `check_training_runtimes`, run
by every cluster-objects sync): recorded on each `TrainingRuntime`, with the runtime's framework
label where the row has none; a cluster that does not answer keeps what was last known. A
runtime known to be missing refuses new TrainJobs; one never checked refuses nothing."""

import pytest

from cluster import PermanentError, TransientError
from cluster.fake import FakeCluster
from jobs.models import Job
from quotas.models import TrainingRuntime
from quotas.tasks import check_training_runtimes, reconcile_cluster_objects
from workloads.kinds import train_job
from workloads.trainer import CLUSTER_TRAINING_RUNTIME, FRAMEWORK_LABEL

from ..builders import build_job, make_flavor, make_quota, make_team

pytestmark = pytest.mark.django_db
API, KIND = CLUSTER_TRAINING_RUNTIME
TORCH = train_job.TORCH_RUNTIME


def put_runtime(cluster, name: str, framework: str | None = None) -> None:
    labels = {FRAMEWORK_LABEL: framework} if framework else {}
    cluster.put({"apiVersion": API, "kind": KIND, "metadata": {"name": name, "labels": labels}, "spec": {}})


def installed() -> dict[str, bool | None]:
    return dict(TrainingRuntime.objects.values_list("name", "installed"))


def test_a_runtime_never_checked_is_unknown():
    assert installed() == {TORCH: None}  # seeded by the chart's TRAINING_RUNTIMES, no cluster read yet
    assert TrainingRuntime.objects.get(name=TORCH).checked_at is None


def test_the_cluster_sync_records_which_runtimes_are_installed_and_takes_a_missing_framework(fake):
    TrainingRuntime.objects.create(name="deepspeed-v2", label="DeepSpeed")  # no framework typed
    TrainingRuntime.objects.create(name="jax", label="JAX", framework="jax")
    TrainingRuntime.objects.filter(name="deepspeed-v2").update(framework="")
    put_runtime(fake, TORCH, "torch")
    put_runtime(fake, "deepspeed-v2", "deepspeed")
    put_runtime(fake, "not-offered", "mlx")  # on the cluster, no row: nothing is created
    reconcile_cluster_objects()
    assert installed() == {TORCH: True, "deepspeed-v2": True, "jax": False}
    rows = {row.name: row for row in TrainingRuntime.objects.all()}
    assert rows["deepspeed-v2"].framework == "deepspeed" and rows["jax"].framework == "jax"
    assert all(row.checked_at is not None for row in rows.values())


def test_a_framework_a_quota_manager_typed_is_kept():
    cluster = FakeCluster()
    TrainingRuntime.objects.filter(name=TORCH).update(framework="pytorch")
    put_runtime(cluster, TORCH, "torch")
    check_training_runtimes(cluster)
    assert TrainingRuntime.objects.get(name=TORCH).framework == "pytorch"


def test_a_runtime_removed_from_the_cluster_is_missing_at_the_next_sync_and_back_when_reinstalled():
    cluster = FakeCluster()
    put_runtime(cluster, TORCH)
    assert check_training_runtimes(cluster) == 1 and installed() == {TORCH: True}
    assert check_training_runtimes(cluster) == 0  # unchanged
    cluster.remove(API, KIND, TORCH)
    check_training_runtimes(cluster)
    assert installed() == {TORCH: False}
    put_runtime(cluster, TORCH)
    check_training_runtimes(cluster)
    assert installed() == {TORCH: True}


def test_without_trainer_on_the_cluster_no_runtime_is_installed():
    check_training_runtimes(FakeCluster(missing_kinds=[CLUSTER_TRAINING_RUNTIME]))
    assert installed() == {TORCH: False}


@pytest.mark.parametrize("error", [TransientError("connection refused"), PermanentError("forbidden", status=403)],
                         ids=["unreachable", "forbidden"])
def test_a_cluster_that_does_not_answer_keeps_the_last_known_value(error):
    cluster = FakeCluster()
    put_runtime(cluster, TORCH)
    check_training_runtimes(cluster)
    checked_at = TrainingRuntime.objects.get(name=TORCH).checked_at
    cluster.remove(API, KIND, TORCH)
    cluster.fail_next("LIST", error)
    assert check_training_runtimes(cluster) == 0
    row = TrainingRuntime.objects.get(name=TORCH)
    assert (row.installed, row.checked_at) == (True, checked_at)


def test_a_train_job_on_a_runtime_missing_from_the_cluster_is_refused_and_on_an_unknown_one_is_not():
    team, flavor = make_team("trainers"), make_flavor("h100")
    make_quota(team, flavor, nominal_gpus=16)
    job = build_job(team, flavor, kind=Job.Kind.TRAIN_JOB, training_runtime=TORCH, command=["torchrun"])
    job.full_clean(exclude=["name"])  # never checked: the demo without a cluster keeps working
    TrainingRuntime.objects.filter(name=TORCH).update(installed=False)
    with pytest.raises(Exception) as raised:
        job.full_clean(exclude=["name"])
    assert raised.value.message_dict["training_runtime"] == [
        "torch-distributed is not installed on the cluster: ask the platform administrators."]
    TrainingRuntime.objects.filter(name=TORCH).update(installed=True)
    job.full_clean(exclude=["name"])
