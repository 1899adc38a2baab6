"""What a team uses, borrows and waits for on each flavor: the one definition.

The dashboard and quota list (`usage_for`), the team API and the managers' console
(`job_gpus`) all read it here, so they cannot disagree about the same team:

- in use: the GPUs its jobs' pods hold on nodes now (`Job.gpus_in_use`, the count of each
  job's open `GpuInterval`: what the usage page and its CSV charge, `jobs.models.intervals`). An
  inference server of 1-3 replicas that runs one uses one replica's GPUs; nothing is held
  back for the replicas it may scale to (the schedulers reserve none: Kueue admits each
  replica's pod on its own, Volcano places pods one by one), so there is no reservation to
  show beside it;
- waiting: what its waiting jobs that may start need to start (`jobs.queue.queueing`): a job that
  can never start (more than the team can ever use, or a worker bigger than a node) is not
  demand on anyone's quota;
- borrowed: what is in use beyond the nominal quota.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Case, Count, IntegerField, Q, Sum, Value, When

from quotas.models import GpuFlavor, Quota

from ..lifecycle import HOLDING_QUOTA, WAITING_FOR_QUOTA, State
from ..models import Job
from ..queue.queueing import MAY_START, START_GPUS

# Every state a job can hold GPUs or wait in: cancelling holds what it held until it ends.
_COUNTED_STATES = (*HOLDING_QUOTA, *WAITING_FOR_QUOTA, State.CANCELLING)


@dataclass
class JobGpus:
    """What one team's jobs hold and wait for on one flavor."""

    in_use: int = 0
    waiting: int = 0
    running_jobs: int = 0
    waiting_jobs: int = 0


def ceilings_for(teams=None, *, flavor=None) -> dict[tuple[int, int], int]:
    """The most GPUs each team can use on each flavor (borrowing included), per (team id,
    flavor id) of ``teams`` (every team when None), in one query. A pair without a quota is
    missing: its jobs can never start."""
    quotas = Quota.objects.all()
    if teams is not None:
        quotas = quotas.filter(team__in=teams)
    if flavor is not None:
        quotas = quotas.filter(flavor=flavor)
    return {(q.team_id, q.flavor_id): q.ceiling_gpus
            for q in quotas.with_cohort_lendable().only("team", "flavor", "cohort", "nominal_gpus",
                                                          "borrowing_limit_gpus")}


def job_gpus(teams=None, *, flavor=None, ceilings=None) -> dict[tuple[int, int], JobGpus]:
    """`JobGpus` per (team id, flavor id) of `teams` (every team when None), on one flavor
    or all, in one query (two when ``ceilings``, from `ceilings_for`, is not given)."""
    jobs = Job.objects.filter(state__in=_COUNTED_STATES)
    if teams is not None:
        jobs = jobs.filter(team__in=teams)
    if flavor is not None:
        jobs = jobs.filter(flavor=flavor)
    # Grouped by what each waiting job that may start needs (0 for the others), so that the
    # ceiling of each team can be held against it below.
    rows = (
        jobs.annotate(need=Case(When(MAY_START, then=START_GPUS), default=Value(0), output_field=IntegerField()))
        .values("team_id", "flavor_id", "need")
        .annotate(in_use=Sum("gpus_in_use"), running=Count("id", filter=Q(state=State.RUNNING)), jobs=Count("id"))
        .order_by()
    )
    if ceilings is None:
        ceilings = ceilings_for(teams, flavor=flavor)
    out: dict[tuple[int, int], JobGpus] = {}
    for row in rows:
        key = (row["team_id"], row["flavor_id"])
        gpus = out.setdefault(key, JobGpus())
        gpus.in_use += row["in_use"] or 0
        gpus.running_jobs += row["running"]
        if 0 < row["need"] <= ceilings.get(key, 0):
            gpus.waiting += row["need"] * row["jobs"]
            gpus.waiting_jobs += row["jobs"]
    return out


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
    quotas = list(
        Quota.objects.filter(team__in=teams).select_related("team", "flavor", "cohort").with_cohort_lendable()
        .order_by("team__slug", "flavor__name")
    )
    gpus = job_gpus(teams, ceilings={(q.team_id, q.flavor_id): q.ceiling_gpus for q in quotas})
    return {(q.team_id, q.flavor_id): Usage(quota=q, flavor=q.flavor, gpus=gpus.get((q.team_id, q.flavor_id), JobGpus()))
            for q in quotas}


def admitted_intervals(events, until: datetime) -> list[tuple[datetime, datetime]]:
    """When a job held GPUs, on its events alone: ``events`` are (time, to_state) in order;
    the result, the intervals during which its state held quota, one still open closed at
    ``until``. A state that holds quota opens an interval unless one is open; cancelling keeps
    what it held until the job ends; any other state closes it. ``Job.transition`` writes the
    same stretches as they happen (``GpuInterval``), cut further where the watcher saw the
    count of its pods on nodes change (`jobs.models.intervals`); migration 0005 replayed this once."""
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
    key = (team.pk, flavor.pk)
    gpus = job_gpus([team], flavor=flavor, ceilings={key: quota.ceiling_gpus}).get(key, JobGpus())
    return Usage(quota=quota, flavor=flavor, gpus=gpus)
