"""What a job asks in GPUs and whether a worker fits a node, defined once, each beside its
database form: a job's kind declares its shape (`workloads.kinds.GpuShape`: which field counts
its replicas at most and to start), read here as a Python value and as a SQL expression over
every registered kind. The conformance suite holds the two equal on generated jobs."""

from types import SimpleNamespace

from django.db.models import Case, F, IntegerField, Q, When
from django.db.models.functions import Coalesce

from workloads.kinds import KINDS, by_name


def _expression(end: str):
    """The GPUs of ``end`` ("most" or "start") replicas, by each kind's shape."""
    return Case(
        *[When(kind=kind.name, then=Coalesce(F(getattr(kind.shape, end)), 1) * F("gpus_per_worker"))
          for kind in KINDS],
        default=F("workers") * F("gpus_per_worker"),
        output_field=IntegerField(),
    )


# `total_gpus` in SQL: what a job asks at most (every worker, a server's most replicas).
TOTAL_GPUS = _expression("most")
# `gpus_to_start` in SQL: what it needs to start (every worker, a server's fewest replicas).
START_GPUS = _expression("start")
# `fits_a_node` in SQL, for jobs joined to their flavor.
FITS_A_NODE = Q(gpus_per_worker__lte=F("flavor__gpus_per_node"))


def total_gpus(job) -> int:
    """What a job (or a row of its fields, as a mapping) asks at most."""
    job = SimpleNamespace(**job) if isinstance(job, dict) else job
    return by_name(job.kind).shape.at_most(job)


def gpus_to_start(job) -> int:
    """What a job needs to start: every worker (a gang, or Kueue's whole job), or a server's
    minimum replicas (the autoscaler adds more only when they fit)."""
    job = SimpleNamespace(**job) if isinstance(job, dict) else job
    return by_name(job.kind).shape.to_start(job)


def fits_a_node(gpus_per_worker: int | None, flavor) -> bool:
    """Whether one worker's GPUs fit on one node of ``flavor``."""
    return (gpus_per_worker or 0) <= flavor.gpus_per_node


def too_big_for_a_node(gpus_per_worker: int | None, flavor) -> str:
    """Why a worker cannot fit a node of ``flavor``, in words ("" when it can)."""
    if fits_a_node(gpus_per_worker, flavor):
        return ""
    return f"{gpus_per_worker} GPUs per worker, but nodes of flavor {flavor.name} have {flavor.gpus_per_node}."
