"""The components of the local stack, one module each; adding one is its module and one line
here. The local cluster's components (deploy/local-cluster/cluster.sh) are still declared in
that script."""

from ..component import Component
from . import helm, hydra, keda

COMPONENTS: dict[str, Component] = {c.name: c for c in (helm.COMPONENT, hydra.COMPONENT, keda.COMPONENT)}


def get(name: str) -> Component:
    try:
        return COMPONENTS[name]
    except KeyError:
        raise SystemExit(f"no component {name!r}: one of {', '.join(COMPONENTS)}") from None
