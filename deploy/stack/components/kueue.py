"""Kueue's controller manager (deploy/local-cluster/cluster.sh): quotas and admission. Its
webhooks and its visibility API (reached through the API server's aggregator) are served on
127.0.0.1; its CRDs and webhook definitions come from the same module."""

from ..component import Build, Component, Site


def arguments(site: Site) -> dict[str, list[str]]:
    # its ports are in kueue-config.yaml, which cluster.sh renders into the cluster's directory
    return {"kueue": ["--config", f"{site.cluster_dir}/kueue-config.yaml", "--kubeconfig", site.kubeconfig,
                      "--zap-log-level", "info"]}


COMPONENT = Component(
    name="kueue",
    module="sigs.k8s.io/kueue",
    version="v0.19.2",
    build=Build(packages={"kueue": "sigs.k8s.io/kueue/cmd/kueue"}, wrapper="deploy/local-cluster/modules/kueue",
                ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={version}"),
    ports={"webhook": 16943, "metrics": 16980, "health": 16981, "visibility": 16982},
    readiness=("http://127.0.0.1:{health}/readyz",),
    arguments=arguments,
)
