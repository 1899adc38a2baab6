"""GPU-hour accounting pages (everyone, scoped to the teams they see) and quota requests
filed from a team page (owners)."""

import io
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from tenants.models import Team
from tenants.roles import is_quota_manager

from . import accounting
from .console_forms import QuotaRequestForm
from .models import QuotaGrant, QuotaRequest

TEAM_REQUESTS = 10


def _window(request):
    """The month asked for (``?month=YYYY-MM``, default this one) and the teams in scope."""
    month = request.GET.get("month") or timezone.localdate().strftime("%Y-%m")
    try:
        start, end = accounting.month_window(month)
    except ValueError:
        month = timezone.localdate().strftime("%Y-%m")
        start, end = accounting.month_window(month)
    teams = Team.objects.visible_to(request.user)
    slug = request.GET.get("team") or ""
    if slug:
        teams = teams.filter(slug=slug)
    return month, start, end, teams, slug


@login_required
@require_GET
def usage(request):
    month, start, end, teams, slug = _window(request)
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
    return render(request, "quotas/console/usage.html", context)


@login_required
@require_GET
def usage_csv(request):
    month, start, end, teams, slug = _window(request)
    out = io.StringIO()
    accounting.write_csv(accounting.usage_rows(start, end, teams=teams), out)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    name = f"gpu-usage-{month}{'-' + slug if slug else ''}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def team_quota_context(request, team: Team, form=None) -> dict:
    """What the team page shows of requests and grants: members and viewers see them,
    owners also get the request form."""
    now = timezone.now()
    can_request = QuotaRequest.can_request(team, request.user)
    return {
        "quota_requests": list(team.quota_requests.select_related("flavor", "requested_by", "decided_by")[:TEAM_REQUESTS]),
        "team_grants": list(QuotaGrant.objects.filter(team=team).current_or_upcoming(now)
                            .select_related("flavor").order_by("starts_at")),
        "can_request": can_request,
        "request_form": (form or QuotaRequestForm(team=team)) if can_request else None,
        "is_quota_manager": is_quota_manager(request.user),
        "now": now,
    }


@login_required
@require_POST
def request_create(request, slug):
    from tenants.views import _team_page  # the team page renders the form and its errors

    team = get_object_or_404(Team.objects.visible_to(request.user), slug=slug)
    if not QuotaRequest.can_request(team, request.user):
        raise PermissionDenied(f"Only owners of {team.slug} can ask for a quota change.")
    form = QuotaRequestForm(request.POST, team=team)
    if form.is_valid():
        try:
            created = QuotaRequest.objects.submit(team=team, requested_by=request.user,
                                                  **{f: form.cleaned_data[f] for f in form.Meta.fields})
        except ValidationError as err:
            form.add_error(None, err)
        else:
            messages.success(request, f"Asked for {created.gpus:+d} {created.flavor.name} GPUs; a quota manager will decide.")
            if request.htmx:
                return _team_page(request, team)
            return redirect("tenants:detail", slug=team.slug)
    return _team_page(request, team, request_form=form, status=400)
