"""Job pages: list with filters, submission with preview and feasibility, detail, cancel.

Each view answers the full page and, for htmx requests, the named partial it swaps.
Rules (who may see, submit, cancel) are asked of the models; views only render.
"""

from datetime import UTC, datetime, timedelta

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.http import Http404, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from cluster import ClusterError
from core.ownership import job_selector
from core.reconcile import NoCluster, current_cluster
from quotas.models import GpuFlavor
from tenants import picker
from tenants.models import Team

from . import actions, feasibility, usage
from .filters import JobFilter
from .forms import PRESETS, JobForm, clone_initial
from .manifests import render_job
from .models import Job

PAGE_SIZE = 25
LOG_LINES = 100
# Placeholder id for a job not saved yet: object names end in "-<id>".
PREVIEW_ID = 0


def _yaml(objects: list[dict]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True)


def _visible_jobs(request):
    return Job.objects.visible_to(request.user).select_related("team", "flavor", "submitter", "priority")


# --- list ---------------------------------------------------------------------------------------
# Newest first, 25 at a time, by keyset ("newer"/"older" than a job's (created_at, id), the
# order of Meta.ordering and of the indexes job_created_newest and job_team_created_newest):
# a page reads its 26 rows from an index whatever the number of jobs, and nothing is counted.
CURSOR_PARAMS = ("older", "newer", "page")
# What a row shows (templates/jobs/partials/job_rows.html), not the JSON and text of five tables.
LIST_COLUMNS = ("id", "name", "state", "kind", "workers", "max_replicas", "gpus_per_worker", "created_at",
                "team__slug", "flavor__name", "submitter__username")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _cursor(job: Job) -> str:
    """The job's place in the list, exactly: microseconds since the epoch and the id."""
    return f"{(job.created_at - _EPOCH) // _MICROSECOND}_{job.pk}"


def _parse_cursor(value: str | None):
    """(created_at, id) from a cursor, or None for a missing or malformed one (the first page)."""
    micros, _, pk = (value or "").partition("_")
    if not (micros.isascii() and micros.isdigit() and pk.isascii() and pk.isdigit()) or len(micros) > 17 or len(pk) > 18:
        return None
    try:
        return _EPOCH + timedelta(microseconds=int(micros)), int(pk)
    except OverflowError:
        return None


def _keyset_page(jobs, params) -> dict:
    """One page of ``jobs`` (newest first) and the cursors of its neighbours, in one query."""
    older = None
    if newer := _parse_cursor(params.get("newer")):
        at, pk = newer
        rows = list(jobs.filter(Q(created_at__gt=at) | Q(created_at=at, id__gt=pk), created_at__gte=at)
                    .order_by("created_at", "id")[:PAGE_SIZE + 1])
        has_newer, has_older = len(rows) > PAGE_SIZE, True
        rows = rows[:PAGE_SIZE][::-1]
    else:
        if older := _parse_cursor(params.get("older")):
            at, pk = older
            jobs = jobs.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=pk), created_at__lte=at)
        rows = list(jobs.order_by("-created_at", "-id")[:PAGE_SIZE + 1])
        has_newer, has_older = older is not None, len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
    return {
        "object_list": rows,
        "newer": _cursor(rows[0]) if rows and has_newer else None,
        "older": _cursor(rows[-1]) if rows and has_older else None,
        "paged": bool(newer or older),  # off the first page: "Newest" leads back
    }


@login_required
@require_GET
def job_list(request):
    if suggested := picker.answer_suggestions(request):  # the team input's htmx call
        return suggested
    jobs = Job.objects.visible_to(request.user).select_related("team", "flavor", "submitter").only(*LIST_COLUMNS)
    data = request.GET.copy()
    if "state" in data:  # "Any state" sends an empty value
        data.setlist("state", [state for state in data.getlist("state") if state])
    filterset = JobFilter(data or None, queryset=jobs, request=request)
    # A typo in a filter shows its error and no jobs, not every job as if unfiltered.
    page = _keyset_page(jobs.none() if filterset.is_bound and not filterset.is_valid() else filterset.qs,
                        request.GET)
    query = request.GET.copy()
    for name in CURSOR_PARAMS:
        query.pop(name, None)
    context = {"filter": filterset, "page": page, "query": query.urlencode(), "page_size": PAGE_SIZE}
    if request.htmx and request.htmx.target == "job-table":
        return render(request, "jobs/partials/job_table.html", context)
    # The form is written out in the template: Django's widgets would render every visible
    # team (a thousand for a quota manager) and re-query the flavors.
    context.update(
        **picker.picker(request.user, request.GET.get("team", "")),
        flavors=list(GpuFlavor.objects.order_by("name").values_list("name", "display_name")),
        kinds=Job.Kind.choices,
        states=Job.State.choices,
        chosen={
            "team": request.GET.get("team", ""),
            "states": request.GET.getlist("state"),
            "kind": request.GET.get("kind", ""),
            "flavor": request.GET.get("flavor", ""),
            "submitter": request.GET.get("submitter", ""),
            "q": request.GET.get("q", ""),
        },
    )
    return render(request, "jobs/job_list.html", context)


# --- submit -------------------------------------------------------------------------------------
def _form(request, data=None, initial=None) -> JobForm:
    teams = Team.objects.submittable_by(request.user)
    return JobForm(data, initial=initial, user=request.user, usage_by_team=usage.usage_for(teams))


