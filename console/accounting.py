"""GPU-hour accounting from job lifecycle events.

A job holds GPUs from the moment it is admitted until it is preempted, requeued or ends;
only that time counts. ``admitted_intervals`` walks a job's events; ``usage_rows`` cuts the
intervals at the report window and at midnight in the platform's time zone, and multiplies
by the job's GPUs (replicas times GPUs per worker; an inference service counts its maximum
replicas, as the quota does). Cost comes from the flavor's optional price per GPU-hour.
"""

import csv
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from jobs.lifecycle import HOLDING_QUOTA, State
from jobs.models import Job, JobEvent

CSV_HEADER = ["date", "team", "flavor", "user", "gpu_hours", "cost"]
# Months a report can cover: no job ran before 1970, and past 2999 date arithmetic (the
# next month of 9999-12) overflows.
FIRST_YEAR, LAST_YEAR = 1970, 2999
MONTH = re.compile(r"(\d{4})-(\d{2})")


@dataclass(frozen=True)
class UsageRow:
    day: date
    team: str
    flavor: str
    user: str
    gpu_hours: Decimal
    cost: Decimal | None


def admitted_intervals(events, until: datetime) -> list[tuple[datetime, datetime]]:
    """``events``: (time, to_state) in order. Intervals during which the job held GPUs; one
    still open is closed at ``until``."""
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


def split_by_day(start: datetime, end: datetime, tz) -> list[tuple[date, float]]:
    """Seconds of [start, end) on each calendar day in ``tz``."""
    pieces = []
    cursor = start
    while cursor < end:
        local = timezone.localtime(cursor, tz)
        midnight = timezone.make_aware(datetime.combine(local.date() + timedelta(days=1), time.min), tz)
        stop = min(end, midnight)
        pieces.append((local.date(), (stop - cursor).total_seconds()))
        cursor = stop
    return pieces


def month_window(month: str, tz=None) -> tuple[datetime, datetime]:
    """``YYYY-MM`` -> the month's first instant and the next month's, in ``tz``. Anything
    else, or a year outside FIRST_YEAR..LAST_YEAR, is a ``ValueError`` saying so."""
    tz = tz or timezone.get_default_timezone()
    match = MONTH.fullmatch(month)
    if not match or not FIRST_YEAR <= int(match[1]) <= LAST_YEAR or not 1 <= int(match[2]) <= 12:
        raise ValueError(f"{month!r} is not a month like 2026-11 (years {FIRST_YEAR} to {LAST_YEAR}).")
    first = date(int(match[1]), int(match[2]), 1)
    following = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
    return (timezone.make_aware(datetime.combine(first, time.min), tz),
            timezone.make_aware(datetime.combine(following, time.min), tz))


def usage_rows(start: datetime, end: datetime, *, teams=None, now=None, tz=None) -> list[UsageRow]:
    """GPU-hours per day, team, flavor and user in [start, end), in three queries.
    Open intervals count until ``now`` (never into the future)."""
    tz = tz or timezone.get_default_timezone()
    until = min(end, now or timezone.now())
    jobs = Job.objects.filter(admitted_at__isnull=False, admitted_at__lt=end).filter(
        Q(finished_at__isnull=True) | Q(finished_at__gt=start)
    )
    if teams is not None:
        jobs = jobs.filter(team__in=teams)
    jobs = {job.pk: job for job in jobs.select_related("team", "flavor", "submitter")}
    events = defaultdict(list)
    for job_id, at, state in (JobEvent.objects.filter(job_id__in=list(jobs)).order_by("created_at", "id")
                              .values_list("job_id", "created_at", "to_state")):
        events[job_id].append((at, state))
    seconds: dict[tuple, float] = defaultdict(float)
    for job_id, job in jobs.items():
        for lo, hi in admitted_intervals(events[job_id], until):
            lo, hi = max(lo, start), min(hi, until)
            if lo >= hi:
                continue
            user = job.submitter.get_username() if job.submitter_id else "(deleted user)"
            for day, secs in split_by_day(lo, hi, tz):
                seconds[(day, job.team.slug, job.flavor.name, user, job.flavor_id)] += secs * job.total_gpus
    prices = {job.flavor_id: job.flavor.cost_per_gpu_hour for job in jobs.values()}
    rows = []
    for (day, team, flavor, user, flavor_id), gpu_seconds in sorted(seconds.items()):
        hours = (Decimal(gpu_seconds) / 3600).quantize(Decimal("0.01"))
        if not hours:  # less than a GPU-minute or so: not worth a line
            continue
        price = prices[flavor_id]
        rows.append(UsageRow(day, team, flavor, user, hours, None if price is None else (hours * price).quantize(Decimal("0.01"))))
    return rows


def totals(rows, key: str) -> list[tuple[str, Decimal, Decimal | None]]:
    """Sum GPU-hours and cost by one of ``day``, ``team``, ``flavor``, ``user``, largest first."""
    hours: dict = defaultdict(Decimal)
    cost: dict = defaultdict(Decimal)
    priced: dict = defaultdict(bool)
    for row in rows:
        k = getattr(row, key)
        hours[k] += row.gpu_hours
        if row.cost is not None:
            cost[k] += row.cost
            priced[k] = True
    order = sorted(hours, key=(lambda k: k) if key == "day" else (lambda k: (-hours[k], str(k))))
    return [(k, hours[k], cost[k] if priced[k] else None) for k in order]


def write_csv(rows, out) -> None:
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for row in rows:
        writer.writerow([row.day.isoformat(), row.team, row.flavor, row.user, f"{row.gpu_hours:.2f}",
                         "" if row.cost is None else f"{row.cost:.2f}"])


def daily_chart(rows, start: date, end: date, height: int = 120) -> dict:
    """Stacked columns per day and team for the server-rendered SVG chart."""
    teams = sorted({row.team for row in rows})
    by_day: dict = defaultdict(lambda: defaultdict(Decimal))
    for row in rows:
        by_day[row.day][row.team] += row.gpu_hours
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    peak = max([sum(by_day[d].values()) for d in days] + [Decimal(1)])
    columns = []
    for index, day in enumerate(days):
        y, bars = height, []
        for team_index, team in enumerate(teams):
            value = by_day[day].get(team, Decimal(0))
            h = float(value / peak) * height
            y -= h
            if value:
                bars.append({"team": team, "colour": team_index % 6, "y": round(y, 2), "h": round(h, 2), "hours": value})
        columns.append({"day": day, "x": index * 10, "bars": bars, "total": sum(by_day[day].values(), Decimal(0))})
    return {"columns": columns, "width": max(10, len(days) * 10), "height": height, "peak": peak,
            "teams": [{"name": t, "colour": i % 6} for i, t in enumerate(teams)]}

