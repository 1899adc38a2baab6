"""A flavor's network topology: which node labels say a node's block and rack, so that a
training job may keep its pods in one rack or one block (docs/topology.md).

Three levels, widest first: block > rack > host (``kubernetes.io/hostname``). Kueue builds
its Topology from them (topology-aware scheduling, TAS: `workloads.kueue.render_topology`);
Volcano builds its HyperNodes from the same node labels (its label discovery: a rack is a
tier-1 HyperNode, a block a tier-2 one) and a gang asks for a tier (`workloads.volcano`).
A job names the level (``Placement``), never a label: the flavor maps it. Pure: no queries.
"""

from dataclasses import dataclass

from django.db import models

HOST_LABEL = "kubernetes.io/hostname"


class Placement(models.TextChoices):
    """Where a training job's pods must (or should) stay together."""

    ANYWHERE = "", "Anywhere"
    RACK = "rack", "One rack (required)"
    RACK_PREFERRED = "rack-preferred", "One rack if possible"
    BLOCK = "block", "One block (required)"
    BLOCK_PREFERRED = "block-preferred", "One block if possible"


def placement_level(placement: str) -> str:
    """"rack" or "block" (or "" for anywhere)."""
    return (placement or "").removesuffix("-preferred")


def placement_required(placement: str) -> bool:
    return bool(placement) and not placement.endswith("-preferred")


def topology_levels(flavor) -> list[tuple[str, str]]:
    """(level, node label) widest first, host last; [] when the flavor declares no topology."""
    if not flavor.topology_rack_label:
        return []
    levels = [("block", flavor.topology_block_label)] if flavor.topology_block_label else []
    return [*levels, ("rack", flavor.topology_rack_label), ("host", HOST_LABEL)]


def level_label(flavor, placement: str) -> str | None:
    """The node label of the level a placement names, None if the flavor lacks that level."""
    return dict(topology_levels(flavor)).get(placement_level(placement))


@dataclass(frozen=True)
class TopologyRequest:
    """What a job's placement asks of the scheduler: the level's node label (Kueue), its
    tier counted from the hosts' parents (1 a rack, 2 a block: Volcano's HyperNode tiers),
    and whether it is required."""

    level: str
    label: str
    tier: int
    required: bool


TIERS = {"rack": 1, "block": 2}


def topology_request(flavor, placement: str) -> TopologyRequest | None:
    label = level_label(flavor, placement)
    if label is None or not placement:
        return None
    level = placement_level(placement)
    return TopologyRequest(level, label, TIERS[level], placement_required(placement))


def topology_problems(flavor) -> dict[str, str]:
    """Field errors for a topology that cannot be built."""
    errors = {}
    block, rack = flavor.topology_block_label, flavor.topology_rack_label
    if block and not rack:
        errors["topology_rack_label"] = "A block is made of racks: give the racks' node label too."
    if rack and rack in (block, HOST_LABEL):
        errors["topology_rack_label"] = "Each level needs its own node label (the host level is kubernetes.io/hostname)."
    if block == HOST_LABEL:
        errors["topology_block_label"] = "The host level is kubernetes.io/hostname already; give the blocks' label."
    return errors


def placement_problem(flavor, placement: str) -> str:
    """Why a job's placement cannot be honoured on the flavor ("" when it can)."""
    if not placement or level_label(flavor, placement):
        return ""
    level = placement_level(placement)
    if not topology_levels(flavor):
        return (f"Flavor {flavor.name} declares no network topology, so its pods cannot be kept in one {level}: "
                "choose Anywhere, or a flavor with a topology.")
    return f"Flavor {flavor.name} has racks but no blocks: choose one rack, or Anywhere."


def topology_description(flavor) -> str:
    levels = topology_levels(flavor)
    if not levels:
        return "No topology declared: jobs cannot ask to stay in one rack or block."
    said = " > ".join(f"{level} ({label})" for level, label in levels)
    if flavor.scheduler == "volcano":
        return (f"{said}. Volcano: a gang kept together stays within one HyperNode (tier {TIERS['rack']} a rack, "
                f"tier {TIERS['block']} a block), which Volcano's label discovery builds from these labels: its "
                "controller configuration must list them, widest first (docs/topology.md).")
    return f"{said}. Kueue: a Topology of these levels, named by the flavor's ResourceFlavor."
