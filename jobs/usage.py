"""What a team uses, borrows and waits for on each flavor: the one definition.

The dashboard and quota list (`usage_for`), the team API and the managers' console
(`job_gpus`) all read it here, so they cannot disagree about the same team:

- in use: GPUs of the team's jobs whose pods hold quota (`HOLDING_QUOTA`: admitted, running);
- waiting: GPUs of its jobs waiting for quota (`WAITING_FOR_QUOTA`: submitted, queued, preempted);
- borrowed: what is in use beyond the nominal quota.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Case, Count, F, IntegerField, Q, Sum, When
from django.db.models.functions import Coalesce

from quotas.models import GpuFlavor, Quota

from .lifecycle import HOLDING_QUOTA, WAITING_FOR_QUOTA, State
from .models import Job

# Job.total_gpus in SQL: replicas (max for inference) times GPUs per worker.
TOTAL_GPUS = Case(
    When(kind=Job.Kind.INFERENCE, then=Coalesce(F("max_replicas"), 1) * F("gpus_per_worker")),
    default=F("workers") * F("gpus_per_worker"),
    output_field=IntegerField(),
)


@dataclass
class JobGpus:
    """What one team's jobs hold and wait for on one flavor."""

    in_use: int = 0
    waiting: int = 0
    running_jobs: int = 0
    waiting_jobs: int = 0


def job_gpus(teams=None, *, flavor=None) -> dict[tuple[int, int], JobGpus]:
    """`JobGpus` per (team id, flavor id) of `teams` (every team when None), on one flavor
    or all, in one query."""
    jobs = Job.objects.filter(state__in=HOLDING_QUOTA + WAITING_FOR_QUOTA)
    if teams is not None:
        jobs = jobs.filter(team__in=teams)
    if flavor is not None:
        jobs = jobs.filter(flavor=flavor)
    rows = (
        jobs.values("team_id", "flavor_id")
        .annotate(
            in_use=Coalesce(Sum(TOTAL_GPUS, filter=Q(state__in=HOLDING_QUOTA)), 0),
            waiting=Coalesce(Sum(TOTAL_GPUS, filter=Q(state__in=WAITING_FOR_QUOTA)), 0),
            running_jobs=Count("id", filter=Q(state=State.RUNNING)),
            waiting_jobs=Count("id", filter=Q(state__in=WAITING_FOR_QUOTA)),
        )
        .order_by()
    )
    return {(r.pop("team_id"), r.pop("flavor_id")): JobGpus(**r) for r in rows}


@dataclass
class Usage:
    """One team's quota on one flavor, with what its jobs hold and wait for."""

    quota: Quota | None
    flavor: GpuFlavor
    gpus: JobGpus = field(default_factory=JobGpus)

    @property
    def in_use(self) -> int:
        return self.gpus.in_use

    @property
    def running(self) -> int:
        return self.gpus.running_jobs

    @property
    def queued(self) -> int:
        return self.gpus.waiting_jobs

    @property
    def nominal(self) -> int:
        return self.quota.nominal_gpus if self.quota else 0

    @property
    def ceiling(self) -> int:
        return self.quota.ceiling_gpus if self.quota else 0

    @property
    def borrowable(self) -> int:
        return self.ceiling - self.nominal

    @property
    def borrowed(self) -> int:
        return max(0, self.in_use - self.nominal)

    @property
    def free(self) -> int:
        return max(0, self.ceiling - self.in_use)

    def bar(self) -> dict:
        """Widths (percent of the bar) of the used part, the nominal quota and the borrowable part."""
        scale = max(self.ceiling, self.in_use, 1)
        return {
            "used": round(100 * min(self.in_use, scale) / scale),
            "nominal": round(100 * self.nominal / scale),
            "borrowable": round(100 * self.borrowable / scale),
        }


def usage_for(teams) -> dict[tuple[int, int], Usage]:
    """Usage per (team id, flavor id) for every quota of ``teams``, in two queries. Jobs on
    a flavor where the team has no quota are left out (there is no quota to show them on)."""
    quotas = (
        Quota.objects.filter(team__in=teams).select_related("team", "flavor", "cohort").with_cohort_lendable()
        .order_by("team__slug", "flavor__name")
    )
    gpus = job_gpus(teams)
    return {(q.team_id, q.flavor_id): Usage(quota=q, flavor=q.flavor, gpus=gpus.get((q.team_id, q.flavor_id), JobGpus()))
            for q in quotas}


def admitted_intervals(events, until: datetime) -> list[tuple[datetime, datetime]]:
    """The rule of GPU time, on a job's events: ``events`` are (time, to_state) in order;
    the result, the intervals during which the job held GPUs, one still open closed at
    ``until``. A state that holds quota opens an interval unless one is open; cancelling keeps
    what it held until the job ends; any other state closes it. ``Job.transition`` writes the
    same intervals as they happen (``GpuInterval``), and migration 0005 replayed it once."""
    intervals, opened = [], None
    for at, state in events:
        if state in HOLDING_QUOTA:
            opened = opened or at
        elif state == State.CANCELLING:
            continue  # cancelling keeps what it held until it ends
        elif opened is not None:
            intervals.append((opened, at))
            opened = None
    if opened is not None and opened < until:
        intervals.append((opened, until))
    return intervals


def usage_of(team, flavor) -> Usage:
    """One team's usage on one flavor (every submit's estimate, a job's page): its quota
    alone, with what the cohort lends read only if it has a cohort (``Quota.ceiling_gpus``),
    rather than all its quotas annotated as ``usage_for`` does."""
    quota = Quota.objects.filter(team=team, flavor=flavor).select_related("cohort").first()
    if quota is None:
        return Usage(quota=None, flavor=flavor)
    quota.team, quota.flavor = team, flavor
    return Usage(quota=quota, flavor=flavor, gpus=job_gpus([team], flavor=flavor).get((team.pk, flavor.pk), JobGpus()))
