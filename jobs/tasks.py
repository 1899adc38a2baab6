"""Reconcile a job's workload objects onto the cluster; cancel jobs."""

import logging

from celery import shared_task

from cluster import PermanentError
from core.ownership import job_selector
from core.reconcile import RETRY_POLICY, NoCluster, Outcome, current_cluster, sync
from quotas.tasks import ensure_team_quotas

from .lifecycle import State
from .manifests import JOB_KINDS, job_fields, render_job
from .models import Job

log = logging.getLogger(__name__)


def sync_job(cluster, job: Job) -> Outcome:
    """1. make sure the team's namespace and queues exist, 2. apply or remove the job's
    objects as its state says, never taking back what Kueue, the HPA or Volcano own,
    3. record the move the apply implies, and any field the cluster keeps as created."""
    plan = job.cluster_plan()
    if plan is Job.Plan.LEAVE:
        return Outcome()
    if job.team.owns_system_namespace:  # never touch workloads in the cluster's own namespaces
        message = f"The team's namespace {job.team.namespace_name} is a system namespace."
        if job.state == State.CANCELLING:
            job.transition(State.CANCELLED, reason="Cancelled", message=message)
        elif not job.is_final:
            job.transition(State.FAILED, reason="Rejected", message=message)
        return Outcome()
    outcome = Outcome()
    desired = render_job(job) if plan is Job.Plan.APPLY else []
    try:
        if job.state == State.SUBMITTED:
            # A new job needs its team's namespace and queues: nothing to do when the watch
            # cache shows them in place, else the team's quotas are synced.
            outcome += ensure_team_quotas(cluster, job.team, job.flavor)
        outcome += sync(cluster, desired, selector=job_selector(job.pk), kinds=JOB_KINDS, rules=job_fields(job))
    except PermanentError as err:
        job.transition(State.FAILED, reason="Rejected", message=f"The cluster refused the job: {err}")
        return outcome
    if outcome.drift:
        job.note("KeptAsCreated", (
            "The cluster keeps this job as it was created: " + "; ".join(outcome.drift)
            + " can no longer change, and the platform now renders it differently. "
            "The job runs as submitted; submit it again to get the new settings."))
    if job.state == State.SUBMITTED:
        job.transition(State.QUEUED, reason="Queued", message="Waiting for the scheduler.")
    elif job.state == State.CANCELLING:
        job.transition(State.CANCELLED, reason="Cancelled", message="Stopped and removed from the cluster.")
    return outcome


@shared_task(**RETRY_POLICY)
def reconcile_job(self, job_id: int) -> int:
    job = Job.objects.select_related("team", "flavor", "priority").filter(pk=job_id).first()
    if job is None:
        return 0
    try:
        cluster = current_cluster()
    except NoCluster:
        return 0
    return sync_job(cluster, job).writes
