"""Helm, for the chart's tests and `make chart-lint` (deploy/helm/build-helm.sh)."""

from ..component import Build, Component

COMPONENT = Component(
    name="helm",
    module="helm.sh/helm/v4",
    version="v4.3.2",
    build=Build(packages={"helm": "helm.sh/helm/v4/cmd/helm"},
                ldflags="-s -w -X helm.sh/helm/v4/internal/version.version={version}"),
)
