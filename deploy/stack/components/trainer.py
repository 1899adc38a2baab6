"""The Kubeflow Trainer v2 controller manager (deploy/local-cluster/cluster.sh): TrainJobs,
run from a ClusterTrainingRuntime as a JobSet; its CRDs, webhooks and the runtimes the platform
offers (manifests/base/runtimes) come from the same module."""

from ..component import Build, Component, Site, manager_arguments, manager_configuration


def configuration(site: Site) -> dict:
    """The Trainer has no setting for the certificate directory: controller-runtime's default,
    under $TMPDIR, which cluster.sh points into the cluster's pki. The runtime status server
    (feature gate TrainJobStatus, alpha) stays off."""
    found = manager_configuration(COMPONENT, site, "config.trainer.kubeflow.org/v1alpha1",
                                  certManagement={"enable": False})
    found["metrics"]["secureServing"] = True
    return found


def arguments(site: Site) -> dict[str, list[str]]:
    return {"trainer-controller-manager": manager_arguments(COMPONENT, site)}


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
