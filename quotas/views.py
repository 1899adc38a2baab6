"""Quotas a person may see, per team and flavor, with what is in use."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from jobs import feasibility
from tenants.models import Team


@login_required
@require_GET
def quota_list(request):
    teams = Team.objects.visible_to(request.user)
    usage = feasibility.usage_for(teams)
    return render(request, "quotas/quota_list.html", {"usage": list(usage.values())})
