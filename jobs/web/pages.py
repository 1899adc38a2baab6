"""The job page: live status with its times and GPU-hours, pods, logs (follow, the previous
run, download), an inference server's endpoint and replicas, cancel, submitting a draft.

One view answers the page and, for htmx, the partial it swaps (`job-status`; `job-logs` or
`log-body` for the logs). Pods and logs are loaded after the page, and every live part polls
until the job reaches a final state. Rules are the models' (`job.can_cancel`,
`job.can_submit_draft`, `job.queue_wait`, `job.gpu_hours`, ...); what a pod and its logs say,
in plain words, is `jobs.watch.logs`. Only the pods, logs and download views talk to the cluster,
and only about pods labelled with the job's id: a pod name in a URL reaches nothing else.
The GPU panel (`job_gpus`) asks Prometheus, once, for the job's GPUs over time
(`jobs.use.telemetry`), loaded after the page like the pods, and says in one line when it cannot.
"""

from datetime import timedelta

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from cluster import ClusterError
from cluster.prometheus import PrometheusUnavailable
from core import charts
from core.reconcile import NoCluster, current_cluster
from quotas.models import IdlePolicy
from quotas.models.flavors import UNATTRIBUTABLE
from workloads.kinds import for_job

from .. import actions
from ..manifests import render_job
from ..models import IdleWatch, Job
from ..outlook import estimates, feasibility
from ..queue import looks
from ..use import gpu_use, telemetry
from ..watch import logs

# The status poll's event when it finds the job ended: every panel listening refreshes once
# more and comes back without its poll (templates/jobs/partials/job_*.html).
JOB_ENDED = "job-ended"
NO_CLUSTER = ("No cluster is configured for this platform, so pods and logs cannot be shown. "
              "The job's state above still comes from the database.")


def _job(request, pk) -> Job:
    """The job if ``request.user`` may see it (404 otherwise: outsiders learn nothing)."""
    jobs = (Job.objects.visible_to(request.user)
            .select_related("team", "flavor", "submitter", "priority", "idle_watch__exempted_by"))
    return get_object_or_404(jobs, pk=pk)


@looks.one_look()  # the position and the estimate read the queue once
def _status_context(request, job: Job) -> dict:
    now = timezone.now()
    rules = IdlePolicy.objects.rules(job.team, job.flavor, cached=True)
    place = feasibility.place(job)
    return {
        # The idle-GPU banner: warned (when it will be reclaimed), paused (why), exempt.
        "idle": IdleWatch.summary(job, rules),
        "can_exempt": IdleWatch.can_exempt(job, request.user, rules),
        "job": job,
        "events": list(job.events.all()),
        # Kueue's own position (its visibility API) beside the platform's count of the jobs ahead.
        "queue_position": None if place is None else place.ahead,
        "queue_place": place,
        # When it will start (p50, p10-p90) and what would start it sooner (docs/eta.md).
        "eta": estimates.estimate(job, advise=lambda: job.team.can_submit(request.user)) if estimates.applies(job) else None,
        "can_cancel": job.can_cancel(request.user),
        "can_stop": job.can_stop(request.user),
        "can_start": job.can_start(request.user),
        "queue_wait": job.queue_wait(now),
        "run_time": job.run_time(now),
        "runtime_left": job.runtime_left(now),
        "gpu_hours": job.gpu_hours(now),
        # The preemption contract (docs/preemption.md): until when it may not be preempted,
        # each preemption it suffered in plain words, and the hours its preemptions cost others.
        "protected_until": job.protected_until() if job.is_protected_from_preemption(now) else None,
        "preemptions": [p.explanation() for p in job.preemptions.select_related("by_team", "by_job")],
        "preempted_others": list(job.preemptions_caused.select_related("job__team")),
        # A flash ("Submitted ...") tells what just happened: the poll clears it once the job
        # has moved on from the state the page showed with it.
        "moved_on": request.GET.get("seen", job.state) != job.state,
    }


@login_required
@require_GET
def job_detail(request, pk):
    job = _job(request, pk)
    context = _status_context(request, job)
    if request.htmx and request.htmx.target == "job-status":
        response = render(request, "jobs/partials/job_status.html", context)
        if job.is_final:  # the other panels stop polling now, not at their next tick
            trigger_client_event(response, JOB_ENDED)
        return response
    context.update(
        yaml=yaml.safe_dump_all(render_job(job), sort_keys=False, explicit_start=True),
        role=job.team.role_of(request.user),
        can_clone=job.team.can_submit(request.user),
        can_submit_draft=job.can_submit_draft(request.user),
        endpoint=for_job(job).endpoint(job),
    )
    return render(request, "jobs/job_detail.html", context)


