"""Whether an inference job may scale on GPU utilization here, and what KEDA is told.

Scaling on GPU utilization needs KEDA on the cluster (its ScaledObject kind served; KEDA is
an optional prerequisite, docs/telemetry.md) and a Prometheus for KEDA to ask. The first is
asked of the cluster's discovery and remembered for a minute per cluster client, so a page
or a submission costs no request most of the time; a cluster that cannot be asked counts as
one without KEDA. `unavailable()` says why not, in words, for the form and `Job.clean`.
"""

import threading
import time
import weakref

from django.conf import settings
from django.db.models import TextChoices

from cluster import ClusterError
from core.reconcile import NoCluster, current_cluster
from workloads.serving import SCALED_OBJECT, GpuScaling

SERVED_SECONDS = 60.0


class Autoscale(TextChoices):
    """What an inference server's replicas scale on."""

    CPU = "cpu", "CPU use"
    GPU = "gpu", "GPU utilization"


_served: "weakref.WeakKeyDictionary[object, tuple[float, bool]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def keda_served(cluster=None) -> bool:
    """Whether the cluster serves KEDA's ScaledObject (its CRD installed), by discovery."""
    if cluster is None:
        try:
            cluster = current_cluster()
        except NoCluster:
            return False
    now = time.monotonic()
    with _lock:
        known = _served.get(cluster)
    if known is not None and known[0] > now:
        return known[1]
    try:
        served = cluster.serves(*SCALED_OBJECT)
    except ClusterError:  # unreachable, or discovery refused: not now; asked again in a minute
        served = False
    with _lock:
        _served[cluster] = (now + SERVED_SECONDS, served)
    return served


def prometheus_address() -> str:
    """The Prometheus KEDA asks: KEDA_PROMETHEUS_URL (as KEDA reaches it), else PROMETHEUS_URL."""
    return settings.KEDA_PROMETHEUS_URL or settings.PROMETHEUS_URL


def unavailable(cluster=None) -> str:
    """Why jobs cannot scale on GPU utilization here, in words; empty when they can."""
    if not prometheus_address():
        return ("Scaling on GPU utilization needs a Prometheus with the GPUs' metrics, and none is configured "
                "(PROMETHEUS_URL); scale on cpu.")
    if not keda_served(cluster):
        return ("Scaling on GPU utilization needs KEDA on the cluster, and this cluster has no KEDA "
                "(its ScaledObject kind is not served); scale on cpu, or ask the platform's operators to install KEDA.")
    return ""


def gpu_scaling(job, pods: str, max_replicas: int) -> GpuScaling:
    """What the ScaledObject of ``job`` says beyond the job itself, from settings."""
    return GpuScaling(
        server_address=prometheus_address(),
        pods=pods,
        max_replicas=max_replicas,
        polling_seconds=settings.KEDA_POLLING_INTERVAL_SECONDS,
        scale_down_window_seconds=settings.KEDA_SCALE_DOWN_WINDOW_SECONDS,
        authentication=settings.KEDA_PROMETHEUS_AUTHENTICATION,
        auth_modes=settings.KEDA_PROMETHEUS_AUTH_MODES,
    )
