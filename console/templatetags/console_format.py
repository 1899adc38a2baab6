"""How the console's pages write GPU-hours, costs and a grant's dates: one way each.

Dates follow one convention on every page and in the API docs: a period runs from its
first day until its last day, both included ("2026-11-03 until 2026-11-16"), as a request's
``starts_on`` and ``ends_on`` say. A grant's ``ends_at`` is the instant after its last day
(``quotas.grants.window``); ``until`` turns it back into that last day.
"""

from datetime import time

from django import template
from django.utils import timezone

from quotas.grants import last_day

from .. import usage_chart

register = template.Library()


@register.filter
def gpu_hours(value) -> str:
    return usage_chart.gpu_hours(value)


@register.filter
def money(value) -> str:
    return "—" if value is None else usage_chart.money(value)


@register.filter
def day_of(moment) -> str:
    """A grant's start: its first day, with the time when it does not start at midnight."""
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d}" if local.time() == time.min else f"{local:%Y-%m-%d %H:%M}"


@register.filter
def until(ends_at) -> str:
    """A grant's end as its last day ("2026-11-30"); an end during a day (ended early)
    with its time; "no end" for none."""
    if ends_at is None:
        return "no end"
    local = timezone.localtime(ends_at)
    return f"{last_day(ends_at):%Y-%m-%d}" if local.time() == time.min else f"{local:%Y-%m-%d %H:%M}"

