"""The pages that bring the apps together: the dashboard, a team's page (members,
namespace, quotas with usage, GPU use this month and idle GPUs now, quota requests and
grants, recent jobs) and the quota list."""

from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Q, Sum
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from cluster.prometheus import PrometheusUnavailable
from jobs import actions as job_actions
from jobs.forms import VolumeForm
from jobs.models import Job, Volume
from jobs.use import gpu_use
from jobs.use.usage import usage_for
from quotas.fairshare import fair_shares
from quotas.forms import MemberCapForm, QuotaRequestForm, RenewalForm
from quotas.models import MemberCap, QuotaGrant, QuotaRequest
from tenants.forms import MemberForm
from tenants.models import Membership, Team
from tenants.roles import is_quota_manager
from tenants.scoping import team_names_shown

from . import accounting

RECENT_JOBS = 10
TEAM_REQUESTS = 10
DASHBOARD_TEAMS = 24  # team cards a page
QUOTA_LIST_TEAMS = 50  # teams a page of the quota list


def _recent_jobs(jobs):
    return list(jobs.select_related("team", "flavor", "submitter")[:RECENT_JOBS])


def _team_rows(teams, usage, roles):
    """Per team, the person's role and its quotas' usage in flavor order."""
    by_team = defaultdict(list)
    for (team_id, _), item in usage.items():
        by_team[team_id].append(item)
    return [{"team": team, "role": roles.get(team.pk), "usage": by_team[team.pk]} for team in teams]


def _team_page_of(request, teams, per_page: int):
    """One page of ``teams`` (``?page=``), narrowed by ``?q=`` (slug or display name), and
    the query string to keep in the pager's links."""
    search = request.GET.get("q", "").strip()
    if search:
        teams = teams.filter(Q(slug__icontains=search) | Q(display_name__icontains=search))
    page = Paginator(teams, per_page).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return page, search, query.urlencode()


@login_required
@require_GET
def dashboard(request):
    jobs = _recent_jobs(Job.objects.visible_to(request.user))
    context = {"jobs": jobs, "live": any(not job.is_final for job in jobs)}
    if request.htmx and request.htmx.target == "recent-jobs":
        return render(request, "jobs/partials/recent_jobs.html", context)
    # A quota manager sees every team: one page of cards at a time, with a search.
    page, search, query = _team_page_of(request, Team.objects.visible_to(request.user), DASHBOARD_TEAMS)
    teams = list(page.object_list)
    roles = dict(Membership.objects.filter(user=request.user, team__in=[t.pk for t in teams])
                 .values_list("team_id", "role"))
    context.update(teams=_team_rows(teams, usage_for(teams), roles), page=page, q=search, query=query)
    return render(request, "console/dashboard.html", context)


def gpu_use_context(teams=None, *, top: int | None = None) -> dict:
    """Allocated vs used GPU-hours per flavor this month, and the idle GPUs now: of the
    team (``teams``: [team]) or, for the console (``top``), the teams holding the most. One
    Prometheus query; without an answer, the one line saying why."""
    now = timezone.now()
    start, end = accounting.month_window(timezone.localdate().strftime("%Y-%m"))
    context = {"gpu_month": accounting.flavor_totals(start, end, teams=teams, now=now), "gpu_problem": "",
               "gpu_idle": 0, "idle_teams": None, "idle_threshold": gpu_use.idle_threshold()}
    try:
        idle = gpu_use.idle_gpus_now(teams, prometheus=gpu_use.for_pages())
    except PrometheusUnavailable as err:
        context["gpu_problem"] = gpu_use.unavailable(err)
        return context
    if top is None:
        context["gpu_idle"] = sum(idle.values())
    else:
        context["idle_teams"] = sorted(idle.items(), key=lambda item: (-item[1], item[0]))[:top]
    return context


def fair_share_context(request, teams) -> dict:
    """Kueue's fair share of each of ``teams``' cohort quotas in words; other teams of a cohort
    are named only to those who may see them."""
    shares, problem = fair_shares(teams, named=team_names_shown(request))
    return {"fair_shares": shares, "fair_share_problem": problem}


def _team(request, slug) -> Team:
    return get_object_or_404(Team.objects.visible_to(request.user), slug=slug)


