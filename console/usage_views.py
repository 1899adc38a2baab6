"""GPU-hour accounting pages (everyone, scoped to the teams they see) and quota requests
filed from a team page (owners)."""

import io

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from cluster.names import is_dns1123_label
from cluster.prometheus import NOT_CONFIGURED, prometheus_from_settings
from jobs.use import gpu_use
from quotas.models import QuotaRequest
from tenants import picker
from tenants.models import Team
from tenants.roles import is_quota_manager

from . import accounting, preemptions, usage_chart

TOTALS_SHOWN = 25  # lines of each totals table on the page


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
    if suggested := picker.answer_suggestions(request):  # the team input's htmx call
        return suggested
    status = 200
    try:
        month, start, end, teams, slug = _window(request, request.GET)
    except ValueError as err:
        messages.error(request, f"{err} Showing this month for all your teams instead.")
        month, start, end, teams, slug = _window(request, QueryDict())
        status = 400
    summary = accounting.usage_summary(start, end, teams=teams)
    context = {
        "month": month, "team_slug": slug,
        **picker.picker(request.user, request.GET.get("team", "")),  # as typed, even if refused
        # The CSV has every line; the page the largest (allocated, cost, used, idle, measured).
        "by_team": summary.tables["team"][:TOTALS_SHOWN], "by_flavor": summary.tables["flavor"][:TOTALS_SHOWN],
        "by_user": summary.tables["user"][:TOTALS_SHOWN],
        "more": {kind: max(0, len(summary.tables[kind]) - TOTALS_SHOWN) for kind in ("team", "flavor", "user")},
        "total": summary.total, "total_cost": summary.total_cost, "chart": usage_chart.draw(summary.chart),
        "used": summary.used, "idle": summary.idle, "measured": summary.measured,
        "preemptions": preemptions.totals(start, end, teams=teams),
        "idle_threshold": gpu_use.idle_threshold(),
        # Used and idle come from the database (recorded by the sampler), not from Prometheus
        # now; without one configured nothing is being measured, and the page says so.
        "gpu_problem": "" if prometheus_from_settings() else gpu_use.UNAVAILABLE.format(reason=NOT_CONFIGURED),
        "currency": settings.COST_CURRENCY,
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