def _initial(request) -> dict:
    if clone_id := request.GET.get("clone"):
        if not clone_id.isdigit():
            raise Http404("No such job to clone.")
        job = get_object_or_404(Job.objects.visible_to(request.user), pk=clone_id)
        return clone_initial(job)
    # A tab (?kind=) starts from that kind's first preset; ?preset= picks one by name.
    default = "inference" if request.GET.get("kind") == Job.Kind.INFERENCE else "single"
    initial = dict(PRESETS.get(request.GET.get("preset"), PRESETS[default])[1])
    if team := request.GET.get("team"):
        initial["team"] = team
    return initial


@login_required
def job_submit(request):
    can_submit = Team.objects.submittable_by(request.user).exists()
    if request.method == "POST":
        if not can_submit:
            raise PermissionDenied("Only owners and members of a team can submit jobs.")
        form = _form(request, data=request.POST)
        if form.is_valid():
            team = form.cleaned_data["team"]
            try:
                job = actions.submit(team=team, submitter=request.user, **form.submit_fields())
            except PermissionDenied:
                return HttpResponseForbidden("You cannot submit jobs for this team.")
            except ValidationError as err:
                for field, errors in err.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                verdict = feasibility.assess(job)
                if verdict.verdict == feasibility.Feasibility.NEVER:
                    # Accepted (the quota may still grow), but the submitter hears it now.
                    messages.warning(request, f"Submitted {job.name} to {team.slug}. {verdict.message}")
                else:
                    messages.success(request, f"Submitted {job.name} to {team.slug}.")
                return redirect("jobs:detail", pk=job.pk)
        messages.error(request, "The job was not submitted: fix the fields marked below.")
        status = 400
    else:
        form = _form(request, initial=_initial(request))
        status = 200
    context = {"form": form, "presets": PRESETS, "can_submit": can_submit, "kind": form.kind}
    return render(request, "jobs/job_submit.html", context, status=status)


@login_required
@require_POST
def job_preview(request):
    """The YAML the job would apply and whether it would start, for the form as typed."""
    form = _form(request, data=request.POST)
    context = {"form": form}
    if form.is_valid():
        job = form.unsaved_job()
        job.pk = PREVIEW_ID
        context.update(yaml=_yaml(render_job(job)), placeholder_id=PREVIEW_ID)
    else:
        job = form.sizing_job()
    if job is not None:
        context.update(feasibility=feasibility.assess(job), usage=usage.usage_of(job.team, job.flavor))
    return render(request, "jobs/partials/preview.html", context)


# --- detail -------------------------------------------------------------------------------------
def _status_context(request, job: Job) -> dict:
    return {
        "job": job,
        "events": list(job.events.all()),
        "queue_position": feasibility.queue_position(job),
        "can_cancel": job.can_cancel(request.user),
    }


@login_required
@require_GET
def job_detail(request, pk):
    job = get_object_or_404(_visible_jobs(request), pk=pk)
    context = _status_context(request, job)
    if request.htmx and request.htmx.target == "job-status":
        return render(request, "jobs/partials/job_status.html", context)
    context.update(
        yaml=_yaml(render_job(job)),
        role=job.team.role_of(request.user),
        can_clone=job.team.can_submit(request.user),
    )
    return render(request, "jobs/job_detail.html", context)


@login_required
@require_GET
def job_pods(request, pk):
    """Pods and their logs, read from the cluster when one is configured and reachable."""
    job = get_object_or_404(_visible_jobs(request), pk=pk)
    context = {"job": job, "pods": [], "problem": None}
    try:
        cluster = current_cluster()
        pods = cluster.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=job_selector(job.pk))
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            context["pods"].append(_pod_view(cluster, pod))
    except NoCluster:
        context["problem"] = (
            "No cluster is configured for this platform, so pods and logs cannot be shown. "
            "The job's state above still comes from the database."
        )
    except ClusterError as err:
        context["problem"] = f"The cluster could not be asked for this job's pods: {err}"
    return render(request, "jobs/partials/job_pods.html", context)


def _pod_view(cluster, pod: dict) -> dict:
    status = pod.get("status") or {}
    name = pod["metadata"]["name"]
    containers = status.get("containerStatuses") or []
    restarts = sum(c.get("restartCount", 0) for c in containers)
    waiting = next((c["state"]["waiting"] for c in containers if "waiting" in (c.get("state") or {})), None)
    view = {
        "name": name, "phase": status.get("phase", "Unknown"), "node": (pod.get("spec") or {}).get("nodeName", ""),
        "restarts": restarts, "detail": (waiting or {}).get("reason", ""), "logs": "", "logs_problem": "",
    }
    try:
        view["logs"] = cluster.pod_logs(pod["metadata"]["namespace"], name, container="main", tail_lines=LOG_LINES)
    except ClusterError as err:
        view["logs_problem"] = f"No logs yet: {err}"
    return view


@login_required
@require_POST
def job_cancel(request, pk):
    job = get_object_or_404(_visible_jobs(request), pk=pk)
    status = 200
    try:
        if actions.cancel(job, request.user):
            messages.success(request, f"Cancelling {job.name}: its pods are being removed.")
    except PermissionDenied:
        if job.is_final or job.state == Job.State.CANCELLING:
            messages.info(request, f"{job.name} is already {job.get_state_display().lower()}.")
        elif not request.htmx:
            raise
        else:
            messages.error(request, "You cannot cancel this job: only its team's owners and members can.")
            status = 403
    if request.htmx:
        return render(request, "jobs/partials/job_status.html", _status_context(request, job), status=status)
    return redirect(reverse("jobs:detail", args=[job.pk]))