# --- pods ---------------------------------------------------------------------------------------
@login_required
@require_GET
def job_pods(request, pk):
    """The job's pods as the cluster shows them (an inference server's replicas too), and
    the log tails kept from its failed containers; polls while the job lives."""
    job = _job(request, pk)
    context = {"job": job, "pods": [], "more_pods": 0, "problem": "", "replicas": None, "landed": "",
               "tails": list(job.log_tails.defer("text"))}
    try:
        cluster = current_cluster()
        views = [logs.pod_view(pod) for pod in logs.job_pods(cluster, job)]
        context.update(pods=views[:logs.MAX_PODS_SHOWN], more_pods=max(0, len(views) - logs.MAX_PODS_SHOWN),
                       landed=logs.landed(cluster, job, views))
        if job.work_kind.autoscaled:
            context["replicas"] = logs.replicas(cluster, job)
    except NoCluster:
        context["problem"] = NO_CLUSTER
    except ClusterError as err:
        context["problem"] = logs.pods_problem(err)
    return render(request, "jobs/partials/job_pods.html", context)


# --- GPUs ---------------------------------------------------------------------------------------
GPU_CHART_SPAN = timedelta(hours=6)  # the chart shows at most the job's last six hours
GPU_CHART_POINTS = 120  # points a line: a step of a 120th of the span, 5 s at least
MIB_PER_GIB = 1024


def gpu_panel(job: Job, now) -> dict:
    """The GPU panel's context: utilization and memory charts of the job's GPUs, "using N of
    M GPUs" (N: GPUs busy, at or above the idle threshold, at the latest point), or the one
    line saying why there are none. One Prometheus query, waiting at most a page's time."""
    context = {"job": job, "problem": "", "empty": "", "charts": [], "busy": None, "reporting": 0,
               "held": job.gpus_in_use, "threshold": gpu_use.idle_threshold(), "mean": None,
               "over_budget": [], "budget_unseen": budget_unseen(job)}
    began = job.admitted_at or job.started_at
    if began is None:
        context["empty"] = "This job has not held GPUs yet."
        return context
    end = min(job.finished_at or now, now)
    start = max(began, end - GPU_CHART_SPAN)
    step = max(timedelta(seconds=5), (end - start) / GPU_CHART_POINTS)
    try:
        series = telemetry.utilization_over_time(job, start, end, step, prometheus=gpu_use.for_pages())
    except PrometheusUnavailable as err:
        context["problem"] = gpu_use.unavailable(err)
        return context
    if not series:
        context["empty"] = ("No GPU of this job reported to Prometheus." if job.is_final
                            else "No GPU of this job reports to Prometheus yet.")
        return context
    names = [gpu.key.label for gpu in series]
    context["charts"] = [
        charts.lines("GPU utilization", "%", [{"name": n, "points": g.util_percent} for n, g in zip(names, series, strict=True)],
                     start, end, top=100, tz=timezone.get_current_timezone(), value_format="{:.0f} %"),
        charts.lines("GPU memory used", "GiB", [{"name": n, "points": [(t, v / MIB_PER_GIB) for t, v in g.mem_used_mib]}
                                                for n, g in zip(names, series, strict=True)],
                     start, end, tz=timezone.get_current_timezone(), value_format="{:.1f} GiB"),
    ]
    recent = end - 2 * step  # a GPU whose last point is older stopped reporting
    latest = [g.util_percent[-1][1] for g in series if g.util_percent and g.util_percent[-1][0] >= recent]
    context.update(reporting=len(latest), busy=sum(1 for p in latest if p >= context["threshold"]),
                   mean=sum(latest) / len(latest) if latest else None,
                   over_budget=over_budget(job, zip(names, series, strict=True), recent))
    return context


def over_budget(job: Job, named_series, recent) -> list[tuple[str, float]]:
    """The job's GPUs whose latest memory use (still reporting) is above its GPU memory budget,
    with the GiB used: a running job only, and only where it declared a budget."""
    if job.is_final or not job.gpu_memory_gib or job.flavor.gpu_sharing in UNATTRIBUTABLE:
        return []  # a shared GPU's series are the whole GPU's, or another pod's (budget_unseen)
    return [(name, used / MIB_PER_GIB) for name, gpu in named_series if gpu.mem_used_mib
            and gpu.mem_used_mib[-1][0] >= recent
            and (used := gpu.mem_used_mib[-1][1]) > job.gpu_memory_gib * MIB_PER_GIB]


