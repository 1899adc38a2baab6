"""The LeaderWorkerSet controller manager (deploy/local-cluster/cluster.sh): groups of pods
served across nodes (a leader and its workers), admitted by Kueue group by group; its CRDs and
webhooks come from the same module."""

from ..component import Build, Component, Site, manager_arguments, manager_configuration


def configuration(site: Site) -> dict:
    """Its webhook's certificate is one of the cluster's CA, not one it makes and rotates itself."""
    return manager_configuration(COMPONENT, site, "config.lws.x-k8s.io/v1alpha1", cert_dir=f"{site.pki}/lws-webhook",
                                 internalCertManagement={"enable": False})


def arguments(site: Site) -> dict[str, list[str]]:
    return {"lws-controller": manager_arguments(COMPONENT, site, "--zap-devel=false")}


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
