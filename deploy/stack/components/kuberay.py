"""The KubeRay operator (deploy/local-cluster/cluster.sh): RayCluster, RayJob and RayService
controllers, at the version Kueue is built against; its CRDs come from the same module."""

from ..component import Build, Component

COMPONENT = Component(
    name="kuberay",
    module="github.com/ray-project/kuberay/ray-operator",
    version="v1.6.0",
    build=Build(packages={"kuberay-operator": "github.com/ray-project/kuberay/ray-operator"},
                wrapper="deploy/local-cluster/modules/kuberay", ldflags="-s -w"),
    ports={"metrics": 16890, "health": 16891},
    readiness=("http://127.0.0.1:{health}/readyz",),
)
