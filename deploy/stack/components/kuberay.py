"""The KubeRay operator (deploy/local-cluster/cluster.sh): RayCluster, RayJob and RayService
controllers, at the version Kueue is built against; its CRDs come from the same module."""

from ..component import Build, Component, Site


def arguments(site: Site) -> dict[str, list[str]]:
    """Every namespace, no leader election (one replica), its own optional webhooks off."""
    metrics, health = (f"127.0.0.1:{COMPONENT.port(role, site.offset)}" for role in ("metrics", "health"))
    return {"kuberay-operator": [
        "--kubeconfig", site.kubeconfig, "--enable-leader-election=false", "--watch-namespace", "",
        "--metrics-addr", metrics, "--health-probe-bind-address", health, "--log-stdout-encoder", "console",
    ]}


COMPONENT = Component(
    name="kuberay",
    module="github.com/ray-project/kuberay/ray-operator",
    version="v1.6.2",
    build=Build(packages={"kuberay-operator": "github.com/ray-project/kuberay/ray-operator"},
                wrapper="deploy/local-cluster/modules/kuberay", ldflags="-s -w"),
    ports={"metrics": 16890, "health": 16891},
    readiness=("http://127.0.0.1:{health}/readyz",),
    arguments=arguments,
)
