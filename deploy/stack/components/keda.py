"""KEDA's operator and its external metrics API server, for inference autoscaling on GPU
utilization (deploy/local-cluster/keda.sh runs them against the local cluster; its ports
shift with the cluster's profile). Its CRDs come from the same module (tests/schemas.py)."""

from ..component import Build, Component, Site


def arguments(site: Site) -> dict[str, list[str]]:
    """Both read the kubeconfig and KEDA's namespaces from the environment (keda.sh); one
    certificate of the cluster's CA in pki/keda serves and authenticates both ends of gRPC."""
    pki = f"{site.pki}/keda"

    def port(role: str) -> str:
        return str(COMPONENT.port(role, site.offset))

    return {
        "keda-operator": [
            "--metrics-bind-address", f"127.0.0.1:{port('operator_metrics')}",
            "--health-probe-bind-address", f"127.0.0.1:{port('operator_health')}",
            "--metrics-service-bind-address", f"127.0.0.1:{port('grpc')}",
            "--cert-dir", pki, "--ca-dir", pki, "--leader-elect=false", "--zap-log-level", "info",
        ],
        "keda-adapter": [
            "--secure-port", port("adapter"), "--bind-address", "127.0.0.1", "--cert-dir", pki,
            "--tls-cert-file", f"{pki}/tls.crt", "--tls-private-key-file", f"{pki}/tls.key",
            "--lister-kubeconfig", site.kubeconfig, "--authentication-kubeconfig", site.kubeconfig,
            "--authorization-kubeconfig", site.kubeconfig,
            "--metrics-service-address", f"127.0.0.1:{port('grpc')}", "--port", port("adapter_metrics"),
            "--zap-log-level", "info",
        ],
    }


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
    arguments=arguments,
)
