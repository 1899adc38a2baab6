"""The LeaderWorkerSet controller manager (deploy/local-cluster/cluster.sh): groups of pods
served across nodes (a leader and its workers), admitted by Kueue group by group; its CRDs and
webhooks come from the same module."""

from ..component import Build, Component, Site


def configuration(site: Site) -> dict:
    """One replica (no leader election); its webhooks on 127.0.0.1 with a certificate of the
    cluster's CA (cluster.sh), not one it makes and rotates itself."""
    port = {role: COMPONENT.port(role, site.offset) for role in COMPONENT.ports}
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": port["webhook"], "certDir": f"{site.pki}/lws-webhook"},
        "metrics": {"bindAddress": f"127.0.0.1:{port['metrics']}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{port['health']}"},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def arguments(site: Site) -> dict[str, list[str]]:
    return {"lws-controller": ["--config", COMPONENT.config_file(site), "--kubeconfig", site.kubeconfig,
                               "--zap-log-level", "info", "--zap-devel=false"]}


COMPONENT = Component(
    name="lws",
    module="sigs.k8s.io/lws",
    version="v0.9.0",
    build=Build(packages={"lws-controller": "sigs.k8s.io/lws/cmd"}, wrapper="deploy/local-cluster/modules/lws",
                ldflags="-s -w"),
    ports={"webhook": 16947, "metrics": 16987, "health": 16988},
    readiness=("http://127.0.0.1:{health}/readyz",),
    arguments=arguments,
    config=configuration,
)
