"""GPU-hour accounting from the intervals jobs held their GPUs (``jobs.GpuInterval``).

A job holds GPUs from the moment it is admitted until it is preempted, requeued or ends,
and it holds what its pods were given on nodes: each interval carries that count, and a
new one begins when the count changes (the HPA adds a replica, a worker ends). ``Job``
writes them as it happens (``jobs.models.intervals``), and its open one is what the dashboard and
the console call in use (``Job.gpus_in_use``, ``jobs.use.usage``): one rule for both. An
inference server of 1-3 replicas running one is charged one replica's GPUs, never its
maximum. ``usage_rows`` cuts the intervals at the report window and at midnight in the
platform's time zone and multiplies by their GPUs: one
aggregate a month, whatever the number of jobs, the same on SQLite and PostgreSQL (plus the
names of the teams, flavors and users it found). Cost comes from the flavor's optional price per
GPU-hour. Each line (day, team, flavor, user) is rounded to 0.01 GPU-hour, half to even;
the page's sums are sums of those lines, so they are the CSV's sums.

Beside the allocated GPU-hours, each line has the measured, used and idle GPU-hours the
sampler recorded (``jobs.GpuUse``, defined in ``jobs.use.gpu_use``): one more aggregate, over the
days of the platform's time zone (``TIME_ZONE``), rounded the same way.
"""

import csv
import re
from collections import defaultdict
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from operator import add

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import DateTimeField, Expression, FloatField, Q, Sum
from django.utils import timezone

from jobs.models import GpuInterval, GpuUse
from quotas.models import GpuFlavor
from tenants.models import Team

from . import preemptions

# gpu_hours is allocated GPU time; the last three are what was measured of it (jobs.use.gpu_use).
# The last two: GPU-hours preemptions cost this line's jobs, and those its jobs cost others
# and its team is charged for (console.preemptions, docs/preemption.md).
CSV_HEADER = ["date", "team", "flavor", "user", "gpu_hours", "cost", "used_gpu_hours", "idle_gpu_hours",
              "measured_gpu_hours", "lost_to_preemption_gpu_hours", "charged_for_preemption_gpu_hours"]
USE = ("measured", "used", "idle")
# Months a report can cover: no job ran before 1970, and past 2999 date arithmetic (the
# next month of 9999-12) overflows.
FIRST_YEAR, LAST_YEAR = 1970, 2999
MONTH = re.compile(r"(\d{4})-(\d{2})")
DELETED_USER = "(deleted user)"
US_PER_CENTI_HOUR = 36_000_000  # 0.01 GPU-hour in GPU-microseconds


@dataclass(frozen=True)
class UsageRow:
    day: date
    team: str
    flavor: str
    user: str
    gpu_hours: Decimal
    cost: Decimal | None
    used_gpu_hours: Decimal = Decimal(0)
    idle_gpu_hours: Decimal = Decimal(0)
    measured_gpu_hours: Decimal = Decimal(0)
    lost_to_preemption_gpu_hours: Decimal = Decimal(0)
    charged_for_preemption_gpu_hours: Decimal = Decimal(0)


def split_by_day(start: datetime, end: datetime, tz) -> list[tuple[date, float]]:
    """Seconds of [start, end) on each calendar day in ``tz``."""
    pieces = []
    cursor = start
    while cursor < end:
        local = timezone.localtime(cursor, tz)
        midnight = timezone.make_aware(datetime.combine(local.date() + timedelta(days=1), time.min), tz)
        stop = min(end, midnight)
        # In UTC: between two times of one zone Python subtracts wall clocks, and a day that
        # leaves summer time would count 24 hours instead of 25.
        seconds = (stop.astimezone(UTC) - cursor.astimezone(UTC)).total_seconds()
        pieces.append((local.date(), seconds))
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


