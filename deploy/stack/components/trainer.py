"""The Kubeflow Trainer v2 controller manager (deploy/local-cluster/cluster.sh): TrainJobs,
run from a ClusterTrainingRuntime as a JobSet; its CRDs, webhooks and the runtimes the platform
offers (manifests/base/runtimes) come from the same module."""

from ..component import Build, Component, Site


def configuration(site: Site) -> dict:
    """One replica (no leader election); its webhooks on 127.0.0.1 with a certificate of the
    cluster's CA (cluster.sh), not one it makes and rotates itself. The Trainer has no setting
    for the certificate directory: controller-runtime's default, under $TMPDIR, which
    cluster.sh points into the cluster's pki. The runtime status server (feature gate
    TrainJobStatus, alpha) stays off."""
    port = {role: COMPONENT.port(role, site.offset) for role in COMPONENT.ports}
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": port["webhook"]},
        "metrics": {"bindAddress": f"127.0.0.1:{port['metrics']}", "secureServing": True},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{port['health']}"},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def arguments(site: Site) -> dict[str, list[str]]:
    return {"trainer-controller-manager": ["--config", COMPONENT.config_file(site), "--kubeconfig", site.kubeconfig,
                                           "--zap-log-level", "info"]}


COMPONENT = Component(
    name="trainer",
    module="github.com/kubeflow/trainer/v2",
    version="v2.2.1",
    build=Build(packages={"trainer-controller-manager": "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"},
                wrapper="deploy/local-cluster/modules/trainer", ldflags="-s -w"),
    ports={"webhook": 16946, "metrics": 16985, "health": 16986},
    readiness=("http://127.0.0.1:{health}/readyz",),
    arguments=arguments,
    config=configuration,
)
