"""Kubernetes's control plane and its client, one version for all four: kube-apiserver,
kube-controller-manager, kube-scheduler and kubectl (deploy/local-cluster/cluster.sh). Their
health endpoints want a client certificate, so cluster.sh checks readiness itself."""

from ..component import Build, Component, Site
from . import etcd

VERSION = "v1.36.3"


def version_ldflags(version: str) -> str:
    """What Kubernetes's release build stamps (hack/lib/version.sh): `kubectl version` and the
    API server's /version say `version`, not v0.0.0-master."""
    major, minor = version.removeprefix("v").split(".")[:2]
    fields = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "buildDate": "1970-01-01T00:00:00Z"}
    return " ".join(f"-X {package}.{key}={value}" for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
                    for key, value in fields.items())


def apiserver(site: Site) -> list[str]:
    """Client certificates of the cluster's CA; the aggregator's (front-proxy-client) for
    Kueue's visibility and KEDA's metrics APIs; structured authentication from a file the SSO
    tests write an issuer into (it reloads it); its kubelet client for kwok's container logs."""
    pki = site.pki
    return [
        "--authentication-config", f"{site.cluster_dir}/authentication-config.yaml",
        "--etcd-servers", f"http://127.0.0.1:{etcd.COMPONENT.port('client', site.offset)}",
        "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
        "--secure-port", str(COMPONENT.port("apiserver", site.offset)),
        "--cert-dir", f"{pki}/apiserver-certdir",
        "--tls-cert-file", f"{pki}/apiserver.crt", "--tls-private-key-file", f"{pki}/apiserver.key",
        "--client-ca-file", f"{pki}/ca.crt",
        "--requestheader-client-ca-file", f"{pki}/ca.crt", "--requestheader-allowed-names", "front-proxy-client",
        "--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
        "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
        "--proxy-client-cert-file", f"{pki}/front-proxy-client.crt", "--proxy-client-key-file", f"{pki}/front-proxy-client.key",
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file", f"{pki}/sa.pub", "--service-account-signing-key-file", f"{pki}/sa.key",
        "--service-cluster-ip-range", "10.96.0.0/16", "--endpoint-reconciler-type", "none",
        "--authorization-mode", "Node,RBAC",
        "--kubelet-preferred-address-types", "InternalIP", "--kubelet-certificate-authority", f"{pki}/ca.crt",
        "--kubelet-client-certificate", f"{pki}/apiserver-kubelet-client.crt",
        "--kubelet-client-key", f"{pki}/apiserver-kubelet-client.key",
        "--allow-privileged=true", "--profiling=false", "--v=1",
    ]


def arguments(site: Site) -> dict[str, list[str]]:
    kubeconfig = ["--kubeconfig", site.kubeconfig, "--authentication-kubeconfig", site.kubeconfig,
                  "--authorization-kubeconfig", site.kubeconfig, "--bind-address", "127.0.0.1"]
    return {
        "kube-apiserver": apiserver(site),
        "kube-controller-manager": [
            *kubeconfig, "--secure-port", str(COMPONENT.port("controller_manager", site.offset)), "--leader-elect=false",
            "--service-account-private-key-file", f"{site.pki}/sa.key", "--root-ca-file", f"{site.pki}/ca.crt",
            "--cluster-name", "gpuplatform-local", "--profiling=false", "--v=1",
        ],
        "kube-scheduler": [*kubeconfig, "--secure-port", str(COMPONENT.port("scheduler", site.offset)),
                           "--leader-elect=false", "--profiling=false", "--v=1"],
    }


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
    arguments=arguments,
)