def budget_unseen(job: Job) -> str:
    """Why the budget of a job on a shared GPU cannot be checked from telemetry ("" if it can)."""
    if not job.gpu_memory_gib or job.flavor.gpu_sharing not in UNATTRIBUTABLE:
        return ""
    enforced = ("MPS enforces the share's limit, so the job fails its allocations rather than going over."
                if job.flavor.gpu_sharing == "mps" else "Time-slicing does not enforce it: stay within the budget.")
    return ("dcgm-exporter cannot tell which pod uses a time-sliced or MPS GPU's memory, so its use against "
            f"the {job.gpu_memory_gib} GiB budget is not shown. {enforced}")


@login_required
@require_GET
def job_gpus(request, pk):
    """The GPU panel (target `job-gpus`): polls while the job lives."""
    job = _job(request, pk)
    return render(request, "jobs/partials/job_gpus.html", gpu_panel(job, timezone.now()))


# --- logs ---------------------------------------------------------------------------------------
def _asked(request) -> dict:
    """What the logs panel was asked for: a pod and container (its previous run?), or a kept
    tail; and whether to follow (on unless turned off: the form sends follow=0 before the box)."""
    query = request.GET
    follow = query.getlist("follow")
    tail = query.get("tail", "")
    return {"pod": query.get("pod", ""), "container": query.get("container", "") or logs.MAIN_CONTAINER,
            "previous": query.get("previous") == "1", "follow": follow[-1] == "1" if follow else True,
            "tail": int(tail) if tail.isascii() and tail.isdigit() and len(tail) < 19 else None}


def _logs_context(request, job: Job) -> dict:
    asked = _asked(request)
    tails = list(job.log_tails.defer("text"))
    context = {"job": job, "asked": asked, "pods": [], "pod": None, "tails": tails, "tail": None,
               "text": "", "problem": "", "empty": "", "lines": logs.LOG_LINES}
    if asked["tail"] is not None:
        context["tail"] = get_object_or_404(job.log_tails, pk=asked["tail"])
        context["text"] = context["tail"].text
        return context
    try:
        cluster = current_cluster()
        context["pods"] = views = [logs.pod_view(pod) for pod in logs.job_pods(cluster, job)]
    except NoCluster:
        context["problem"] = NO_CLUSTER
        return context
    except ClusterError as err:
        context["problem"] = logs.pods_problem(err)
        return context
    pod = next((v for v in views if v.name == asked["pod"]), None) if asked["pod"] else logs.default_pod(views)
    if pod is None:
        kept = [t for t in tails if not asked["pod"] or t.pod == asked["pod"]]
        if kept:  # the pods are gone: what was kept of their failures
            context["tail"] = job.log_tails.get(pk=kept[0].pk)
            context["text"] = context["tail"].text
        elif asked["pod"]:
            context["problem"] = "This pod is gone from the cluster, and its logs with it."
        else:
            context["empty"] = ("This job has no pods on the cluster yet." if not job.is_final
                                else "This job's pods are gone from the cluster.")
        return context
    container = asked["container"] if asked["container"] in pod.containers else pod.containers[0]
    asked.update(pod=pod.name, container=container)
    context["pod"] = pod
    context["text"], context["problem"] = logs.read(cluster, job, pod.name, container=container,
                                                    previous=asked["previous"])
    if not context["text"] and not context["problem"]:
        context["empty"] = "This container has written nothing yet."
    return context


@login_required
@require_GET
def job_logs(request, pk):
    """The logs panel (target `job-logs`) or only its text (target `log-body`, the follow poll)."""
    job = _job(request, pk)
    context = _logs_context(request, job)
    # Follow polls until the job ends: the text of the pod shown, or the whole panel while no
    # pod is there to show yet (so the first pod's logs appear without a click).
    context["following"] = (context["asked"]["follow"] and not job.is_final and job.state != Job.State.DRAFT
                            and context["tail"] is None and context["problem"] != NO_CLUSTER)
    if request.htmx and request.htmx.target == "log-body":
        return render(request, "jobs/partials/job_log_body.html", context)
    return render(request, "jobs/partials/job_logs.html", context)


