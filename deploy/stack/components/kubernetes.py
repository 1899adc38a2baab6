"""Kubernetes's control plane and its client, one version for all four: kube-apiserver,
kube-controller-manager, kube-scheduler and kubectl (deploy/local-cluster/cluster.sh). Their
health endpoints want a client certificate, so cluster.sh checks readiness itself."""

from ..component import Build, Component

VERSION = "v1.36.3"


def version_ldflags(version: str) -> str:
    """What Kubernetes's release build stamps (hack/lib/version.sh): `kubectl version` and the
    API server's /version say `version`, not v0.0.0-master."""
    major, minor = version.removeprefix("v").split(".")[:2]
    fields = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "buildDate": "1970-01-01T00:00:00Z"}
    return " ".join(f"-X {package}.{key}={value}" for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
                    for key, value in fields.items())


COMPONENT = Component(
    name="kubernetes",
    module="k8s.io/kubernetes",
    version=VERSION,
    build=Build(packages={name: f"k8s.io/kubernetes/cmd/{name}"
                          for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")},
                wrapper="deploy/local-cluster/modules/kubernetes",
                ldflags=f"-s -w {version_ldflags(VERSION)}"),
    ports={"apiserver": 16443, "controller_manager": 16257, "scheduler": 16259},
    # the staging modules of the same release: v1.MM.P is v0.MM.P
    requires={"api": f"k8s.io/api@v0.{VERSION.removeprefix('v1.')}"},
)
