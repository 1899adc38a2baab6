"""kwok: the local cluster's fake GPU nodes and their pods' lifecycles, and what a kubelet serves
for them (container logs) on the kubelet port, which every fake node names as its own."""

from ..component import Build, Component

VERSION = "v0.8.0"

COMPONENT = Component(
    name="kwok",
    module="sigs.k8s.io/kwok",
    version=VERSION,
    build=Build(packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"}, wrapper="deploy/local-cluster/modules/kwok",
                ldflags=f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={VERSION.removeprefix('v')}"),
    ports={"kubelet": 16250},
)
