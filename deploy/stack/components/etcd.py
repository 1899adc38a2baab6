"""etcd, the local cluster's store (deploy/local-cluster/cluster.sh): one member, on loopback."""

from ..component import Build, Component

COMPONENT = Component(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    version="v3.6.16",
    build=Build(packages={"etcd": "go.etcd.io/etcd/server/v3"}, wrapper="deploy/local-cluster/modules/etcd",
                ldflags="-s -w"),
    ports={"client": 12379, "peer": 12380},
    readiness=("http://127.0.0.1:{client}/health",),
)