def _team_page(request, team: Team, form=None, status=200, request_form=None, cap_form=None, volume_form=None):
    usage = usage_for([team])
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
        **team_caps_context(request, team, cap_form),
        **team_volumes_context(request, team, volume_form),
    }
    if not request.htmx:  # the page, not one of its parts
        context.update(gpu_use_context([team]), **fair_share_context(request, [team]))
    if request.htmx and request.htmx.target == "quota-requests":
        return render(request, "console/partials/team_requests.html", context, status=status)
    if request.htmx and request.htmx.target == "member-caps":
        return render(request, "console/partials/member_caps.html", context, status=status)
    if request.htmx and request.htmx.target == "volumes":
        return render(request, "console/partials/volumes.html", context, status=status)
    if request.htmx and request.htmx.target == "members":
        return render(request, "console/partials/members.html", context, status=status)
    return render(request, "console/team_detail.html", context, status=status)


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
    return redirect("console:team", slug=team.slug)


@login_required
@require_POST
def member_remove(request, slug, pk):
    team = _team(request, slug)
    if not team.can_manage_members(request.user):
        raise PermissionDenied("Only the team's owners can remove members.")
    membership = get_object_or_404(team.memberships.select_related("user"), pk=pk)
    try:
        membership.remove()
    except ValidationError as err:
        messages.error(request, err.messages[0])
        return _team_page(request, team, status=400) if request.htmx else redirect("console:team", slug=team.slug)
    messages.success(request, f"Removed {membership.user.username} from {team.slug}.")
    if request.htmx:
        return _team_page(request, team)
    return redirect("console:team", slug=team.slug)


def team_volumes_context(request, team: Team, form=None) -> dict:
    """Everyone in the team sees its storage quota, volumes and the live jobs mounting them;
    owners get the form."""
    volumes = list(team.volumes.order_by("name"))
    live = team.jobs.exclude(volumes={}).live().values_list("name", "volumes")
    mounted: dict[str, list[str]] = {}
    for job, mounts in live:
        for name in mounts:
            mounted.setdefault(name, []).append(job)
    used = dict(team.volumes.values("storage_class").annotate(total=Sum("size_gib")).values_list("storage_class",
                                                                                                    "total"))
    counts: dict[str, int] = {}
    for volume in volumes:
        counts[volume.storage_class] = counts.get(volume.storage_class, 0) + 1
    storage = [{"quota": quota, "used_gib": used.get(quota.storage_class, 0),
                "volumes": counts.get(quota.storage_class, 0)} for quota in team.storage_quotas.all()]
    can_manage = Volume.can_manage(team, request.user)
    return {"storage": storage, "volume_rows": [{"volume": v, "mounted_by": mounted.get(v.name, [])} for v in volumes],
            "can_manage_volumes": can_manage,
            "volume_form": (form or VolumeForm(team=team)) if can_manage and storage else None}


def team_caps_context(request, team: Team, form=None) -> dict:
    """The team's per-person caps (docs/caps.md), each with what it holds: a person's cap their
    use, the team's default the use of everyone it holds who has jobs on the flavor; and the
    caps that hold the person reading. Everyone in the team sees them; owners get the form."""
    caps = list(team.member_caps.select_related("flavor", "user", "set_by").order_by("flavor__name", "user__username"))
    holdings = Job.objects.cap_holdings(team.pk) if caps else {}
    names = dict(team.memberships.values_list("user_id", "user__username"))
    own = {(cap.user_id, cap.flavor_id) for cap in caps if cap.user_id}
    zero = {"gpus": 0, "jobs": 0, "waiting": 0}
    rows = []
    for cap in caps:
        if cap.user_id:
            uses = [(cap.user.username, holdings.get((cap.user_id, cap.flavor_id), zero))]
        else:
            uses = sorted((names.get(user_id, "?"), use) for (user_id, flavor_id), use in holdings.items()
                          if flavor_id == cap.flavor_id and (user_id, flavor_id) not in own)
        rows.append({"cap": cap, "uses": uses})
    mine = [{"cap": cap, "use": holdings.get((request.user.pk, cap.flavor_id), zero)}
            for cap in MemberCap.objects.effective_for(team, request.user)] if caps else []
    can_set = MemberCap.can_manage(team, request.user)
    return {"cap_rows": rows, "my_caps": mine, "can_set_caps": can_set,
            "cap_form": (form or MemberCapForm(team=team)) if can_set else None}


