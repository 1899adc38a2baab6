"""KEDA's operator and its external metrics API server, for inference autoscaling on GPU
utilization (deploy/local-cluster/keda.sh runs them against the local cluster; its ports
shift with the cluster's profile). Its CRDs come from the same module (tests/schemas.py)."""

from ..component import Build, Component

COMPONENT = Component(
    name="keda",
    module="github.com/kedacore/keda/v2",
    version="v2.21.0",
    build=Build(packages={"keda-operator": "github.com/kedacore/keda/v2/cmd/operator",
                          "keda-adapter": "github.com/kedacore/keda/v2/cmd/adapter"},
                wrapper="deploy/local-cluster/modules/keda",
                ldflags="-s -w -X github.com/kedacore/keda/v2/version.Version={version}"),
    ports={"operator_metrics": 17100, "operator_health": 17101,
           "grpc": 17102,  # the operator's metrics service; the adapter asks it
           "adapter": 17103,  # external.metrics.k8s.io, reached through the aggregator
           "adapter_metrics": 17104},
    readiness=("http://127.0.0.1:{operator_health}/readyz",),
)
