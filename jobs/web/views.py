"""Job pages: list with filters, submission with preview and feasibility (the job's own page,
with its pods and logs, is `jobs.web.pages`).

Each view answers the full page and, for htmx requests, the named partial it swaps.
Rules (who may see, submit, cancel) are asked of the models; views only render.
"""

from datetime import UTC, datetime, timedelta

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError
from django.db.models import Q
from django.http import Http404, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from cluster.prometheus import PrometheusUnavailable
from quotas.models import GpuFlavor
from tenants import picker
from tenants.models import Team
from workloads import kinds, spec

from .. import actions
from ..filters import JobFilter
from ..forms import JobForm, clone_initial, first_preset, presets_for
from ..manifests import render_job
from ..models import LIVE_NAME_TAKEN, Job
from ..outlook import estimates, feasibility
from ..use import gpu_use, telemetry, usage

PAGE_SIZE = 25
# Placeholder id for a job not saved yet: object names end in "-<id>".
PREVIEW_ID = 0
# Fields a clone link may change (`?clone=<id>&workers=2`): what the start-sooner advice suggests.
CLONE_CHANGES = ("workers", "gpus_per_worker", "flavor", "max_runtime_seconds")


class _NoAliases(yaml.SafeDumper):
    """YAML a person reads and pastes: an object used twice is written out twice, not as
    an ``&id001`` anchor and its alias."""

    def ignore_aliases(self, data):
        return True


def _yaml(objects: list[dict]) -> str:
    return yaml.dump_all(objects, Dumper=_NoAliases, sort_keys=False, explicit_start=True)


# --- list ---------------------------------------------------------------------------------------
# Newest first, 25 at a time, by keyset ("newer"/"older" than a job's (created_at, id), the
# order of Meta.ordering and of the indexes job_created_newest and job_team_created_newest):
# a page reads its 26 rows from an index whatever the number of jobs, and nothing is counted.
CURSOR_PARAMS = ("older", "newer", "page")
# What a row shows (templates/jobs/partials/job_rows.html), not the JSON and text of five tables.
# reason and the flavor's node size: whether a waiting job can never start (its state's label);
# the scheduler and GPUs in use: the utilization column (how its pods are named, of how many).
# kueue_reason: Kueue's own reason for a job it has not admitted, shown first under its state.
LIST_COLUMNS = ("id", *(field.column for field in spec.LISTED), "state", "reason", "kueue_reason",
                "flavor__gpus_per_node", "created_at",
                "submitter__username", "flavor__scheduler", "gpus_in_use")
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
    context = {"filter": filterset, "page": page, "query": query.urlencode(), "page_size": PAGE_SIZE,
               **_utilization(page["object_list"])}
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


def _utilization(jobs) -> dict:
    """The utilization column: each running job's GPUs now (``job.gpus_now``), one
    Prometheus query for the page; or the one line saying why there is none."""
    running = [job for job in jobs if job.state == Job.State.RUNNING]
    if not running:
        return {"gpu_column": True, "gpu_problem": ""}
    try:
        now = telemetry.utilization_now(running, prometheus=gpu_use.for_pages())
    except PrometheusUnavailable as err:
        return {"gpu_column": True, "gpu_problem": gpu_use.unavailable(err)}
    for job in running:
        job.gpus_now = now.get(job.pk, telemetry.NO_GPUS)
    return {"gpu_column": True, "gpu_problem": ""}


# --- submit -------------------------------------------------------------------------------------
def _form(request, data=None, initial=None) -> JobForm:
    teams = Team.objects.submittable_by(request.user)
    return JobForm(data, initial=initial, user=request.user, usage_by_team=usage.usage_for(teams))


def _initial(request) -> dict:
    if clone_id := request.GET.get("clone"):
        if not clone_id.isdigit():
            raise Http404("No such job to clone.")
        job = get_object_or_404(Job.objects.visible_to(request.user), pk=clone_id)
        # The start-sooner advice (`jobs.outlook.estimates`) links here with the one change it suggests.
        return {**clone_initial(job), **{name: request.GET[name] for name in CLONE_CHANGES
                                         if request.GET.get(name, "").isdigit()}}
    # A tab (?kind=) starts from that kind's first preset; ?preset= picks one by name.
    default = first_preset(request.GET.get("kind", ""))
    presets = presets_for(request.user)
    initial = dict(presets.get(request.GET.get("preset"), presets[default])[1])
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
            except IntegrityError:
                # A same-name submission won the race past the live-name check (as the API's 409).
                form.add_error("name", LIVE_NAME_TAKEN)
            else:
                verdict = feasibility.assess(job)
                if verdict.verdict == feasibility.Feasibility.NEVER or job.at_personal_cap:
                    # Accepted (the quota may still grow), but the submitter hears it now.
                    messages.warning(request, f"Submitted {job.name} to {team.slug}. {verdict.message}")
                else:
                    estimate = estimates.estimate(job, advise=False)
                    when = f" {estimate.sentence}" if estimate and verdict.verdict == verdict.QUEUE else ""
                    messages.success(request, f"Submitted {job.name} to {team.slug}.{when}")
                return redirect("jobs:detail", pk=job.pk)
        messages.error(request, "The job was not submitted: fix the fields marked below.")
        status = 400
    else:
        form = _form(request, initial=_initial(request))
        status = 200
    context = {"form": form, "presets": presets_for(request.user), "can_submit": can_submit, "kind": form.kind,
               "kinds": Job.Kind.choices, "kind_note": kinds.by_name(form.kind).note}
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
        job.pk = None  # not submitted: for the verdict, a new job behind every one waiting
    else:
        job = form.sizing_job()
    if job is not None:
        context.update(feasibility=feasibility.assess(job), usage=usage.usage_of(job.team, job.flavor))
        if context["feasibility"].verdict == feasibility.Feasibility.QUEUE:
            context["eta"] = estimates.estimate(job, record=False, advise=False)
    return render(request, "jobs/partials/preview.html", context)
