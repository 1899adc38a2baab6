"""gpu-exporter, ours (deploy/local-cluster/modules/gpu-exporter): the local cluster's stand-in
for NVIDIA's dcgm-exporter, serving its metrics for the fake GPU nodes. It has no release: its
version is a digest of its sources, so an edit builds a new binary."""

from ..component import Build, Component, Site, source_digest

MODULE_DIR = "deploy/local-cluster/modules/gpu-exporter"


def arguments(site: Site) -> dict[str, list[str]]:
    return {"gpu-exporter": ["--kubeconfig", site.kubeconfig, "--listen", f"127.0.0.1:{COMPONENT.port('http', site.offset)}"]}


COMPONENT = Component(
    name="gpu-exporter",
    module="gpuplatform.local/cluster/gpu-exporter",
    version=source_digest(MODULE_DIR),
    build=Build(packages={"gpu-exporter": "gpuplatform.local/cluster/gpu-exporter"}, wrapper=MODULE_DIR, ldflags="-s -w"),
    ports={"http": 19400},
    readiness=("http://127.0.0.1:{http}/health",),
    arguments=arguments,
)