def _half_even(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded to an integer, half to even (as Decimal.quantize)."""
    q, r = divmod(numerator, denominator)
    return q + 1 if 2 * r > denominator or (2 * r == denominator and q % 2) else q


def _dec(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


class HeldOnDay(Expression):
    """One day's column of the report's aggregate: the sum, over the group's intervals that
    overlap [lo, hi), of GPUs x microseconds of overlap (the earlier of the interval's end,
    ``until`` if it is open, and ``hi``, minus the later of its start and ``lo``).

    Written as one flat expression over the three columns rather than a tree of ``Least``,
    ``Greatest`` and ``Q`` lookups: a month is 31 of them, and resolving and compiling the tree
    cost more Python than PostgreSQL spends on the aggregate's first 20,000 intervals. The
    result stays what the database returns (a float holding a whole number of microseconds on
    PostgreSQL, exact below 2**53, some 285 years; an integer on SQLite); ``_cents`` converts."""

    contains_aggregate = True
    output_field = FloatField()

    def __init__(self, columns, lo: datetime, hi: datetime, until: datetime):
        super().__init__()
        self.columns, self.lo, self.hi, self.until = columns, lo, hi, until

    def get_source_expressions(self):
        return list(self.columns)

    def set_source_expressions(self, exprs):
        self.columns = tuple(exprs)

    def get_group_by_cols(self):  # an aggregate: its columns are summed, not grouped by
        return []

    def as_sql(self, compiler, connection, **extra):
        gpus, started, ended = (compiler.compile(column)[0] for column in self.columns)
        lo, hi, until = (DateTimeField().get_db_prep_value(value, connection) for value in (self.lo, self.hi, self.until))
        sqlite = connection.vendor == "sqlite"
        least, greatest = ("MIN", "MAX") if sqlite else ("LEAST", "GREATEST")
        span, params = connection.ops.subtract_temporals(
            "DateTimeField", (f"{least}(COALESCE({ended}, %s), %s)", [until, hi]), (f"{greatest}({started}, %s)", [lo]))
        if not sqlite:  # an interval there; microseconds already on SQLite
            span = f"round(date_part('epoch', {span}) * 1000000)"
        overlap = f"{started} < %s AND ({ended} IS NULL OR {ended} > %s)"
        return f"SUM({gpus} * {span}) FILTER (WHERE {overlap})", (*params, hi, lo)

    @property
    def convert_value(self):  # whole microseconds, converted once (``_cents``)
        return self._convert_value_noop


def _days(start: datetime, until: datetime, tz) -> list[tuple[date, datetime, datetime]]:
    """(local day, first instant, end) of each day of [start, until) in ``tz``."""
    days, day = [], timezone.localtime(start, tz).date()
    while True:
        lo = max(start, timezone.make_aware(datetime.combine(day, time.min), tz))
        if lo >= until:
            return days
        following = day + timedelta(days=1)
        days.append((day, lo, min(until, timezone.make_aware(datetime.combine(following, time.min), tz))))
        day = following


DAYS_A_QUERY = 31  # a month's days in one query; a longer window takes a query per 31 days


def _cents(microseconds: list) -> list:
    """GPU-microseconds -> hundredths of a GPU-hour, half to even (None stays None): half up,
    then one down where that made a tie odd."""
    cents = []
    for raw in microseconds:
        if raw is None:
            cents.append(None)
        else:
            q, r = divmod(int(raw) + US_PER_CENTI_HOUR // 2, US_PER_CENTI_HOUR)
            cents.append(q - (q & 1) if not r else q)
    return cents


@contextmanager
def _report_query():
    """Where the report's aggregate runs: on PostgreSQL without JIT, which its cost estimate
    can switch on and whose compiling takes seconds (measured: 1.6 s of 1.7) to save
    milliseconds. Elsewhere nothing to do."""
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        yield


def _cells(start: datetime, end: datetime, teams, now, tz):
    """Hundredths of a GPU-hour per day, team, flavor and user in [start, end), each rounded
    half to even: [(team, flavor, user, flavor id, price, days, [cents or None a day])], one
    per team, flavor and user. Open intervals count until ``now`` (never into the future).

    One aggregate over the intervals for a month (a query per 31 days), grouped by team,
    flavor and submitter, with a column a day (``HeldOnDay``); then the names of the teams,
    flavors and users found (three small queries: joined into the aggregate, they made
    PostgreSQL hash strings and cost half as much again)."""
    until = min(end, now or timezone.now())
    days = _days(start, until, tz) if until > start else []
    User = get_user_model()
    found = []
    for chunk_start in range(0, len(days), DAYS_A_QUERY):
        chunk = days[chunk_start:chunk_start + DAYS_A_QUERY]
        first, last = chunk[0][1], chunk[-1][2]
        intervals = GpuInterval.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=first), started_at__lt=last)
        if teams is not None:
            intervals = intervals.filter(team__in=teams)
        columns = tuple(intervals.query.resolve_ref(name) for name in ("gpus", "started_at", "ended_at"))
        rows = intervals.order_by().values_list("team_id", "flavor_id", "submitter_id").annotate(
            **{f"d{index}": HeldOnDay(columns, lo, hi, until) for index, (_day, lo, hi) in enumerate(chunk)})
        chunk_days = [day for day, _, _ in chunk]
        with _report_query():
            found.extend((team_id, flavor_id, user_id, chunk_days, _cents(held_us))
                         for team_id, flavor_id, user_id, *held_us in rows)
    use = _use(start, until, teams, tz) if days else {}
    seen = {row[:3] for row in found}
    found.extend((*key, [], []) for key in use if key not in seen)  # measured, yet under a GPU-minute held
    if not found:
        return []
    slugs = dict((Team.objects.all() if teams is None else teams).values_list("pk", "slug"))
    flavors = {pk: (name, price) for pk, name, price in
               GpuFlavor.objects.filter(pk__in={row[1] for row in found}).values_list("pk", "name", "cost_per_gpu_hour")}
    users = dict(User.objects.filter(pk__in={row[2] for row in found if row[2] is not None})
                 .values_list("pk", User.USERNAME_FIELD))
    # A longer window has a row per key and 31 days: the key's GPU use goes with its first.
    return [(slugs[team_id], flavors[flavor_id][0], users.get(user_id, DELETED_USER), flavor_id, flavors[flavor_id][1],
             chunk_days, cents, use.pop((team_id, flavor_id, user_id), {}))
            for team_id, flavor_id, user_id, chunk_days, cents in found]


def _use(start: datetime, until: datetime, teams, tz) -> dict:
    """(team id, flavor id, user id) -> {day: (measured, used, idle) in hundredths of a
    GPU-hour, each half to even}, for the days of [start, until): one aggregate of ``GpuUse``."""
    first = timezone.localtime(start, tz).date()
    last = timezone.localtime(until - timedelta(microseconds=1), tz).date()
    rows = GpuUse.objects.filter(day__gte=first, day__lte=last)
    if teams is not None:
        rows = rows.filter(team__in=teams)
    found: dict = defaultdict(dict)
    for team_id, flavor_id, user_id, day, *seconds in (
            rows.order_by().values_list("team_id", "flavor_id", "submitter_id", "day")
            .annotate(*(Sum(f"{name}_gpu_seconds") for name in USE))):
        found[(team_id, flavor_id, user_id)][day] = tuple(_cents([round(s * 1_000_000) for s in seconds]))
    return found


def _lines(start, end, teams, now, tz):
    """(day, team, flavor, user, hundredths of a GPU-hour, cost in cents or None) per line of
    the report, in order; lines under 0.005 GPU-hour left out."""
    tz = tz or timezone.get_default_timezone()
    lines = []
    for team, flavor, user, flavor_id, price, days, cents, use in _cells(start, end, teams, now, tz):
        price_cents = None if price is None else int(price * 100)
        held = dict(zip(days, cents, strict=True))
        for day in sorted(set(held) | set(use)):
            c, measured = held.get(day) or 0, use.get(day, (0, 0, 0))
            if c or any(measured):  # less than a GPU-minute or so: not worth a line
                cost = None if price_cents is None else _half_even(c * price_cents, 100)
                lines.append((day, team, flavor, user, flavor_id, c, cost, measured))
    lines.sort(key=lambda line: line[:5])
    return [(day, team, flavor, user, c, cost, measured) for day, team, flavor, user, _, c, cost, measured in lines]


def usage_rows(start: datetime, end: datetime, *, teams=None, now=None, tz=None) -> list[UsageRow]:
    """GPU-hours per day, team, flavor and user in [start, end), in a constant number of
    queries. Open intervals count until ``now`` (never into the future). A line may hold only
    GPU-hours lost to or charged for preemptions."""
    lost = preemptions.by_line(start, end, teams=teams, tz=tz)
    rows = [UsageRow(day, team, flavor, user, _dec(cents), None if cost is None else _dec(cost),
                     used_gpu_hours=_dec(used), idle_gpu_hours=_dec(idle), measured_gpu_hours=_dec(measured),
                     **_preempted(lost.pop((day, team, flavor, user), None)))
            for day, team, flavor, user, cents, cost, (measured, used, idle) in _lines(start, end, teams, now, tz)]
    rows += [UsageRow(*key, Decimal(0), None, **_preempted(values)) for key, values in lost.items() if any(values)]
    return sorted(rows, key=lambda row: (row.day, row.team, row.flavor, row.user))


def _preempted(values) -> dict:
    lost, charged = values or (Decimal(0), Decimal(0))
    return {"lost_to_preemption_gpu_hours": lost, "charged_for_preemption_gpu_hours": charged}


CHART_SERIES = 6  # colours of the chart: with more teams, the five largest and "other teams"
OTHER_TEAMS = "other teams"


@dataclass(frozen=True)
class Total:
    """One line of a totals table: allocated GPU-hours and cost, and what was measured of them."""

    name: str
    gpu_hours: Decimal
    cost: Decimal | None
    used_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    measured_gpu_hours: Decimal


@dataclass
class Summary:
    """What the usage page shows: totals by team, flavor and user (name, GPU-hours, cost;
    ``tables`` adds used, idle and measured GPU-hours), and the daily chart."""

    total: Decimal
    total_cost: Decimal
    by_team: list
    by_flavor: list
    by_user: list
    chart: dict
    tables: dict = field(default_factory=dict)  # "team", "flavor", "user" -> [Total]
    total_use: dict = field(default_factory=dict)  # "measured", "used", "idle" -> GPU-hours

    @property
    def used(self) -> Decimal:
        return self.total_use.get("used", Decimal(0))

    @property
    def idle(self) -> Decimal:
        return self.total_use.get("idle", Decimal(0))

    @property
    def measured(self) -> Decimal:
        return self.total_use.get("measured", Decimal(0))


def usage_summary(start: datetime, end: datetime, *, teams=None, now=None, tz=None) -> Summary:
    """The page's sums of ``usage_rows`` (the same query): totals by team, flavor and user, and
    the daily chart (five teams apart and the others stacked as one when there are more than
    six)."""
    tz = tz or timezone.get_default_timezone()
    first, last = timezone.localtime(start, tz).date(), timezone.localtime(end, tz).date()
    sums = _Sums()
    for team, flavor, user, _flavor_id, price, days, cents, measured in _cells(start, end, teams, now, tz):
        sums.add({"team": team, "flavor": flavor, "user": user}, price, days, cents, measured)
    by_team, by_flavor, by_user = (sums.ordered(kind) for kind in _BY)
    kept = [team for team, _, _ in (by_team if len(by_team) <= CHART_SERIES else by_team[:CHART_SERIES - 1])]
    series = sorted(kept) + ([OTHER_TEAMS] if len(kept) < len(by_team) else [])
    tables = {kind: sums.table(kind, rows) for kind, rows in zip(_BY, (by_team, by_flavor, by_user), strict=True)}
    return Summary(_dec(sum(sums.hours["team"].values())) if sums.any_line else Decimal(0),
                   _dec(sum(sums.cost["team"].values())) if sums.any_cost else Decimal(0),
                   by_team, by_flavor, by_user, chart(sums.by_day(kept), series, first, last), tables,
                   sums.total_use())


_BY = ("team", "flavor", "user")


class _Sums:
    """usage_summary's running sums, in hundredths of a GPU-hour (and of the currency): every
    line's figures rounded once, then added, so the totals are the sums of the shown lines."""

    def __init__(self):
        self.hours = {kind: defaultdict(int) for kind in _BY}
        self.cost = {kind: defaultdict(int) for kind in _BY}
        self.use = {kind: defaultdict(lambda: [0, 0, 0]) for kind in _BY}  # in the order of USE
        self.team_days: dict = {}  # (team, the days of a query) -> (days, cents a day)
        self.any_line = self.any_cost = False

    def add(self, names: dict, price, days, cents, measured) -> None:
        """One line of the report: `names` by kind, its price per GPU-hour, cents a day."""
        line_use = list(map(sum, zip(*measured.values(), strict=True))) if measured else [0, 0, 0]
        for kind, name in names.items():
            self.use[kind][name] = list(map(add, self.use[kind][name], line_use))
        cents = [c or 0 for c in cents]
        line_hours = sum(cents)
        if not line_hours:
            return
        self.any_line = True
        key = (names["team"], id(days))
        self.team_days[key] = (days, list(map(add, self.team_days[key][1], cents)) if key in self.team_days else cents)
        for kind, name in names.items():
            self.hours[kind][name] += line_hours
        if price is not None:
            price_cents = int(price * 100)
            line_cost = sum(_half_even(c * price_cents, 100) for c in cents if c)
            self.any_cost = True
            for kind, name in names.items():
                self.cost[kind][name] += line_cost

    def ordered(self, kind: str) -> list[tuple]:
        """(name, GPU-hours, cost or None) by `kind`, largest first."""
        h, c = self.hours[kind], self.cost[kind]
        return [(k, _dec(h[k]), _dec(c[k]) if k in c else None) for k in sorted(h, key=lambda k: (-h[k], str(k)))]

    def table(self, kind: str, rows: list[tuple]) -> list[Total]:
        """The ordered rows, then those that only measured use (no allocated hours), by name."""
        hours, cost, use = self.hours[kind], self.cost[kind], self.use[kind]
        listed = [name for name, _, _ in rows] + sorted((n for n in use if n not in hours and any(use[n])), key=str)
        return [Total(name, _dec(hours.get(name, 0)), _dec(cost[name]) if name in cost else None,
                      *(_dec(c) for c in (use[name][1], use[name][2], use[name][0])))
                for name in listed]

    def by_day(self, kept: list) -> dict:
        """GPU-hours a day by team, the teams not `kept` together as OTHER_TEAMS."""
        daily: dict = defaultdict(lambda: defaultdict(int))
        for (team, _), (days, cents) in self.team_days.items():
            name = team if team in kept else OTHER_TEAMS
            for day, c in zip(days, cents, strict=True):
                if c:
                    daily[day][name] += c
        return {day: {name: _dec(c) for name, c in values.items()} for day, values in daily.items()}

    def total_use(self) -> dict:
        return {name: _dec(sum(values[index] for values in self.use["team"].values())) for index, name in enumerate(USE)}


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
                         "" if row.cost is None else f"{row.cost:.2f}", f"{row.used_gpu_hours:.2f}",
                         f"{row.idle_gpu_hours:.2f}", f"{row.measured_gpu_hours:.2f}",
                         f"{row.lost_to_preemption_gpu_hours:.2f}", f"{row.charged_for_preemption_gpu_hours:.2f}"])


