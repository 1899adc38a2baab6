"""kwok: the local cluster's fake GPU nodes and their pods' lifecycles, and what a kubelet serves
for them (container logs) on the kubelet port, which every fake node names as its own."""

from ..component import Build, Component, Site

VERSION = "v0.8.0"


def arguments(site: Site) -> dict[str, list[str]]:
    """Stages of config/kwok-stages.yaml; the kubelet side (container logs) of kwok-logs.yaml,
    which cluster.sh writes into the cluster's directory, served with a certificate of its CA
    on the address and port the node stages write into every fake node."""
    kubelet = str(COMPONENT.port("kubelet", site.offset))
    return {"kwok": [
        "--kubeconfig", site.kubeconfig, "--config", f"{site.config_dir}/kwok-stages.yaml",
        "--config", f"{site.cluster_dir}/kwok-logs.yaml",
        "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
        "--node-lease-duration-seconds", "40", "--cidr", "10.244.0.1/16", "--node-ip", "127.0.0.1",
        "--node-port", kubelet, "--server-address", f"127.0.0.1:{kubelet}",
        "--tls-cert-file", f"{site.pki}/kwok-kubelet.crt", "--tls-private-key-file", f"{site.pki}/kwok-kubelet.key",
    ]}


COMPONENT = Component(
    name="kwok",
    module="sigs.k8s.io/kwok",
    version=VERSION,
    build=Build(packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"}, wrapper="deploy/local-cluster/modules/kwok",
                ldflags=f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={VERSION.removeprefix('v')}"),
    ports={"kubelet": 16250},
    arguments=arguments,
)
