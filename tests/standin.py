"""The Prometheus stand-in (bench/prometheus_standin.py, a real HTTP server) as fixtures:
``prometheus_api`` alone (for `cluster.prometheus` and what asks it directly), ``standin``
with ``PROMETHEUS_URL`` pointing at it for the test; ``gpus_of(job, ...)`` makes a job's
pods report GPUs the way dcgm-exporter names them."""

import pytest

from bench.prometheus_standin import serve
from cluster.prometheus import prometheus_from_settings
from jobs import gpu_use
from workloads.pods import object_name


@pytest.fixture
def prometheus_api():
    api, server = serve()
    yield api
    server.shutdown()
    server.server_close()


@pytest.fixture
def standin(settings):
    api, server = serve()
    settings.PROMETHEUS_URL = api.url
    settings.PROMETHEUS_TIMEOUT_SECONDS = 1
    prometheus_from_settings.cache_clear()
    gpu_use._with_timeout.cache_clear()
    yield api
    server.shutdown()
    server.server_close()
    prometheus_from_settings.cache_clear()
    gpu_use._with_timeout.cache_clear()


def training_pod(job, index: int = 0) -> str:
    """A Kueue training job's pod name, as the Job controller gives it (``pod_pattern``)."""
    return f"{object_name(job)}-{index}-x2b4k"


def gpus_of(api, job, utils, *, mem_mib=2048.0, pod=None):
    """The job's pod reports one GPU per value of ``utils`` (percent)."""
    for gpu, util in enumerate(utils):
        api.gpu(job.team.namespace_name, pod or training_pod(job), gpu, util=util, mem_mib=mem_mib)
