"""The components of the local stack, one module each; adding one is its module and one line
here. deploy/local-cluster/cluster.sh, keda.sh, deploy/local-idp/idp.sh and
deploy/helm/build-helm.sh read them (python3 -m deploy.stack.components)."""

from ..component import Component
from . import (
    etcd,
    gpu_exporter,
    helm,
    hydra,
    jobset,
    keda,
    kuberay,
    kubernetes,
    kueue,
    kwok,
    lws,
    prometheus,
    trainer,
    volcano,
)

COMPONENTS: dict[str, Component] = {c.name: c for c in (
    etcd.COMPONENT, kubernetes.COMPONENT, kwok.COMPONENT, kueue.COMPONENT, volcano.COMPONENT, kuberay.COMPONENT,
    jobset.COMPONENT, trainer.COMPONENT, lws.COMPONENT,
    prometheus.COMPONENT, gpu_exporter.COMPONENT, keda.COMPONENT, hydra.COMPONENT, helm.COMPONENT,
)}


def of_binary(binary: str) -> Component:
    """The component that builds `binary`."""
    for component in COMPONENTS.values():
        if binary in component.build.packages:
            return component
    raise SystemExit(f"no component builds {binary!r}")


def get(name: str) -> Component:
    try:
        return COMPONENTS[name]
    except KeyError:
        raise SystemExit(f"no component {name!r}: one of {', '.join(COMPONENTS)}") from None