@login_required
@require_GET
def job_log_download(request, pk):
    """A container's whole log (or a kept tail) as a text file."""
    job = _job(request, pk)
    asked = _asked(request)
    if asked["tail"] is not None:
        tail = get_object_or_404(job.log_tails, pk=asked["tail"])
        return _attachment(tail.text, f"{tail.pod}-{tail.container}-last-lines.log")
    try:
        cluster = current_cluster()
        names = {pod["metadata"]["name"] for pod in logs.job_pods(cluster, job)}
    except NoCluster:
        return _plain(NO_CLUSTER, 503)
    except ClusterError as err:
        return _plain(logs.pods_problem(err), 503)
    if asked["pod"] not in names:
        return _plain("This job has no pod of that name on the cluster.", 404)
    text, problem = logs.read(cluster, job, asked["pod"], container=asked["container"], previous=asked["previous"],
                              tail_lines=None, limit_bytes=logs.DOWNLOAD_LIMIT_BYTES)
    if problem:
        return _plain(problem, 404)
    if len(text.encode()) >= logs.DOWNLOAD_LIMIT_BYTES:
        text += (f"\n[cut at {logs.DOWNLOAD_LIMIT_BYTES // 2**20} MiB; all of it: kubectl -n {job.team.namespace_name} "
                 f"logs {asked['pod']} -c {asked['container']}{' --previous' if asked['previous'] else ''}]\n")
    suffix = "-previous" if asked["previous"] else ""
    return _attachment(text, f"{asked['pod']}-{asked['container']}{suffix}.log")


def _attachment(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


def _plain(sentence: str, status: int) -> HttpResponse:
    return HttpResponse(sentence + "\n", content_type="text/plain; charset=utf-8", status=status)


# --- actions ------------------------------------------------------------------------------------
@login_required
@require_POST
def job_cancel(request, pk):
    job = _job(request, pk)
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


def _notebook_action(request, pk, act, done: str, refused: str):
    """Stop or start a notebook (`jobs.actions.stop`, `.start`), for the page and htmx alike."""
    job = _job(request, pk)
    status = 200
    try:
        if act(job, request.user):
            messages.success(request, done.format(name=job.name))
    except PermissionDenied:
        if not request.htmx:
            raise
        messages.error(request, refused)
        status = 403
    except ValidationError as err:  # it does not fit the team's own quota now
        messages.error(request, " ".join(err.messages))
        status = 400 if request.htmx else 200
    if request.htmx:
        return render(request, "jobs/partials/job_status.html", _status_context(request, job), status=status)
    return redirect(reverse("jobs:detail", args=[job.pk]))


@login_required
@require_POST
def job_stop(request, pk):
    return _notebook_action(request, pk, actions.stop, "Stopping {name}: its GPUs go back, its volumes stay.",
                            "You cannot stop this notebook: only its team's owners and members can, while it runs "
                            "or waits.")


@login_required
@require_POST
def job_start(request, pk):
    return _notebook_action(request, pk, actions.start, "Starting {name} again: it joins the queue.",
                            "You cannot start this notebook: only its team's owners and members can, once it is "
                            "stopped.")


@login_required
@require_POST
def job_exempt_idle(request, pk):
    """Exempt the job from idle-GPU reclaim with the reason typed (owners where allowed,
    quota managers); the reason is kept, audited and on the timeline."""
    job = _job(request, pk)
    reason = request.POST.get("reason", "")
    try:
        IdleWatch.exempt(job, request.user, reason, IdlePolicy.objects.rules(job.team, job.flavor))
        messages.success(request, f"{job.name} is exempt from idle reclaim.")
    except ValidationError as err:
        messages.error(request, " ".join(" ".join(errors) for errors in err.message_dict.values()))
    return redirect(reverse("jobs:detail", args=[job.pk]))


@login_required
@require_POST
def job_submit_draft(request, pk):
    """Send a draft to the cluster, with the checks a new submission gets."""
    job = _job(request, pk)
    try:
        submitted = actions.submit_draft(job, request.user)
    except PermissionDenied:
        if job.state == Job.State.DRAFT:
            raise
        submitted = False
    except ValidationError as err:
        said = " ".join(" ".join(errors) for errors in err.message_dict.values())
        messages.error(request, f"The draft was not submitted: {said} Clone it into a new job to change it.")
        return redirect(reverse("jobs:detail", args=[job.pk]))
    if submitted:
        messages.success(request, f"Submitted {job.name} to {job.team.slug}.")
    else:  # submitted (or cancelled) meanwhile, by someone else or another tab
        job.refresh_from_db(fields=["state"])
        messages.info(request, f"{job.name} is already {job.get_state_display().lower()}.")
    return redirect(reverse("jobs:detail", args=[job.pk]))
