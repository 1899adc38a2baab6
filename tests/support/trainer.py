"""TrainJobs on the local cluster: the torch-distributed runtime installed and allowed, a
TrainJob of it submitted, its node pods."""

import yaml

from cluster import TransientError
from quotas.models import TrainingRuntime
from workloads import trainer
from workloads.kinds import train_job

from ..schemas import _module_dir
from .cluster import submit

TORCH = {"kind": "train-job", "training_runtime": train_job.TORCH_RUNTIME, "image": train_job.PYTORCH_IMAGE,
         "command": ["torchrun"], "args": ["train.py"]}


def ensure_torch_runtime(live) -> None:
    """The torch-distributed ClusterTrainingRuntime on the cluster (Trainer's manifest, as its
    install applies it) and allowed to every team on the platform."""
    from deploy.stack.components import trainer as component

    TrainingRuntime.objects.get_or_create(name=train_job.TORCH_RUNTIME, defaults={"label": "PyTorch"})
    api_version, kind = trainer.CLUSTER_TRAINING_RUNTIME
    if live.list(api_version, kind, field_selector=f"metadata.name={train_job.TORCH_RUNTIME}"):
        return
    module = _module_dir(component.COMPONENT.module, component.COMPONENT.version)
    assert module is not None, "Trainer's module is not in the Go module cache: cannot install its runtime"
    runtime = yaml.safe_load((module / "manifests/base/runtimes/torch_distributed.yaml").read_text())
    try:
        live.create(runtime)
    except TransientError as err:
        if err.status != 409:  # made meanwhile
            raise


def a_train_job(live, team, flavor, seconds: int, **fields):
    return submit(live, team, flavor, **{**TORCH, "workers": 2, "gpus_per_worker": 2,
                                         "env": {"GPUPLATFORM_FAKE_DURATION": f"{seconds}s"}, **fields})


def node_pods(live, job) -> list[dict]:
    return live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
