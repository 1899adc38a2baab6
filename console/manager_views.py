"""The quota managers' console: capacity at a glance, the request queue and decisions,
grants, drains of GPU pools, and the audit trail. Every view here is for quota managers only (403 otherwise)."""

import functools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from jobs.outlook import drains, estimates
from quotas import actions, audit
from quotas.forms import ApproveForm, DenyForm, DrainForm
from quotas.grants import last_day
from quotas.models import Drain, Quota, QuotaGrant, QuotaRequest
from tenants.models import Team
from tenants.roles import is_quota_manager

from . import capacity, decision
from .views import fair_share_context, gpu_use_context

RECENT_DECISIONS = 20
TEAMS_PER_PAGE = 50
IDLE_TEAMS = 10  # the teams holding the most idle GPUs now


def quota_manager_required(view):
    @login_required
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not is_quota_manager(request.user):
            raise PermissionDenied("Only quota managers use the console.")
        return view(request, *args, **kwargs)

    return wrapped


def _nav(request, section: str) -> dict:
    return {"section": section, "pending_count": QuotaRequest.objects.pending().count()}


@quota_manager_required
@require_GET
def capacity_page(request):
    """Flavor and cohort lines over every quota; the per-team tables one page of teams at a
    time (``?q=`` narrows them by slug), so a thousand teams do not make a thousand rows."""
    data = capacity.overview()
    search = request.GET.get("q", "").strip()
    totals = capacity.team_totals(data["teams"])
    if search:
        totals = [row for row in totals if search.lower() in row["team"].lower()]
    page = Paginator(totals, TEAMS_PER_PAGE).get_page(request.GET.get("page"))
    shown = {row["team"] for row in page.object_list}
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        **_nav(request, "capacity"), **data,
        "teams": [line for line in data["teams"] if line.label in shown],
        "team_totals": page.object_list, "page": page, "q": search, "query": query.urlencode(),
        **gpu_use_context(top=IDLE_TEAMS),
        **fair_share_context(request, Team.objects.filter(slug__in=shown)),
    }
    return render(request, "console/capacity.html", context)


@quota_manager_required
@require_GET
def request_list(request):
    base = QuotaRequest.objects.select_related("team", "flavor", "requested_by", "decided_by")
    context = {
        **_nav(request, "requests"),
        "pending": list(base.pending().order_by("created_at", "id")),
        "decided": list(base.exclude(status=QuotaRequest.Status.PENDING).order_by("-decided_at", "-id")[:RECENT_DECISIONS]),
    }
    return render(request, "console/requests.html", context)


def _approve_initial(quota_request: QuotaRequest) -> dict:
    renews = quota_request.renews
    if renews is not None and renews.gpus == quota_request.gpus:  # a renewal as it stands: the grant's resources
        cpu, memory = renews.cpu_cores, renews.memory_gib
    else:
        cpu, memory = Quota.objects.resources_for(quota_request.team, quota_request.flavor, quota_request.gpus)
    return {"gpus": quota_request.gpus, "borrowing_limit_gpus": quota_request.borrowing_limit_gpus,
            "cpu_cores": cpu, "memory_gib": memory, "starts_on": quota_request.starts_on,
            "ends_on": quota_request.ends_on}


def _request_page(request, quota_request, approve_form=None, deny_form=None, status=200):
    quota = Quota.objects.filter(team=quota_request.team, flavor=quota_request.flavor).select_related("cohort").first()
    typed = approve_form.cleaned_data if approve_form is not None and hasattr(approve_form, "cleaned_data") else None
    context = {
        **_nav(request, "requests"),
        "req": quota_request,
        # What approving would change, for the numbers in the form (the request's at first).
        "effect": decision.effect_of(quota_request, typed) if quota_request.is_pending else None,
        "refusal": quota_request.why_not_decide(request.user),  # four eyes
        "quota": quota,
        "team_grants": QuotaGrant.objects.filter(team=quota_request.team, flavor=quota_request.flavor)
        .current_or_upcoming(timezone.now()).order_by("starts_at"),
        "approve_form": approve_form or ApproveForm(initial=_approve_initial(quota_request)),
        "deny_form": deny_form or DenyForm(),
    }
    return render(request, "console/request_detail.html", context, status=status)


@quota_manager_required
@require_GET
def request_detail(request, pk):
    quota_request = get_object_or_404(
        QuotaRequest.objects.select_related("team", "flavor", "requested_by", "renews"), pk=pk)
    return _request_page(request, quota_request)


@quota_manager_required
@require_POST
def request_approve(request, pk):
    quota_request = get_object_or_404(QuotaRequest.objects.select_related("team", "flavor"), pk=pk)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        return _request_page(request, quota_request, approve_form=form, status=400)
    data = form.cleaned_data
    try:
        grant = actions.approve(
            quota_request, request.user, gpus=data["gpus"], borrowing_limit_gpus=data["borrowing_limit_gpus"],
            starts_on=data["starts_on"], ends_on=data["ends_on"], cpu_cores=data["cpu_cores"],
            memory_gib=data["memory_gib"], reason=data["reason"].strip(), renewable=not data["non_renewable"],
        )
    except ValidationError as err:
        for field, errors in err.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return _request_page(request, quota_request, approve_form=form, status=400)
    if grant is None:
        messages.error(request, f"Request #{quota_request.pk} was already decided.")
        return redirect("console:request", pk=quota_request.pk)
    if grant.pk == quota_request.renews_id:
        messages.success(request, f"Approved renewal #{quota_request.pk}: grant #{grant.pk} of "
                                  f"{quota_request.team.slug} now runs until {last_day(grant.ends_at) or 'no end'}.")
    else:
        messages.success(request, f"Approved request #{quota_request.pk}: grant #{grant.pk} for "
                                  f"{quota_request.team.slug}.")
    return redirect("console:requests")