def chart(by_day: dict, series: list[str], start: date, end: date, height: int = 120) -> dict:
    """Stacked columns per day, one colour a series (a team, or the other teams together).
    The bars' numbers come as text: SVG wants a decimal point whatever the language, and
    formatting 180 numbers here costs a tenth of what the template's localizing did."""
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    peak = max([sum(by_day.get(d, {}).values()) for d in days] + [Decimal(1)])
    columns = []
    for index, day in enumerate(days):
        values = by_day.get(day, {})
        y, bars = height, []
        for series_index, name in enumerate(series):
            value = values.get(name, Decimal(0))
            h = float(value / peak) * height
            y -= h
            if value:
                bars.append({"team": name, "colour": series_index % 6, "y": str(round(y, 2)), "h": str(round(h, 2)),
                             "hours": str(value)})
        columns.append({"day": day, "label": day.isoformat(), "x": str(index * 10), "bars": bars,
                        "total": sum(values.values(), Decimal(0))})
    return {"columns": columns, "width": max(10, len(days) * 10), "height": height, "peak": peak,
            "teams": [{"name": t, "colour": i % 6} for i, t in enumerate(series)]}


def flavor_totals(start: datetime, end: datetime, *, teams=None, now=None, tz=None) -> list[Total]:
    """Allocated, used, idle and measured GPU-hours per flavor in [start, end), largest
    allocated first: two aggregates (with the flavors' names) whatever the number of teams and jobs (the team page's
    and the console's "allocated vs used"). Each flavor's figures are rounded once, so they
    may differ by a cent from the usage page's sums of rounded lines."""
    tz = tz or timezone.get_default_timezone()
    until = min(end, now or timezone.now())
    if until <= start:
        return []
    intervals = GpuInterval.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start), started_at__lt=until)
    uses = GpuUse.objects.filter(day__gte=timezone.localtime(start, tz).date(),
                                 day__lte=timezone.localtime(until - timedelta(microseconds=1), tz).date())
    if teams is not None:
        intervals, uses = intervals.filter(team__in=teams), uses.filter(team__in=teams)
    columns = tuple(intervals.query.resolve_ref(name) for name in ("gpus", "started_at", "ended_at"))
    held_by_flavor = intervals.order_by().values_list("flavor__name").annotate(held=HeldOnDay(columns, start, until, until))
    # Every team's month: without JIT, as the usage page (a team's few intervals never need it).
    with _report_query() if teams is None else nullcontext():
        held = {name: _cents([us])[0] for name, us in held_by_flavor}
    measured = {name: _cents([round(s * 1_000_000) for s in seconds]) for name, *seconds in
                uses.order_by().values_list("flavor__name").annotate(*(Sum(f"{n}_gpu_seconds") for n in USE))}
    lines = []
    for name in set(held) | set(measured):
        m, u, i = measured.get(name, (0, 0, 0))
        lines.append(Total(name, _dec(held.get(name) or 0), None, _dec(u), _dec(i), _dec(m)))
    return sorted(lines, key=lambda line: (-line.gpu_hours, line.name))
