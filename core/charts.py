"""SVG chart geometry, pure: numbers in, coordinates out, one SVG unit a pixel.

Shared by the usage page's daily columns (``console.usage_chart``) and a job's GPU
utilization and memory over time (``lines``, drawn by ``templates/partials/line_chart.html``):
the same round y axis (``axis``), the same number formatting, the same series colours
(``series-0`` to ``series-5`` in app.css). Coordinates and labels come as text with a decimal
point: SVG wants one whatever the page's language, and the template would localize floats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, Decimal

CENT = Decimal("0.01")
STEPS = (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5), Decimal(10))
TICKS = 4  # at most this many steps above zero on the y axis
SERIES_COLOURS = 6


def num(value: float) -> str:
    """A coordinate as SVG text: at most two decimals, none trailing."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def places(step: Decimal) -> int:
    return max(0, -step.normalize().as_tuple().exponent)


def axis(peak: Decimal) -> tuple[Decimal, Decimal]:
    """The y axis' step and top for a tallest value of ``peak``: a round step (1, 2, 2.5 or 5
    times a power of ten, never below 0.01) with at most ``TICKS`` steps up to a top at or
    above the peak. Nothing to show gets 0 to 1."""
    if peak <= 0:
        return Decimal("0.25"), Decimal(1)
    raw = peak / TICKS
    magnitude = Decimal(1).scaleb(raw.adjusted())
    step = next(m * magnitude for m in STEPS if m * magnitude >= raw)
    step = max(step, CENT)
    top = (peak / step).to_integral_value(rounding=ROUND_CEILING) * step
    return step, top


def y_ticks(step: Decimal, top: Decimal, baseline: float, scale: float) -> list[tuple[str, str]]:
    """(y, label) of each tick from 0 to ``top``."""
    ticks, tick, digits = [], Decimal(0), places(step)
    while tick <= top:
        ticks.append((num(baseline - float(tick) * scale), f"{tick:.{digits}f}"))
        tick += step
    return ticks


# --- lines over time ------------------------------------------------------------------------
WIDTH, HEIGHT = 560, 200  # the whole drawing
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 40
TIME_STEPS = tuple(timedelta(seconds=s) for s in (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
                                                   21600, 43200, 86400))
TIME_TICKS = 6  # at most this many labels under the x axis


@dataclass
class Line:
    name: str
    colour: int
    points: str  # "x,y x,y ..." for a polyline
    last: str  # the latest value, as written in the legend

    @property
    def css(self) -> str:
        return f"series-{self.colour}"


@dataclass
class LineDrawing:
    """A chart of lines over time: axes, ticks, one polyline per series, a legend."""

    title: str
    unit: str  # the y axis' title, e.g. "%" or "GiB"
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    baseline: int
    y_ticks: list
    x_ticks: list  # (x, label)
    lines: list = field(default_factory=list)
    x_title: str = ""

    @property
    def unit_x(self) -> int:
        return 14

    @property
    def unit_y(self) -> int:
        return (self.plot_top + self.baseline) // 2

    @property
    def x_title_y(self) -> int:
        return self.height - 6

    @property
    def is_empty(self) -> bool:
        return not self.lines


def _time_step(span: timedelta) -> timedelta:
    return next((s for s in TIME_STEPS if span / s <= TIME_TICKS), TIME_STEPS[-1])


def _time_label(moment: datetime, step: timedelta) -> str:
    if step >= timedelta(days=1):
        return f"{moment:%b %d}"
    return f"{moment:%H:%M}" if step >= timedelta(minutes=1) else f"{moment:%H:%M:%S}"


def lines(title: str, unit: str, series: list[dict], start: datetime, end: datetime, *,
          top: float | None = None, tz=None, value_format: str = "{:.0f}") -> LineDrawing:
    """Lay out ``series`` ({"name", "points": [(aware datetime, value)]}, colours in order)
    over [start, end] (aware datetimes). The y axis runs to ``top`` when given (100 for a
    percent), else to a round step above the largest value; the x axis has round times
    (in ``tz``) as labels."""
    span = max(end - start, timedelta(seconds=1))
    peak = max((v for s in series for _, v in s["points"]), default=0.0)
    if top is None:
        step, top_value = axis(Decimal(str(round(peak, 2))))
    else:
        top_value = Decimal(str(top))
        step = axis(top_value)[0]
    baseline = HEIGHT - BOTTOM
    plot_right = WIDTH - RIGHT
    plot_width = plot_right - LEFT
    scale = (baseline - TOP) / float(top_value)

    def x_of(moment: datetime) -> float:
        return LEFT + plot_width * min(1.0, max(0.0, (moment - start) / span))

    drawn = []
    for index, one in enumerate(series):
        points = sorted(one["points"])
        if not points:
            continue
        xy = " ".join(f"{num(x_of(t))},{num(baseline - min(float(top_value), max(0.0, v)) * scale)}"
                      for t, v in points)
        drawn.append(Line(one["name"], index % SERIES_COLOURS, xy, value_format.format(points[-1][1])))
    step_t = _time_step(span)
    local_start = start.astimezone(tz) if tz else start
    first = local_start.replace(microsecond=0)
    seconds = step_t.total_seconds()
    offset = (first.timestamp() // seconds + 1) * seconds - first.timestamp()
    tick, x_ticks = first + timedelta(seconds=offset), []
    while tick <= (end.astimezone(tz) if tz else end):
        x_ticks.append((num(x_of(tick)), _time_label(tick, step_t)))
        tick += step_t
    return LineDrawing(title=title, unit=unit, width=WIDTH, height=HEIGHT, plot_left=LEFT, plot_right=plot_right,
                       plot_top=TOP, baseline=baseline, y_ticks=y_ticks(step, top_value, baseline, scale),
                       x_ticks=x_ticks, lines=drawn, x_title=f"Time ({local_start:%Z})" if tz else "Time")
