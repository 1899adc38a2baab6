"""The usage chart reads without hovering: axes in GPU-hours with round ticks, a date under
every day, each day's total written on the chart, the tallest day named in the right unit,
costs in the configured currency, bars drawn to scale. Checked by parsing the page's SVG."""

import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import translation

from console.usage_chart import axis, draw, gpu_hours, money
from jobs.lifecycle import State

from ..builders import make_flavor, make_job

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"


def at(day, hour, minute=0, second=0):
    return datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def held(team, flavor, submitter, start, end, gpus=1):
    """A job admitted from ``start`` to ``end`` on ``gpus`` GPUs."""
    job = make_job(team, flavor, submitter=submitter, gpus_per_worker=gpus)
    for state, when in ((State.SUBMITTED, start - timedelta(minutes=1)), (State.ADMITTED, start), (State.SUCCEEDED, end)):
        assert job.transition(state, reason=state.label, at=when)
    return job


def chart_of(html: str) -> ET.Element:
    svg = re.search(r'<svg class="usage-chart".*?</svg>', html, re.S).group(0)
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def texts(svg, cls):
    return [t for t in svg.iter(f"{SVG}text") if cls in t.get("class", "").split()]


def page(client, **params):
    return client.get(reverse("console:usage"), {"month": "2026-11", **params}).content.decode()


@pytest.fixture
def priced(db):
    return make_flavor("h100", cost_per_gpu_hour=Decimal("3.50"))


@pytest.fixture
def small_month(team, priced, member):
    """2.4 minutes of one GPU on the 5th (0.04 GPU-hours), 1.2 on the 9th (0.02)."""
    held(team, priced, member, at(5, 10), at(5, 10, 2, 24))
    held(team, priced, member, at(9, 10), at(9, 10, 1, 12))


# --- the pure parts --------------------------------------------------------------------------
@pytest.mark.parametrize("case, peak, step, top", [
    ("a tiny month counts in hundredths", "0.04", "0.01", "0.04"),
    ("a step never goes below the accounting's hundredth", "0.01", "0.01", "0.01"),
    ("eight hours go up in twos", "8.00", "2", "8"),
    ("nine hours go up in two and a halves to ten", "9.00", "2.5", "10.0"),
    ("a big month goes up in round hundreds", "730.25", "200", "800"),
    ("an empty month shows zero to one", "0", "0.25", "1"),
])
def test_the_y_axis_has_round_steps_up_to_the_tallest_day(case, peak, step, top):
    assert axis(Decimal(peak)) == (Decimal(step), Decimal(top))


@pytest.mark.parametrize("value, text", [
    ("0.04", "0.04 GPU-hours"), ("1", "1 GPU-hour"), ("1.00", "1 GPU-hour"), ("2.50", "2.50 GPU-hours"), ("0", "0 GPU-hours"),
])
def test_gpu_hours_agree_with_their_number(value, text):
    assert gpu_hours(Decimal(value)) == text


def test_a_cost_carries_the_configured_currency(settings):
    settings.COST_CURRENCY = "credits"
    assert money(Decimal("3.5")) == "3.50 credits"


def test_bars_are_in_proportion_to_their_hours_and_stack_upward():
    day = date(2026, 11, 1)
    chart = {"columns": [
        {"day": day, "bars": [{"team": "a", "colour": 0, "hours": "3.00"}, {"team": "b", "colour": 1, "hours": "1.00"}]},
        {"day": day + timedelta(days=1), "bars": [{"team": "a", "colour": 0, "hours": "2.00"}]},
    ], "teams": [{"name": "a", "colour": 0}, {"name": "b", "colour": 1}]}
    drawing = draw(chart)
    first, second = drawing.columns
    heights = [float(bar.h) for bar in first.bars] + [float(bar.h) for bar in second.bars]
    assert heights[0] / heights[1] == pytest.approx(3) and heights[0] / heights[2] == pytest.approx(1.5)
    # b sits on top of a: its bottom is a's top.
    assert float(first.bars[1].y) + heights[1] == pytest.approx(float(first.bars[0].y))
    assert drawing.summary == "Tallest day: 4.00 GPU-hours on 2026-11-01."
    # The tallest day reaches the axis' top tick (4 = a round top for a peak of 4).
    assert float(first.bars[1].y) == pytest.approx(float(drawing.y_ticks[-1][0]))


