"""Prometheus, the local cluster's stand-in for the user's (deploy/local-cluster/cluster.sh):
it scrapes gpu-exporter. Built from its Go module, cmd/prometheus only: without the web UI's
assets and without the service discovery plugins (static targets are all it needs)."""

from ..component import Build, Component, Site

VERSION = "v0.316.0"  # the Go module's version of Prometheus 3.16.0: v0.3MM.P is 3.MM.P


def release(version: str) -> str:
    minor, patch = version.removeprefix("v0.").split(".")
    return f"3.{int(minor) - 300}.{patch}"


def arguments(site: Site) -> dict[str, list[str]]:
    # prometheus.yml (its scrape of gpu-exporter) is written by cluster.sh into the cluster's directory
    return {"prometheus": [
        "--config.file", f"{site.cluster_dir}/prometheus.yml", "--storage.tsdb.path", f"{site.cluster_dir}/prometheus",
        "--storage.tsdb.retention.time", "7d", "--web.listen-address", f"127.0.0.1:{COMPONENT.port('http', site.offset)}",
        "--log.level", "warn",
    ]}


COMPONENT = Component(
    name="prometheus",
    module="github.com/prometheus/prometheus",
    version=VERSION,
    build=Build(packages={"prometheus": "github.com/prometheus/prometheus/cmd/prometheus"},
                wrapper="deploy/local-cluster/modules/prometheus", tags="remove_all_sd",
                ldflags=f"-s -w -X github.com/prometheus/common/version.Version={release(VERSION)}"
                        " -X github.com/prometheus/common/version.Branch=gpuplatform-local-cluster"),
    ports={"http": 19090},
    readiness=("http://127.0.0.1:{http}/-/ready",),
    arguments=arguments,
)