@quota_manager_required
@require_POST
def request_deny(request, pk):
    quota_request = get_object_or_404(QuotaRequest.objects.select_related("team", "flavor"), pk=pk)
    form = DenyForm(request.POST)
    if not form.is_valid():
        return _request_page(request, quota_request, deny_form=form, status=400)
    if not quota_request.deny(request.user, form.cleaned_data["reason"]):
        messages.error(request, f"Request #{quota_request.pk} was already decided.")
        return redirect("console:request", pk=quota_request.pk)
    messages.success(request, f"Denied request #{quota_request.pk} of {quota_request.team.slug}.")
    return redirect("console:requests")


@quota_manager_required
@require_GET
def grant_list(request):
    now = timezone.now()
    base = QuotaGrant.objects.select_related("team", "flavor", "request", "granted_by")
    context = {
        **_nav(request, "grants"),
        "now": now,
        "active": list(base.active_at(now).order_by("ends_at", "team__slug")),
        "upcoming": list(base.filter(starts_at__gt=now).order_by("starts_at")),
        "ended": list(base.filter(ends_at__lte=now).order_by("-ends_at")[:RECENT_DECISIONS]),
    }
    return render(request, "console/grants.html", context)


@quota_manager_required
@require_POST
def grant_end(request, pk):
    grant = get_object_or_404(QuotaGrant.objects.select_related("team", "flavor"), pk=pk)
    if actions.end_grant(grant, request.user):
        messages.success(request, f"Ended grant #{grant.pk}; the quota of {grant.team.slug} follows now.")
    else:
        messages.error(request, f"Grant #{grant.pk} had already ended.")
    return redirect("console:grants")


@quota_manager_required
@require_GET
def history(request):
    key = request.GET.get("kind") or None
    if key is not None:
        audit.model_for(key)
    context = {**_nav(request, "history"), "entries": audit.recent(key=key), "kind": key, "kinds": list(audit.TRACKED)}
    return render(request, "console/history.html", context)


@quota_manager_required
@require_GET
def object_history(request, key, pk):
    entries = audit.object_history(key, pk)
    model = audit.model_for(key)
    current = model._default_manager.filter(pk=pk).first()
    title = str(current) if current else (str(entries[0].record.instance) if entries else f"{key} #{pk}")
    context = {**_nav(request, "history"), "entries": entries, "kind": key, "title": title, "pk": pk}
    return render(request, "console/object_history.html", context)


# --- drains (docs/drain.md) ---------------------------------------------------------------------
@quota_manager_required
def drain_list(request):
    """The drains under way and to come, the recent ones, and the form to drain a pool."""
    form = DrainForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            drain = actions.declare_drain(form.instance, request.user)
        except ValidationError as err:
            form.add_error(None, err)
        else:
            messages.success(request, f"Draining {drain.flavor.name} by {drain.deadline:%Y-%m-%d %H:%M}: "
                                      "nothing new is admitted to it from now on.")
            return redirect("console:drain", drain.pk)
    now = timezone.now()
    base = Drain.objects.select_related("flavor", "created_by")
    context = {**_nav(request, "drains"), "form": form, "now": now,
               "current": list(base.not_over(now).order_by("starts_at")),
               "past": list(base.exclude(pk__in=base.not_over(now).values("pk"))[:RECENT_DECISIONS])}
    return render(request, "console/drains.html", context, status=400 if form.errors else 200)


@quota_manager_required
@require_GET
def drain_detail(request, pk):
    """What still runs on the pool and when each job should end, when it will be empty, and the
    cluster admin's commands."""
    drain = get_object_or_404(Drain.objects.select_related("flavor", "created_by", "ended_by"), pk=pk)
    pool = drains.on_pool(drain)
    context = {**_nav(request, "drains"), "drain": drain, "pool": pool, "phase": drain.phase(pool.now),
               "overdue": pool.overdue(drain.deadline), "commands": drain.commands()}
    return render(request, "console/drain_detail.html", context)


@quota_manager_required
@require_POST
def drain_end(request, pk):
    drain = get_object_or_404(Drain.objects.select_related("flavor"), pk=pk)
    if actions.end_drain(drain, request.user):
        messages.success(request, f"Ended the drain of {drain.flavor.name}: its queues reopen now.")
    else:
        messages.error(request, f"The drain of {drain.flavor.name} was already over.")
    return redirect("console:drain", drain.pk)


@quota_manager_required
@require_GET
def eta_accuracy(request):
    """How right the start estimates were (docs/eta.md): per flavor, over the recorded
    estimates whose jobs have started, the median error relative to the actual wait and the
    share of starts inside the p10-p90 range, beside the naive estimate's error."""
    context = {**_nav(request, "eta"), "flavors": estimates.accuracy_by_flavor()}
    return render(request, "console/eta_accuracy.html", context)
