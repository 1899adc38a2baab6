"""The usage page's daily chart as SVG geometry: pure, numbers in, coordinates out.

``draw(chart)`` takes what ``console.accounting.usage_summary`` returns as ``chart`` (a
column a day with the teams' GPU-hours) and lays it out at its own size, one SVG unit a
pixel, so nothing is stretched and the text keeps its size: a y axis in GPU-hours with
round ticks, a date under every column, each day's total written above its column (no
hover needed) and the tallest day named. The template only places what is here.

The axis and number formatting are ``core.charts``', shared with the job page's GPU chart.
"""

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.conf import settings

from core.charts import CENT, axis, num, y_ticks

__all__ = ["axis", "draw", "gpu_hours", "money"]

UNIT, UNITS = "GPU-hour", "GPU-hours"

# Layout in SVG units (pixels at 1:1).
COLUMN = 22  # a day's slot
BAR = 14  # a day's bar inside it
LEFT = 60  # tick labels and the unit title
RIGHT = 10
TOP = 56  # room for the totals written upward above the tallest bar
PLOT = 160  # the plot's height
BOTTOM = 40  # day numbers and the month under them


def gpu_hours(value) -> str:
    """"0.04 GPU-hours", "1 GPU-hour", "2.50 GPU-hours": the unit agrees with the number."""
    value = Decimal(str(value))
    return f"1 {UNIT}" if value == 1 else f"{value} {UNITS}"


def money(value) -> str:
    """A cost with the unit flavor prices are in (``COST_CURRENCY``): "12.40 EUR"."""
    return f"{Decimal(str(value)).quantize(CENT)} {settings.COST_CURRENCY}"


@dataclass
class Bar:
    team: str
    colour: int
    hours: Decimal
    y: str
    h: str

    @property
    def label(self) -> str:
        return str(self.hours)


@dataclass
class Column:
    day: date
    x: str  # the slot's left edge
    bar_x: str
    centre: str
    total: Decimal
    label_y: str  # where the total is written (upward from there)
    bars: list = field(default_factory=list)

    @property
    def number(self) -> int:
        return self.day.day

    @property
    def iso(self) -> str:
        return self.day.isoformat()

    @property
    def label(self) -> str:
        return str(self.total)


@dataclass
class Drawing:
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    baseline: int
    columns: list
    y_ticks: list  # (y, label)
    teams: list  # {"name", "colour"}
    peak: Decimal
    peak_day: date | None
    month_label: str
    unit_x: int
    unit_y: int
    caption_y: int
    bar_width: int = BAR

    @property
    def is_empty(self) -> bool:
        return self.peak_day is None

    @property
    def summary(self) -> str:
        """What the chart says, in words (the image's accessible name and the caption)."""
        if self.is_empty:
            return f"No GPU time in {self.month_label}."
        return f"Tallest day: {gpu_hours(self.peak)} on {self.peak_day.isoformat()}."


def draw(chart: dict) -> Drawing:
    """Lay out ``chart`` (columns of ``day`` with ``bars`` of ``team``, ``colour`` and
    ``hours``; ``teams`` in stacking order)."""
    days = [column["day"] for column in chart["columns"]]
    values = [[(bar["team"], bar["colour"], Decimal(str(bar["hours"]))) for bar in column["bars"]]
              for column in chart["columns"]]
    totals = [sum((hours for _, _, hours in bars), Decimal(0)) for bars in values]
    peak = max(totals, default=Decimal(0))
    step, top = axis(peak)
    baseline = TOP + PLOT
    scale = PLOT / float(top)
    columns = []
    for index, (day, bars, total) in enumerate(zip(days, values, totals, strict=True)):
        x = LEFT + index * COLUMN
        column = Column(day=day, x=str(x), bar_x=num(x + (COLUMN - BAR) / 2), centre=num(x + COLUMN / 2),
                        total=total, label_y=num(baseline - float(total) * scale - 4))
        y = float(baseline)
        for team, colour, hours in bars:
            h = float(hours) * scale
            y -= h
            column.bars.append(Bar(team, colour, hours, y=f"{y:.2f}", h=f"{h:.2f}"))
        columns.append(column)
    plot_right = LEFT + max(1, len(days)) * COLUMN
    peak_day = days[totals.index(peak)] if peak > 0 else None
    month_label = f"{days[0]:%B %Y}" if days else ""
    return Drawing(
        width=plot_right + RIGHT, height=baseline + BOTTOM, plot_left=LEFT, plot_right=plot_right, plot_top=TOP,
        baseline=baseline, columns=columns, y_ticks=y_ticks(step, top, baseline, scale), teams=chart.get("teams", []), peak=peak,
        peak_day=peak_day, month_label=month_label, unit_x=14, unit_y=TOP + PLOT // 2,
        caption_y=baseline + BOTTOM - 6,
    )
