"""Signal receivers of the jobs app, connected in ``JobsConfig.ready``.

A job that ends makes room under its submitter's cap (`jobs.queue.caps`): the person's jobs that
waited at it are let go on commit, without waiting for the sweep. A job that is admitted or
ends changes its flavor's reservation (`jobs.outlook.reservations`): the team's jobs kept back behind
it are looked at again on commit.
"""

from django.db.models.signals import post_save

from . import actions
from .lifecycle import FINAL_STATES, State
from .models import Job, JobEvent
from .outlook.reservations import BEHIND

MOVES_A_RESERVATION = FINAL_STATES | {State.ADMITTED}


def on_job_event(sender, instance: JobEvent, created: bool, raw: bool = False, **kwargs) -> None:
    if not created or raw or instance.from_state == instance.to_state:
        return
    job = instance.job
    if instance.to_state in MOVES_A_RESERVATION and job.flavor.backfill and Job.objects.filter(
            BEHIND, team_id=job.team_id, flavor_id=job.flavor_id).exists():
        actions.release_reserved_soon(job)
    if instance.to_state not in FINAL_STATES:
        return
    if job.submitter_id and Job.objects.at_cap().filter(
            team_id=job.team_id, submitter_id=job.submitter_id, flavor_id=job.flavor_id).exists():
        actions.release_soon(job)


def connect() -> None:
    post_save.connect(on_job_event, sender=JobEvent, dispatch_uid="jobs-release-at-cap")
