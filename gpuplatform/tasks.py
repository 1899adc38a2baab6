"""The periodic sweep: re-reconcile everything so lost messages and hand edits heal."""

import logging

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from core.ownership import JOB_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, job_selector
from core.reconcile import RETRY_POLICY, NoCluster, current_cluster
from jobs.manifests import JOB_KINDS
from jobs.models import RETAIN_FINISHED, Job
from jobs.tasks import SWEEP_BATCH, reconcile_jobs
from notifications.actions import notice_due
from quotas.actions import apply_grants
from quotas.tasks import reconcile_cluster_objects, reconcile_team_quotas
from tenants.models import Team
from tenants.tasks import reconcile_team

from . import heal  # noqa: F401 - registers the watch cache's hook and its task

log = logging.getLogger(__name__)
ORPHAN_JOB_OBJECTS = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{JOB_LABEL}"


@shared_task(**RETRY_POLICY)
def sweep(self) -> dict:
    """0. grants that start or end change their quotas (with or without a cluster), and
    people hear of grants and long waits, 1. cluster-wide objects, 2. every team and its
    quotas, 3. every
    live job (in batches of `SWEEP_BATCH` a task), 4. delete job objects whose job is gone or finished
    long ago."""
    now = timezone.now()
    failures: list[str] = []  # quotas whose grants could not be applied: logged, retried next sweep
    apply_grants(now, failures=failures)
    try:
        notice_due(now)  # notifications: grants starting or ending soon or ended, jobs waiting long
    except Exception:  # noqa: BLE001 - a word that cannot be said must not stop the reconciles
        log.exception("notifications failed; the sweep goes on and the next one tries again")
    try:
        cluster = current_cluster()
    except NoCluster:
        return {"skipped": "no cluster", "grant_failures": failures}
    # A sweep's message that waited past the next sweep is replaced by that sweep's own, so
    # it expires: after a broker or API-server outage the queue drains instead of piling up.
    fresh = {"expires": settings.SWEEP_INTERVAL_SECONDS}
    reconcile_cluster_objects.apply_async(**fresh)
    teams = list(Team.objects.values_list("pk", flat=True))
    for team_id in teams:
        reconcile_team.apply_async((team_id,), **fresh)
        reconcile_team_quotas.apply_async((team_id,), **fresh)
    live = list(Job.objects.live().exclude(state=Job.State.DRAFT).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(live), SWEEP_BATCH):
        reconcile_jobs.apply_async((live[start:start + SWEEP_BATCH],), **fresh)
    pruned = prune_orphan_jobs(cluster)
    return {"teams": len(teams), "jobs": len(live), "pruned": pruned, "grant_failures": failures}


def prune_orphan_jobs(cluster) -> int:
    """Remove the objects of jobs that are gone, cancelled, or finished long ago.

    A job still cancelling is left to its own reconcile, which removes its objects and
    records the end in the same step (accounting charges until then).

    Only jobs older than the snapshot taken first are candidates, so a job submitted while
    the sweep runs is never mistaken for an orphan.
    """
    newest = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    keep = set(
        Job.objects.filter(pk__lte=newest).live().values_list("pk", flat=True)
    ) | set(
        Job.objects.filter(kind=Job.Kind.TRAINING, finished_at__gte=timezone.now() - RETAIN_FINISHED)
        .values_list("pk", flat=True)
    )
    on_cluster = {
        int(obj["metadata"]["labels"][JOB_LABEL])
        for obj in cluster.snapshot(ORPHAN_JOB_OBJECTS, JOB_KINDS).items()  # the watch cache, if any
        if obj["metadata"]["labels"][JOB_LABEL].isdigit()
    }
    victims = sorted(job_id for job_id in on_cluster - keep if job_id <= newest)
    return sum(len(cluster.prune(job_selector(job_id), [], JOB_KINDS)) for job_id in victims)
