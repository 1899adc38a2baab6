"""GPU-hours lost to preemption (``jobs.Preemption``, docs/preemption.md): what a preempted
job lost since its last checkpoint (else since that run's admission) is "lost" for its
team and "charged" to the team whose job preempted it, on the day of the preemption in the
platform's time zone, by the flavor the hours were lost on. The usage page's table and its
CSV's two columns (``console.accounting``) come from here; each preemption is stored
rounded to 0.01 GPU-hour, so the sums are exact."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from jobs.models import Preemption

DELETED_USER = "(deleted user)"
NO_TEAM = "(outside the platform)"


@dataclass(frozen=True)
class PreemptionTotal:
    team: str
    lost_gpu_hours: Decimal  # its jobs lost to others' (or its own) preemptions
    charged_gpu_hours: Decimal  # its jobs cost others (or itself) by preempting them
    preempted: int
    preempting: int


def _in_window(start: datetime, end: datetime, teams):
    found = Preemption.objects.filter(preempted_at__gte=start, preempted_at__lt=end)
    if teams is not None:
        found = found.filter(Q(job__team__in=teams) | Q(by_team__in=teams))
    return found.select_related("job__team", "job__flavor", "job__submitter", "by_team", "by_job__submitter")


def _user(user) -> str:
    return user.get_username() if user is not None else DELETED_USER


def by_line(start: datetime, end: datetime, *, teams=None, tz=None) -> dict[tuple[date, str, str, str], list]:
    """(day, team, flavor, user) -> [lost, charged] GPU-hours: lost on the victim's line (its
    team, flavor and submitter), charged on the preemptor's (its team and submitter, the
    victim's flavor: the hours lost were of that flavor). Only the lines of ``teams``."""
    tz = tz or timezone.get_default_timezone()
    seen = None if teams is None else set(teams.values_list("pk", flat=True))
    lines: dict = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for p in _in_window(start, end, teams):
        day, flavor = timezone.localtime(p.preempted_at, tz).date(), p.job.flavor.name
        if seen is None or p.job.team_id in seen:
            lines[(day, p.job.team.slug, flavor, _user(p.job.submitter))][0] += p.lost_gpu_hours
        if p.by_team_id is not None and (seen is None or p.by_team_id in seen):
            submitter = p.by_job.submitter if p.by_job_id else None
            lines[(day, p.by_team.slug, flavor, _user(submitter))][1] += p.lost_gpu_hours
    return dict(lines)


def totals(start: datetime, end: datetime, *, teams=None) -> list[PreemptionTotal]:
    """Per team of ``teams`` (every team: None) with a preemption in [start, end): GPU-hours
    lost and charged, and how many times its jobs were preempted and preempted others;
    most lost or charged first."""
    seen = None if teams is None else set(teams.values_list("pk", flat=True))
    sums: dict = defaultdict(lambda: [Decimal(0), Decimal(0), 0, 0])
    for p in _in_window(start, end, teams):
        if seen is None or p.job.team_id in seen:
            line = sums[p.job.team.slug]
            line[0] += p.lost_gpu_hours
            line[2] += 1
        if p.by_team_id is not None and (seen is None or p.by_team_id in seen):
            line = sums[p.by_team.slug]
            line[1] += p.lost_gpu_hours
            line[3] += 1
    found = [PreemptionTotal(team, *values) for team, values in sums.items()]
    return sorted(found, key=lambda t: (-(t.lost_gpu_hours + t.charged_gpu_hours), t.team))