@login_required
@require_POST
def cap_set(request, slug):
    """An owner sets a person's cap, or the team's default (`jobs.actions.save_cap`)."""
    team = _team(request, slug)
    if not MemberCap.can_manage(team, request.user):
        raise PermissionDenied(f"Only owners of {team.slug} set the caps of its people.")
    form = MemberCapForm(request.POST, team=team)
    if form.is_valid():
        cap = form.cap()
        try:
            job_actions.save_cap(cap, request.user)
        except ValidationError as err:
            for field, errors in err.message_dict.items():
                form.add_error({"user": "person"}.get(field, field) if field != "__all__" else None, errors)
        else:
            who = cap.user.username if cap.user else "everyone (team default)"
            messages.success(request, f"{who} may hold {cap.max_gpus} {cap.flavor.name} GPUs at once"
                                      + (f" in at most {cap.max_jobs} jobs." if cap.max_jobs else "."))
            return _team_page(request, team) if request.htmx else redirect("console:team", slug=team.slug)
    return _team_page(request, team, cap_form=form, status=400)


@login_required
@require_POST
def cap_remove(request, slug, pk):
    team = _team(request, slug)
    if not MemberCap.can_manage(team, request.user):
        raise PermissionDenied(f"Only owners of {team.slug} set the caps of its people.")
    cap = get_object_or_404(team.member_caps.select_related("flavor", "user"), pk=pk)
    job_actions.remove_cap(cap, request.user)
    messages.success(request, f"Removed the {cap.flavor.name} cap of "
                              f"{cap.user.username if cap.user else 'everyone (team default)'}.")
    return _team_page(request, team) if request.htmx else redirect("console:team", slug=team.slug)


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
            return redirect("console:team", slug=team.slug)
    return _team_page(request, team, request_form=form, status=400)


def _grant_page(request, team: Team, grant: QuotaGrant, form=None, status=200):
    """A grant of the team: its numbers and dates, its renewals, and (owners) the renewal
    form, or why the grant cannot be renewed."""
    can_request = QuotaRequest.can_request(team, request.user)
    refusal = grant.why_not_renew()
    context = {
        "team": team, "grant": grant, "now": timezone.now(),
        "renewals": list(grant.renewals.select_related("requested_by", "decided_by", "grant")),
        "can_request": can_request, "refusal": refusal,
        "renewal_form": (form or RenewalForm(grant=grant)) if can_request and refusal is None else None,
        "is_quota_manager": is_quota_manager(request.user),
    }
    return render(request, "console/grant_detail.html", context, status=status)


def _team_grant(request, slug, pk) -> tuple[Team, QuotaGrant]:
    team = _team(request, slug)
    return team, get_object_or_404(QuotaGrant.objects.filter(team=team).select_related("flavor", "request"), pk=pk)


@login_required
@require_GET
def grant_detail(request, slug, pk):
    return _grant_page(request, *_team_grant(request, slug, pk))


@login_required
@require_POST
def grant_renew(request, slug, pk):
    """An owner asks to carry the grant on (``QuotaRequest.objects.renew`` holds the rules)."""
    team, grant = _team_grant(request, slug, pk)
    if not QuotaRequest.can_request(team, request.user):
        raise PermissionDenied(f"Only owners of {team.slug} can ask to renew its grants.")
    form = RenewalForm(request.POST, grant=grant)
    if form.is_valid():
        try:
            renewal = QuotaRequest.objects.renew(grant, requested_by=request.user, **form.cleaned_data)
        except ValidationError as err:
            for field, errors in err.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Asked to renew grant #{grant.pk} until {renewal.ends_on}; "
                                      "a quota manager will decide.")
            return redirect("console:grant", slug=team.slug, pk=grant.pk)
    return _grant_page(request, team, grant, form=form, status=400)


@login_required
@require_GET
def quota_list(request):
    """Quotas a person may see, per team and flavor, with what is in use: one page of teams
    at a time (a quota manager sees them all), narrowed by ``?q=``."""
    teams = Team.objects.visible_to(request.user).filter(quotas__isnull=False).distinct()
    page, search, query = _team_page_of(request, teams, QUOTA_LIST_TEAMS)
    usage = usage_for(list(page.object_list))
    return render(request, "console/quota_list.html",
                  {"usage": list(usage.values()), "page": page, "q": search, "query": query})
