"""GPU-hour accounting pages (everyone, scoped to the teams they see) and quota requests
filed from a team page (owners)."""

import io
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from cluster.names import is_dns1123_label
from quotas.models import QuotaRequest
from tenants.models import Team
from tenants.roles import is_quota_manager

from . import accounting


def _window(request, params):
    """The month asked for (``?month=YYYY-MM``, default this one) and the teams in scope
    (``?team=SLUG``). A month or team that cannot be is a ``ValueError`` saying why; the
    slug ends up in a file name, so only a slug's characters get that far."""
    month = params.get("month") or timezone.localdate().strftime("%Y-%m")
    start, end = accounting.month_window(month)
    teams = Team.objects.visible_to(request.user)
    slug = params.get("team") or ""
    if slug:
        if not is_dns1123_label(slug):
            raise ValueError(f"{slug!r} is not a team's name.")
        teams = teams.filter(slug=slug)
    return month, start, end, teams, slug


@login_required
@require_GET
def usage(request):
    status = 200
    try:
        month, start, end, teams, slug = _window(request, request.GET)
    except ValueError as err:
        messages.error(request, f"{err} Showing this month for all your teams instead.")
        month, start, end, teams, slug = _window(request, QueryDict())
        status = 400
    rows = accounting.usage_rows(start, end, teams=teams)
    last_day = timezone.localtime(end).date()
    context = {
        "month": month, "team_slug": slug, "rows": rows,
        "teams": Team.objects.visible_to(request.user).only("slug", "display_name"),
        "by_team": accounting.totals(rows, "team"), "by_flavor": accounting.totals(rows, "flavor"),
        "by_user": accounting.totals(rows, "user"),
        "total": sum((r.gpu_hours for r in rows), start=Decimal(0)),
        "total_cost": sum((r.cost for r in rows if r.cost is not None), start=Decimal(0)),
        "chart": accounting.daily_chart(rows, timezone.localtime(start).date(), last_day),
        "is_manager": is_quota_manager(request.user),
        "section": "usage",
    }
    if context["is_manager"]:
        context["pending_count"] = QuotaRequest.objects.pending().count()
    return render(request, "console/usage.html", context, status=status)


@login_required
@require_GET
def usage_csv(request):
    try:
        month, start, end, teams, slug = _window(request, request.GET)
    except ValueError as err:
        return HttpResponseBadRequest(str(err), content_type="text/plain; charset=utf-8")
    out = io.StringIO()
    accounting.write_csv(accounting.usage_rows(start, end, teams=teams), out)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    name = f"gpu-usage-{month}{'-' + slug if slug else ''}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
