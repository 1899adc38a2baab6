"""Job state changes that must reach the cluster: change the rows, then enqueue the
reconcile once the transaction commits. Models hold the rules and never enqueue; views,
the API and commands call these."""

from django.db import transaction

from core.reconcile import enqueue

from .lifecycle import State
from .models import Job, Volume
from .models.idempotency import IdempotencyKey
from .outlook import reservations
from .tasks import reconcile_job, reconcile_team_volumes, release_at_cap, release_reserved


def reconcile_soon(job: Job) -> None:
    enqueue(reconcile_job, job.pk)


def submit(*, team, submitter, **fields) -> Job:
    """The one way a job enters the platform, for the web UI and the API alike."""
    with transaction.atomic():
        return _submit(team=team, submitter=submitter, **fields)


def _submit(*, team, submitter, **fields) -> Job:
    job = Job.objects.submit(team=team, submitter=submitter, hold=reservations.verdict, **fields)
    reconcile_soon(job)
    return job


def submit_once(*, key: str, digest: str, token, team, submitter, **fields) -> tuple[int, Job | None]:
    """Submit unless `key` already did: (job id, the job when this call created it).

    Raises `jobs.models.idempotency.KeyConflict` when the key was used for another request."""
    with transaction.atomic():
        record = IdempotencyKey.objects.claim(user=submitter, token=token, key=key, digest=digest)
        if record is not None:
            # Not `submit`: its savepoint would guard nothing here, where any error
            # rolls back the whole transaction, key included.
            record.job = _submit(team=team, submitter=submitter, **fields)
            record.save(update_fields=["job"])
            return record.job_id, record.job
    return IdempotencyKey.objects.replayed_job_id(user=submitter, token=token, key=key, digest=digest), None


def submit_draft(job: Job, user) -> bool:
    """Send a draft on for `user` (see `Job.submit_draft`), reconciled once committed."""
    with transaction.atomic():
        changed = job.submit_draft(user, hold=reservations.verdict)
        if changed:
            reconcile_soon(job)
    return changed


def cancel(job: Job, user) -> bool:
    """Stop the job for `user` (see `Job.request_cancel`); the reconciler removes its
    objects. Returns whether this call changed it."""
    with transaction.atomic():
        changed = job.request_cancel(user)
        if changed and job.state == State.CANCELLING:
            reconcile_soon(job)
    return changed


def stop(job: Job, user) -> bool:
    """Stop a notebook for `user` (`Job.request_stop`): its StatefulSet goes to 0 replicas, its
    GPUs go back, its volumes stay. Returns whether this call changed it."""
    with transaction.atomic():
        changed = job.request_stop(user)
        if changed:
            reconcile_soon(job)
    return changed


def stop_for(job: Job, *, reason: str, message: str) -> bool:
    """Stop a notebook for the platform (its idle GPUs, its lifetime; `jobs.use.reclaim`)."""
    with transaction.atomic():
        changed = job.stop(reason=reason, message=message)
        if changed:
            reconcile_soon(job)
    return changed


def start(job: Job, user) -> bool:
    """Queue a stopped notebook again for `user` (`Job.request_start`: it must fit the team's
    own quota now); its StatefulSet goes back to one replica and Kueue admits it again."""
    with transaction.atomic():
        changed = job.request_start(user)
        if changed:
            reconcile_soon(job)
    return changed


def release_soon(job: Job) -> None:
    """Once committed, let go the jobs of ``job``'s submitter that waited at their cap on its
    flavor and fit now (`jobs.queue.caps`): ``job`` ended and made room."""
    enqueue(release_at_cap, job.team_id, job.submitter_id, job.flavor_id)


def release_reserved_soon(job: Job) -> None:
    """Once committed, let go the jobs of ``job``'s team on its flavor kept back behind a
    reservation that may go now (`jobs.outlook.reservations`): ``job`` was admitted or ended."""
    enqueue(release_reserved, job.team_id, job.flavor_id)


def caps_changed(team) -> None:
    """Once committed, let go the team's jobs waiting at caps that fit under the caps now."""
    enqueue(release_at_cap, team.pk)


def save_cap(cap, by) -> None:
    """Set a per-person cap for ``by`` (`MemberCap.save_by`); the jobs it now lets through go."""
    with transaction.atomic():
        cap.save_by(by)
        caps_changed(cap.team)


def remove_cap(cap, by) -> None:
    with transaction.atomic():
        cap.remove_by(by)
        caps_changed(cap.team)


def create_volume(*, team, user, **fields) -> Volume:
    """A team's new volume (`Volume.objects.add`); its claim follows after commit."""
    volume = Volume.objects.add(team=team, user=user, **fields)
    enqueue(reconcile_team_volumes, team.pk)
    return volume


def delete_volume(volume: Volume, user) -> None:
    """Delete a volume no live job mounts (`volume.delete_by`); its claim goes after commit."""
    volume.delete_by(user)
    enqueue(reconcile_team_volumes, volume.team_id)
