"""The LeaderWorkerSet controller manager (deploy/local-cluster/cluster.sh): groups of pods
served across nodes (a leader and its workers), admitted by Kueue group by group; its CRD
comes from the same module."""

from ..component import Build, Component

COMPONENT = Component(
    name="lws",
    module="sigs.k8s.io/lws",
    version="v0.9.0",
    build=Build(packages={"lws-controller": "sigs.k8s.io/lws/cmd"}, wrapper="deploy/local-cluster/modules/lws",
                ldflags="-s -w"),
    ports={"webhook": 16947, "metrics": 16987, "health": 16988},
    readiness=("http://127.0.0.1:{health}/readyz",),
)
