"""The dashboard and team pages: members, namespace, quotas with usage, recent jobs."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from jobs import feasibility
from jobs.models import Job
from quotas.usage_views import team_quota_context  # the team's quota requests and grants

from .forms import MemberForm
from .models import Membership, Team

RECENT_JOBS = 10


def _recent_jobs(jobs):
    return list(jobs.select_related("team", "flavor", "submitter")[:RECENT_JOBS])


def _team_rows(teams, usage, roles):
    """Per team, the person's role and its quotas' usage in flavor order."""
    return [
        {"team": team, "role": roles.get(team.pk),
         "usage": [item for (team_id, _), item in usage.items() if team_id == team.pk]}
        for team in teams
    ]


@login_required
@require_GET
def dashboard(request):
    jobs = _recent_jobs(Job.objects.visible_to(request.user))
    context = {"jobs": jobs, "live": any(not job.is_final for job in jobs)}
    if request.htmx and request.htmx.target == "recent-jobs":
        return render(request, "jobs/partials/recent_jobs.html", context)
    teams = list(Team.objects.visible_to(request.user))
    roles = dict(Membership.objects.filter(user=request.user).values_list("team_id", "role"))
    context.update(teams=_team_rows(teams, feasibility.usage_for(teams), roles))
    return render(request, "tenants/dashboard.html", context)


def _team(request, slug) -> Team:
    return get_object_or_404(Team.objects.visible_to(request.user), slug=slug)


def _team_page(request, team: Team, form=None, status=200, request_form=None):
    usage = feasibility.usage_for([team])
    context = {
        "team": team,
        "memberships": team.memberships.select_related("user").order_by("role", "user__username"),
        "usage": list(usage.values()),
        "jobs": _recent_jobs(team.jobs.all()),
        "role": team.role_of(request.user),
        "can_manage": team.can_manage_members(request.user),
        "can_submit": team.can_submit(request.user),
        "form": form or MemberForm(team=team),
        **team_quota_context(request, team, request_form),
    }
    if request.htmx and request.htmx.target == "quota-requests":
        return render(request, "quotas/console/partials/team_requests.html", context, status=status)
    if request.htmx and request.htmx.target == "members":
        return render(request, "tenants/partials/members.html", context, status=status)
    return render(request, "tenants/team_detail.html", context, status=status)


@login_required
@require_GET
def team_detail(request, slug):
    return _team_page(request, _team(request, slug))


@login_required
@require_POST
def member_add(request, slug):
    team = _team(request, slug)
    if not team.can_manage_members(request.user):
        raise PermissionDenied("Only the team's owners can add members.")
    form = MemberForm(request.POST, team=team)
    if not form.is_valid():
        return _team_page(request, team, form=form, status=400)
    membership = form.save()
    messages.success(request, f"Added {membership.user.username} to {team.slug} as {membership.get_role_display().lower()}.")
    if request.htmx:
        return _team_page(request, team)
    return redirect("tenants:detail", slug=team.slug)


@login_required
@require_POST
def member_remove(request, slug, pk):
    team = _team(request, slug)
    if not team.can_manage_members(request.user):
        raise PermissionDenied("Only the team's owners can remove members.")
    membership = get_object_or_404(team.memberships.select_related("user"), pk=pk)
    if membership.is_last_owner:
        messages.error(request, f"{membership.user.username} is the last owner of {team.slug}; add another owner first.")
        return _team_page(request, team, status=400) if request.htmx else redirect("tenants:detail", slug=team.slug)
    membership.delete()
    messages.success(request, f"Removed {membership.user.username} from {team.slug}.")
    if request.htmx:
        return _team_page(request, team)
    return redirect("tenants:detail", slug=team.slug)
