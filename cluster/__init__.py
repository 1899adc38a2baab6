"""The one door to Kubernetes: names, apply, prune, watch, error classes.

It knows Kubernetes and nothing of teams or jobs; the apps import it, never the other way.
"""

from __future__ import annotations

import functools
import threading

from .errors import (
    Cause,
    ClusterError,
    NotFound,
    PermanentError,
    TransientError,
    UnknownKind,
    classify,
)
from .fake import FakeCluster
from .objects import MANAGED_BY_LABEL, MANAGED_BY_VALUE, Action, ApplyResult, ObjectRef
from .watch import WatchStream

__all__ = [
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "Action",
    "ApplyResult",
    "Cause",
    "Cluster",
    "ClusterError",
    "FakeCluster",
    "NotFound",
    "ObjectRef",
    "PermanentError",
    "TransientError",
    "UnknownKind",
    "WatchStream",
    "classify",
    "get_cluster",
]


def __getattr__(name):
    # `Cluster` pulls in the kubernetes client (a noticeable import); the apps import this
    # package for `cluster.names` on every start, so load it only when asked for.
    if name == "Cluster":
        from .client import Cluster

        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_cluster():
    """The process-wide `Cluster` configured by settings (KUBECONFIG or KUBE_IN_CLUSTER,
    KUBE_FIELD_MANAGER, KUBE_WATCH_CACHE). With `cluster.prometheus.prometheus_from_settings`,
    the only place in `cluster/` that reads Django settings. Its watch cache starts a kind
    the first time a reconcile asks for it.

    Tests swap it with `get_cluster.cache_clear()` and a patched settings, or pass a
    `FakeCluster` to the code under test directly.
    """
    with _creating:  # a worker's threads: two first calls must not make two clients and caches
        return _cluster_from_settings()


_creating = threading.Lock()


@functools.cache
def _cluster_from_settings():
    from django.conf import settings

    from .client import Cluster

    return Cluster(
        kubeconfig=settings.KUBECONFIG,
        in_cluster=settings.KUBE_IN_CLUSTER,
        field_manager=settings.KUBE_FIELD_MANAGER,
        watch_cache=settings.KUBE_WATCH_CACHE,
    )


get_cluster.cache_clear = _cluster_from_settings.cache_clear
