"""The JobSet controller manager (deploy/local-cluster/cluster.sh): the JobSets a Kubeflow
TrainJob is run as (and Kueue admits as one workload); its CRD and webhooks come from the same
module."""

from ..component import Build, Component, Site, manager_arguments, manager_configuration


def configuration(site: Site) -> dict:
    """Its webhook's certificate is one of the cluster's CA, not one it makes and rotates itself."""
    return manager_configuration(COMPONENT, site, "config.jobset.x-k8s.io/v1alpha1", cert_dir=f"{site.pki}/jobset-webhook",
                                 internalCertManagement={"enable": False})


def arguments(site: Site) -> dict[str, list[str]]:
    return {"jobset-controller": manager_arguments(COMPONENT, site, "--zap-devel=false")}


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
