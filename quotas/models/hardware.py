"""What a flavor's hardware is, beyond its resource name: how its GPUs are shared (and so what
one unit of quota means in memory, isolation and fault domain), and the network its nodes
train across (the NCCL defaults and RDMA devices a multi-node job gets).

The facts come from the NVIDIA device plugin (NVIDIA/k8s-device-plugin, README "Shared
Access to GPUs" and cmd/mps-control-daemon/mps/daemon.go): time-slicing hands out
``replicas`` references to each GPU with no memory isolation, one fault domain; MPS hands out
``replicas`` clients per GPU, and its control daemon limits each to ``memory / replicas`` of
device memory (``set_default_device_pinned_mem_limit <index> <MiB>M``) and ``100 / replicas``
percent of the threads (``set_default_active_thread_percentage``); the plugin refuses an MPS
request of more than one unit (``failRequestsGreaterThanOne`` forced on) and serves MPS on full
GPUs only (no MIG). Pure: no queries, so forms, models and renderers ask alike.
"""

import re

from django.core.exceptions import ValidationError
from django.db import models

from core.validators import validate_resource_name

# MPS serves at most 48 clients per GPU (Volta and later); time-slicing has no hard bound but
# more than 64 pods on one GPU is a typo.
MAX_REPLICAS_PER_GPU = 64
MAX_MPS_CLIENTS = 48
MAX_RDMA_PER_POD = 64
# The device plugin's MIG resources under the mixed strategy: nvidia.com/mig-<g>g.<mem>gb,
# optionally a compute-instance prefix (mig-1c.3g.24gb) or media extensions (+me).
MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?:\d+c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?:\+me)?$")
FULL_GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
# NCCL's own syntax: an optional '^' (exclude) or '=' (exact) then names separated by ','.
IFNAME_LIST = re.compile(r"^[\^=]?[A-Za-z0-9_.:-]{1,15}(,[A-Za-z0-9_.:-]{1,15}){0,15}$")
HCA_LIST = re.compile(r"^[\^=]?[A-Za-z0-9_]{1,32}(:\d{1,2})?(,[A-Za-z0-9_]{1,32}(:\d{1,2})?){0,15}$")


class Fabric(models.TextChoices):
    """The network multi-node jobs on a flavor talk over (NCCL's transport)."""

    UNDECLARED = "", "Not declared (single-node jobs only)"
    INFINIBAND = "infiniband", "InfiniBand"
    ROCE = "roce", "RoCE (RDMA over Ethernet)"
    TCP = "tcp", "TCP sockets"


RDMA_FABRICS = frozenset({Fabric.INFINIBAND, Fabric.ROCE})


class GdrLevel(models.TextChoices):
    """NCCL_NET_GDR_LEVEL: how far apart a NIC and a GPU may be for GPUDirect RDMA."""

    LOC = "LOC", "LOC: never"
    PIX = "PIX", "PIX: same PCI switch"
    PXB = "PXB", "PXB: across PCI switches"
    PHB = "PHB", "PHB: same CPU socket"
    SYS = "SYS", "SYS: anywhere"


def validate_ifname_list(value: str) -> None:
    if value and not IFNAME_LIST.match(value):
        raise ValidationError("Interface names as NCCL takes them, e.g. eth0, ib0,ib1, ^docker0 or =eth1.",
                              code="nccl_ifname")


def validate_hca_list(value: str) -> None:
    if value and not HCA_LIST.match(value):
        raise ValidationError("HCA names as NCCL takes them, e.g. mlx5_0:1,mlx5_1:1 or =mlx5_0.", code="nccl_hca")


def validate_rdma_resources(value) -> None:
    if not isinstance(value, dict):
        raise ValidationError("RDMA resources are a mapping of resource name to count, e.g. {\"rdma/hca\": 1}.",
                              code="rdma")
    for name, count in value.items():
        validate_resource_name(name)
        if name.startswith("nvidia.com/gpu") or name in ("cpu", "memory"):
            raise ValidationError(f"{name} is not an RDMA device resource.", code="rdma")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_RDMA_PER_POD:
            raise ValidationError(f"{name}: a whole number of devices from 1 to {MAX_RDMA_PER_POD}.", code="rdma")


def mig_profile_memory_gib(resource_name: str) -> int | None:
    """The memory of a MIG profile, from its resource name (mig-1g.10gb: 10); None if not MIG."""
    match = MIG_RESOURCE.match(resource_name or "")
    return int(match["gb"]) if match else None


def gib_text(mib: int) -> str:
    gib = mib / 1024
    return f"{gib:.0f} GiB" if gib == int(gib) else f"{gib:.1f} GiB"


def sharing_problems(flavor) -> dict[str, str]:
    """Field errors for a sharing mode that does not fit the flavor's other settings."""
    sharing, replicas, resource = flavor.gpu_sharing, flavor.replicas_per_gpu, flavor.resource_name or ""
    profile_gib = mig_profile_memory_gib(resource)
    errors = _replica_problems(sharing, replicas)
    if sharing == "mps":
        errors.update(_mps_problems(resource, replicas))
    if sharing == "mig":
        errors.update(_mig_problems(resource, profile_gib, flavor.gpu_memory_gib))
    if sharing == "exclusive" and profile_gib is not None:
        errors["gpu_sharing"] = "This resource is a MIG slice: choose MIG (or time-slicing of the slices)."
    if sharing == "time-slicing" and resource.endswith(".shared") and resource not in FULL_GPU_RESOURCES:
        errors["resource_name"] = "Time-sliced resources are nvidia.com/gpu, a MIG profile, or either with .shared."
    return errors


