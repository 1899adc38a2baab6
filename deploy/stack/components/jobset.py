"""The JobSet controller manager (deploy/local-cluster/cluster.sh): the JobSets a Kubeflow
TrainJob is run as (and Kueue admits as one workload); its CRD and webhooks come from the same
module."""

from ..component import Build, Component, Site


def configuration(site: Site) -> dict:
    """One replica (no leader election); its webhooks on 127.0.0.1 with a certificate of the
    cluster's CA (cluster.sh), not one it makes and rotates itself."""
    port = {role: COMPONENT.port(role, site.offset) for role in COMPONENT.ports}
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": port["webhook"], "certDir": f"{site.pki}/jobset-webhook"},
        "metrics": {"bindAddress": f"127.0.0.1:{port['metrics']}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{port['health']}"},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def arguments(site: Site) -> dict[str, list[str]]:
    return {"jobset-controller": ["--config", COMPONENT.config_file(site), "--kubeconfig", site.kubeconfig,
                                  "--zap-log-level", "info", "--zap-devel=false"]}


COMPONENT = Component(
    name="jobset",
    module="sigs.k8s.io/jobset",
    version="v0.12.0",
    build=Build(packages={"jobset-controller": "sigs.k8s.io/jobset"}, wrapper="deploy/local-cluster/modules/jobset",
                ldflags="-s -w"),
    ports={"webhook": 16945, "metrics": 16983, "health": 16984},
    readiness=("http://127.0.0.1:{health}/readyz",),
    arguments=arguments,
    config=configuration,
)
