"""The Kubeflow Trainer v2 controller manager (deploy/local-cluster/cluster.sh): TrainJobs,
run from a ClusterTrainingRuntime as a JobSet; its CRDs and the runtimes the platform offers
(manifests/base/runtimes) come from the same module."""

from ..component import Build, Component

COMPONENT = Component(
    name="trainer",
    module="github.com/kubeflow/trainer/v2",
    version="v2.2.1",
    build=Build(packages={"trainer-controller-manager": "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"},
                wrapper="deploy/local-cluster/modules/trainer", ldflags="-s -w"),
    ports={"webhook": 16946, "metrics": 16985, "health": 16986},
    readiness=("http://127.0.0.1:{health}/readyz",),
)
