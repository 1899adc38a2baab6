"""The JobSet controller manager (deploy/local-cluster/cluster.sh): the JobSets a Kubeflow
TrainJob is run as (and Kueue admits as one workload); its CRD comes from the same module."""

from ..component import Build, Component

COMPONENT = Component(
    name="jobset",
    module="sigs.k8s.io/jobset",
    version="v0.12.0",
    build=Build(packages={"jobset-controller": "sigs.k8s.io/jobset"}, wrapper="deploy/local-cluster/modules/jobset",
                ldflags="-s -w"),
    ports={"webhook": 16945, "metrics": 16983, "health": 16984},
    readiness=("http://127.0.0.1:{health}/readyz",),
)