# --- the page ---------------------------------------------------------------------------------
def test_the_chart_names_the_tallest_day_in_the_hours_it_has(client_for, quota_manager, small_month):
    html = page(client_for(quota_manager))
    assert "Tallest day: 0.04 GPU-hours on 2026-11-05." in html
    assert "tallest day: 1 GPU-hours" not in html.lower()
    assert "Total: <strong>0.06 GPU-hours</strong>" in html


def test_the_y_axis_ticks_are_in_gpu_hours_and_reach_the_tallest_day(client_for, quota_manager, small_month):
    svg = chart_of(page(client_for(quota_manager)))
    assert [t.text for t in texts(svg, "y-tick")] == ["0.00", "0.01", "0.02", "0.03", "0.04"]
    assert [t.text for t in texts(svg, "axis-title")] == ["GPU-hours", "Day of November 2026"]


def test_every_day_of_the_month_has_its_date_on_the_x_axis(client_for, quota_manager, small_month):
    svg = chart_of(page(client_for(quota_manager)))
    ticks = texts(svg, "x-tick")
    assert [t.text for t in ticks] == [str(d) for d in range(1, 31)]
    assert ticks[0].get("data-day") == "2026-11-01" and ticks[-1].get("data-day") == "2026-11-30"
    xs = [float(t.get("x")) for t in ticks]
    assert xs == sorted(xs) and len(set(round(b - a, 2) for a, b in itertools.pairwise(xs))) == 1  # evenly spaced


def test_bar_heights_follow_the_values_and_each_total_is_written_on_the_chart(client_for, quota_manager, small_month):
    svg = chart_of(page(client_for(quota_manager)))
    days = {g.get("data-day"): g for g in svg.iter(f"{SVG}g") if g.get("class") == "day"}
    fifth, ninth = days["2026-11-05"], days["2026-11-09"]
    (bar5,), (bar9,) = fifth.findall(f"{SVG}rect"), ninth.findall(f"{SVG}rect")
    assert float(bar5.get("height")) == pytest.approx(2 * float(bar9.get("height")))
    # Bars stand on the axis, and the tallest reaches the top tick.
    ticks = {t.text: float(t.get("y")) for t in texts(svg, "y-tick")}
    assert float(bar5.get("y")) + float(bar5.get("height")) == pytest.approx(ticks["0.00"])
    assert float(bar5.get("y")) == pytest.approx(ticks["0.04"])
    assert float(bar9.get("y")) == pytest.approx(ticks["0.02"])
    assert [t.text for t in fifth.iter(f"{SVG}text")] == ["0.04"] and [t.text for t in ninth.iter(f"{SVG}text")] == ["0.02"]
    assert not days["2026-11-06"].findall(f"{SVG}rect") and not list(days["2026-11-06"].iter(f"{SVG}text"))


def test_the_chart_is_drawn_at_its_own_size_not_stretched(client_for, quota_manager, small_month):
    svg = chart_of(page(client_for(quota_manager)))
    assert svg.get("preserveAspectRatio") is None
    assert svg.get("viewBox") == f"0 0 {svg.get('width')} {svg.get('height')}"


def test_costs_carry_the_currency_from_settings(client_for, quota_manager, small_month, settings):
    settings.COST_CURRENCY = "credits"
    html = page(client_for(quota_manager))
    assert "cost 0.21 credits" in html  # 0.06 GPU-hours at 3.50
    assert "Cost (credits)" in html


def test_the_chart_numbers_stay_svg_numbers_under_a_comma_language(client_for, quota_manager, small_month):
    with translation.override("de"):
        svg = chart_of(page(client_for(quota_manager)))
    for element in svg.iter():
        for name in ("x", "y", "width", "height", "x1", "x2", "y1", "y2"):
            if element.get(name) is not None:
                float(element.get(name))  # "105,0" would raise


def test_an_empty_month_says_so_instead_of_a_tallest_day(client_for, quota_manager, db):
    html = page(client_for(quota_manager))
    assert "No GPU time in November 2026." in html and "Tallest day" not in html


@pytest.mark.parametrize("who, sees", [("owner", True), ("member", True), ("viewer", True), ("outsider", False)])
def test_team_people_see_their_teams_bars_and_outsiders_none(request, client_for, small_month, who, sees):
    svg = chart_of(page(client_for(request.getfixturevalue(who))))
    teams = {rect.get("data-team") for rect in svg.iter(f"{SVG}rect")}
    assert teams == ({"vision"} if sees else set())