def _replica_problems(sharing: str, replicas) -> dict[str, str]:
    shared = sharing in ("time-slicing", "mps")
    if shared and not replicas:
        return {"replicas_per_gpu": "Give how many pods share one GPU (the device plugin's replicas, at least 2)."}
    if not shared and replicas:
        return {"replicas_per_gpu": "Only time-sliced and MPS GPUs are shared by replicas; leave it empty."}
    return {}


def _mps_problems(resource: str, replicas) -> dict[str, str]:
    errors = {}
    if resource not in FULL_GPU_RESOURCES:
        errors["resource_name"] = ("The device plugin shares full GPUs only through MPS: nvidia.com/gpu, "
                                   "or nvidia.com/gpu.shared when it renames shared resources.")
    if replicas and replicas > MAX_MPS_CLIENTS:
        errors["replicas_per_gpu"] = f"MPS serves at most {MAX_MPS_CLIENTS} clients per GPU."
    return errors


def _mig_problems(resource: str, profile_gib: int | None, memory_gib) -> dict[str, str]:
    if profile_gib is None:
        return {"resource_name": ("A MIG flavor names its profile's resource, as the device plugin's mixed "
                                  "strategy does: e.g. nvidia.com/mig-1g.10gb.")}
    if memory_gib and memory_gib != profile_gib:
        return {"gpu_memory_gib": (f"The MIG profile {resource.removeprefix('nvidia.com/')} has "
                                   f"{profile_gib} GiB; give {profile_gib}.")}
    return {}


def network_problems(flavor) -> dict[str, str]:
    """Field errors for NCCL settings the flavor's fabric has no use for, or RDMA it lacks."""
    errors = {}
    fabric, rdma = flavor.network_fabric, flavor.rdma_resources or {}
    if fabric in RDMA_FABRICS and not rdma:
        errors["rdma_resources"] = ("InfiniBand and RoCE need the RDMA devices the pods get, as the RDMA device "
                                    "plugin names them, e.g. {\"rdma/hca\": 1}: no pod is given /dev/infiniband "
                                    "any other way (never privileged, never a host path).")
    if fabric not in RDMA_FABRICS:
        if rdma:
            errors["rdma_resources"] = "Only InfiniBand and RoCE flavors give pods RDMA devices."
        for name, label in (("nccl_ib_hca", "NCCL_IB_HCA"), ("nccl_net_gdr_level", "NCCL_NET_GDR_LEVEL")):
            if getattr(flavor, name):
                errors[name] = f"{label} applies to InfiniBand and RoCE flavors only."
    if fabric != Fabric.ROCE and flavor.nccl_ib_gid_index is not None:
        errors["nccl_ib_gid_index"] = "NCCL_IB_GID_INDEX picks a RoCE address; it applies to RoCE flavors only."
    if fabric == Fabric.UNDECLARED and flavor.nccl_socket_ifname:
        errors["nccl_socket_ifname"] = "Declare the fabric first: NCCL settings reach multi-node jobs only."
    return errors


def nccl_env(flavor) -> dict[str, str]:
    """The NCCL variables a multi-node job on the flavor gets (a job's own env wins)."""
    env = {}
    if flavor.nccl_socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = flavor.nccl_socket_ifname
    if flavor.network_fabric == Fabric.TCP:
        env["NCCL_IB_DISABLE"] = "1"  # sockets only, even where a stray HCA is visible
    if flavor.network_fabric in RDMA_FABRICS:
        env["NCCL_IB_DISABLE"] = "0"
        if flavor.nccl_ib_hca:
            env["NCCL_IB_HCA"] = flavor.nccl_ib_hca
        if flavor.nccl_net_gdr_level:
            env["NCCL_NET_GDR_LEVEL"] = flavor.nccl_net_gdr_level
    if flavor.network_fabric == Fabric.ROCE and flavor.nccl_ib_gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(flavor.nccl_ib_gid_index)
    return env


def selects_node(flavor, node: dict) -> bool:
    """Whether a Node (as the API server gives it) is one of the flavor's: it carries every
    one of the flavor's node labels (a flavor without labels selects none)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return bool(flavor.node_labels) and all(labels.get(k) == v for k, v in flavor.node_labels.items())


def node_selector(flavor) -> str:
    """The flavor's node labels as a label selector (``key=value,...``): what a LIST of its
    Nodes, or ``kubectl -l``, asks for."""
    return ",".join(f"{key}={value}" for key, value in sorted(flavor.node_labels.items()))


def node_gpus(flavor, node: dict) -> int:
    """The flavor's units a node offers pods: its allocatable (else capacity) of the flavor's
    resource, or the flavor's GPUs per node when the node does not say."""
    status = node.get("status") or {}
    amount = (status.get("allocatable") or {}).get(flavor.resource_name) or (
        status.get("capacity") or {}).get(flavor.resource_name)
    try:
        return int(amount) if amount is not None else flavor.gpus_per_node
    except (TypeError, ValueError):
        return flavor.gpus_per_node
