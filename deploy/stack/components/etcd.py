"""etcd, the local cluster's store (deploy/local-cluster/cluster.sh): one member, on loopback."""

from ..component import Build, Component, Site


def arguments(site: Site) -> dict[str, list[str]]:
    client, peer = (f"http://127.0.0.1:{COMPONENT.port(role, site.offset)}" for role in ("client", "peer"))
    return {"etcd": [
        "--name", "gpuplatform", "--data-dir", f"{site.cluster_dir}/etcd",
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", f"gpuplatform={peer}",
        "--unsafe-no-fsync", "--quota-backend-bytes", "4294967296", "--log-level", "warn",
    ]}


COMPONENT = Component(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    version="v3.6.16",
    build=Build(packages={"etcd": "go.etcd.io/etcd/server/v3"}, wrapper="deploy/local-cluster/modules/etcd",
                ldflags="-s -w"),
    ports={"client": 12379, "peer": 12380},
    readiness=("http://127.0.0.1:{client}/health",),
    arguments=arguments,
)
