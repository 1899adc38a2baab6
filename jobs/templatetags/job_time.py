"""How the job page says a length of time: "45 s", "3 min 12 s", "2 h 05 min", "3 d 4 h"."""

from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def duration(value: timedelta | None) -> str:
    if value is None:
        return ""
    seconds = max(int(value.total_seconds()), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {seconds:02d} s"
    return f"{seconds} s"
