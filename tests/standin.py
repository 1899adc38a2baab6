"""The GPUs of a job's pods in the Prometheus stand-in (the fixtures: tests/fixtures/prometheus.py):
``gpus_of(api, job, ...)`` makes a job's pods report GPUs the way dcgm-exporter names them."""

from workloads.pods import object_name


def training_pod(job, index: int = 0) -> str:
    """A Kueue training job's pod name, as the Job controller gives it (``pod_pattern``)."""
    return f"{object_name(job)}-{index}-x2b4k"


def gpus_of(api, job, utils, *, mem_mib=2048.0, pod=None):
    """The job's pod reports one GPU per value of ``utils`` (percent)."""
    for gpu, util in enumerate(utils):
        api.gpu(job.team.namespace_name, pod or training_pod(job), gpu, util=util, mem_mib=mem_mib)
