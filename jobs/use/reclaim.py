"""Idle-GPU reclaim: the worker's sweep (Celery beat, every ``IDLE_GPU_SWEEP_SECONDS``).

For each running job its policy watches (``quotas.models.idle``: the settings' defaults, the
flavor's, a team's override), the sweep reads what its GPUs did (`jobs.use.idle`, one range
query for all jobs) and moves it on:

1. idle for the policy's idle time -> warned once (the timeline, email and webhook through
   notifications, the job page's banner saying when it will be reclaimed);
2. busy again before the grace ends -> the warning is withdrawn (on the timeline);
3. still idle when the grace ends -> reclaimed: its workload is stopped the way its
   scheduler documents it (below) and the job ends in its own state, ``reclaimed``, with
   its idle GPU-hours.

Missing or stale metrics never reclaim anything: a job whose GPUs did not all report in
the latest window, or every job when Prometheus cannot be asked, is paused (the job page
and the console say why), and a gap in the metrics during the grace restarts the grace.

How a workload is stopped, per kind:
- Kueue training: the Workload's ``spec.active: false``, applied by our field manager on
  that field alone (Kueue then evicts it and suspends the batch Job, whose pods go); never
  ``spec.suspend`` on the batch Job, which is Kueue's after creation (`cluster.fields`);
- Volcano gang: a ``bus.volcano.sh/v1alpha1`` Command with the action ``AbortJob`` aimed
  at the Volcano Job (what ``vcctl job suspend`` sends): Volcano kills its pods and keeps
  the Job ``Aborted``;
- a notebook (a stoppable kind, `WorkKind.stoppable`): stopped, not ended: the job
  becomes ``stopped`` and its StatefulSet is applied at 0 replicas (its pod goes, its volumes
  stay); started again it is watched afresh. A notebook that has run its lifetime (its max
  runtime since it was last admitted) is stopped the same way, at every sweep, with or
  without metrics;
- inference: exempt. A server's GPUs wait for traffic by design, and KEDA or the HPA
  scales it; reclaiming it would take a service down.

Each kind says how in its module (`Integration.stop`, an optional capability, and
`WorkKind.idle_words` for those without one); this sweep asks it.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from cluster import TransientError
from cluster.prometheus import prometheus_from_settings
from core.reconcile import RETRY_POLICY, NoCluster, current_cluster
from quotas.models import IdlePolicy, say_seconds
from workloads.kinds import KINDS, NotStopped, for_job, integrations

from ..lifecycle import HOLDING_QUOTA, State
from ..models import RETAIN_FINISHED, Job
from ..models.idle import IdleWatch
from . import idle

log = logging.getLogger(__name__)

# The reason of a notebook stopped at the end of its lifetime.
LIFETIME_OVER = "LifetimeOver"
# What the console shows of the last sweep (`status()`).
STATUS_KEY = "jobs:idle-sweep"
LOCK_KEY = "jobs:idle-sweep:lock"


# The job kinds the sweep watches: those that can be stopped on some scheduler.
WATCHED_KINDS = sorted(kind.name for kind in KINDS if kind.reclaimable)


def _stop_rights() -> dict[tuple[str, str], set[str]]:
    """What stopping takes on the cluster, (API group, resource) -> verbs, over every kind's stop."""
    rights: dict[tuple[str, str], set[str]] = {}
    for integration in integrations():
        for key, verbs in integration.stop_rights.items():
            rights.setdefault(key, set()).update(verbs)
    return rights


# Granted to the platform by `gpuplatform.rbac`.
RIGHTS = _stop_rights()


def reclaimable(job: Job) -> bool:
    """Kinds whose workloads the sweep can stop on the job's scheduler; inference is exempt (see the
    module docstring)."""
    return job.kind in WATCHED_KINDS and for_job(job).stop is not None


def stop(cluster, job: Job, watch: IdleWatch, now) -> None:
    """Stop a reclaimed job's workload; raises ``TransientError`` when the cluster cannot be
    asked now."""
    try:
        for_job(job).stop(cluster, job)
    except NotStopped as err:
        log.info("reclaimed job %s: %s; nothing to stop", job.pk, err)
    watch.stopped(now)


# --- the sweep -------------------------------------------------------------------------------
def _lookback(rules, watch: IdleWatch | None, now) -> int:
    seconds = rules.idle_after_seconds + rules.grace_seconds + 2 * settings.IDLE_GPU_WINDOW_SECONDS
    if watch is not None and watch.grace_from is not None:
        seconds = max(seconds, int((now - watch.grace_from).total_seconds()) + rules.idle_after_seconds
                      + 2 * settings.IDLE_GPU_WINDOW_SECONDS)
    return seconds


def _stop_the_unstopped(cluster, now):
    """Stop the reclaimed jobs whose workload was not stopped (recorded before the stop joined
    the record's transaction, `_recorded_with_the_stop`)."""
    for job in (Job.objects.filter(state=State.RECLAIMED, idle_watch__stopped_at__isnull=True,
                                   finished_at__gte=now - RETAIN_FINISHED).select_related("team", "flavor", "idle_watch")):
        try:
            stop(cluster, job, job.idle_watch, now)
        except TransientError:
            log.warning("reclaimed job %s: not stopped yet; the next sweep tries again", job.pk, exc_info=True)


def _stop_past_their_lifetime(cluster, now):
    """Stop the notebooks past their lifetime, metrics or not."""
    for job in Job.objects.filter(kind__in=WATCHED_KINDS, state__in=HOLDING_QUOTA, max_runtime_seconds__isnull=False,
                                  run_admitted_at__isnull=False).select_related("team", "flavor", "priority"):
        if job.lifetime_over(now):
            _recorded_with_the_stop(lambda job=job: job.stop(reason=LIFETIME_OVER, at=now, message=(
                f"Stopped: it ran its lifetime of {say_seconds(job.max_runtime_seconds)}; its volumes are kept. "
                "Start it again when you need it.")), lambda job=job: for_job(job).stop(cluster, job), job)


def sweep_idle_jobs(cluster, prometheus, now=None) -> dict:
    """One sweep (see the module docstring); returns what it did, counted."""
    now = now or timezone.now()
    # 0. reclaimed jobs whose workload was not stopped, 0b. notebooks past their lifetime.
    _stop_the_unstopped(cluster, now)
    _stop_past_their_lifetime(cluster, now)
    # 1. the running jobs a policy watches, 2. what their GPUs did, 3. each moved on.
    jobs = [job for job in Job.objects.filter(state=State.RUNNING, kind__in=WATCHED_KINDS)
            .select_related("team", "flavor", "idle_watch").order_by("pk") if reclaimable(job)]
    rules = IdlePolicy.objects.rules_for((job.team, job.flavor) for job in jobs)
    watched = []
    for job in jobs:
        watch = getattr(job, "idle_watch", None)
        if rules[(job.team_id, job.flavor_id)].watches and not (watch and watch.is_exempt):
            watched.append(job)
    counts = {"watched": len(watched), "paused": 0, "warned": 0, "cleared": 0, "reclaimed": 0}
    if not watched:
        _remember(now, counts, {})
        return counts
    readings = idle.measure(
        prometheus, watched, now=now.timestamp(), window_seconds=settings.IDLE_GPU_WINDOW_SECONDS,
        lookback_seconds={job.pk: _lookback(rules[(job.team_id, job.flavor_id)], getattr(job, "idle_watch", None), now)
                          for job in watched},
        thresholds={job.pk: idle.threshold_percent(rules[(job.team_id, job.flavor_id)]) for job in watched})
    reads = []
    for job in watched:
        policy, reading = rules[(job.team_id, job.flavor_id)], readings[job.pk]
        watch = getattr(job, "idle_watch", None) or IdleWatch.objects.get_or_create(job=job)[0]
        watch.checked_at, watch.idle_seconds, watch.paused_reason = now, reading.idle_seconds, reading.paused[:300]
        reads.append(watch)
        if not reading.known:
            counts["paused"] += 1
            continue
        moved = _move(cluster, job, watch, policy, reading, now)
        if moved:
            counts[moved] += 1
    IdleWatch.objects.bulk_update(reads, ["checked_at", "idle_seconds", "paused_reason"])
    _remember(now, counts, Counter(reading.paused for reading in readings.values()))
    return counts


def _move(cluster, job: Job, watch: IdleWatch, policy, reading: idle.Reading, now) -> str | None:
    """Warn, withdraw, restart the grace or reclaim: what one known reading asks for."""
    if not watch.is_warned:
        if reading.idle_seconds >= policy.idle_after_seconds:
            watch.warn(job, now, grace_seconds=policy.grace_seconds, threshold=policy.threshold_percent,
                       reclaims=policy.reclaims)
            return "warned"
        return None
    if reading.last_busy is not None and reading.last_busy > watch.warned_at.timestamp():
        watch.clear(job, now)
        return "cleared"
    if reading.run_start is not None and reading.run_start > watch.grace_from.timestamp():
        # The metrics had a gap since the grace began (no busy window): it counts again.
        watch.restart_grace(datetime.fromtimestamp(reading.run_start, tz=UTC), grace_seconds=policy.grace_seconds)
        return None
    if not policy.reclaims or watch.reclaim_at is None or now < watch.reclaim_at:
        return None
    if job.work_kind.stoppable:  # a notebook: stopped and kept, not ended
        return "reclaimed" if _recorded_with_the_stop(
            lambda: watch.stopped_idle(job, now, threshold=policy.threshold_percent),
            lambda: for_job(job).stop(cluster, job), job, watch) else None
    # The state first, then the cluster: stopped first, the watcher could read the eviction
    # as a preemption and send the job back to a queue its inactive Workload never leaves.
    return "reclaimed" if _recorded_with_the_stop(
        lambda: watch.reclaimed(job, now, threshold=policy.threshold_percent),
        lambda: stop(cluster, job, watch, now), job, watch) else None


def _recorded_with_the_stop(record, stop_it, job: Job, watch: IdleWatch | None = None) -> bool:
    """``record`` the job's end (or its stop), then ``stop_it`` on the cluster, in one
    transaction: its GPUs are charged until the cluster was asked to give them back. When the
    cluster cannot be asked now (the API server is away), nothing is recorded, the job keeps
    running on its warning, and the next sweep tries again. While the stop is sent the job's
    row stays locked, so the watcher, seeing the eviction at once, cannot record a preemption
    first: its compare-and-swap waits for this one, and loses. Returns whether it moved."""
    try:
        with transaction.atomic():
            if not record():
                return False  # it moved on meanwhile (finished, cancelled)
            stop_it()
    except TransientError:
        log.warning("job %s: the cluster could not be asked to stop it; nothing recorded, the next sweep "
                    "tries again", job.pk, exc_info=True)
        job.refresh_from_db()
        if watch is not None:
            watch.refresh_from_db()
        return False
    return True


def _remember(now, counts: dict, reasons: Counter | dict) -> None:
    """Keep the sweep's counts and its readings' reasons ("" for a job it could judge)."""
    paused = {reason: n for reason, n in reasons.items() if reason}
    why = next(iter(paused)) if len(paused) == 1 and not reasons.get("") else ""
    cache.set(STATUS_KEY, {**counts, "at": now.isoformat(), "why_paused": why, "paused_because": paused},
              timeout=24 * 3600)


def status() -> dict | None:
    """The last sweep, for the console: when, how many jobs watched, paused, warned,
    withdrawn and reclaimed, why every job was paused if one reason paused them all
    (``why_paused``), and how many jobs each reason paused (``paused_because``)."""
    return cache.get(STATUS_KEY)


@dataclass(frozen=True)
class Paused:
    """The console's line when idle reclaim is paused: ``text`` says for how many jobs and
    why; ``at`` is when the sweep that said so ran."""

    text: str
    at: datetime


# The console's line leaves out what only waits for time to pass: a job younger than one
# window is paused, but no metric is missing.
NOT_A_PROBLEM = {idle.TOO_YOUNG}


def late_after() -> timedelta:
    """A sweep older than this means the beat (or its worker) stopped sweeping."""
    return timedelta(seconds=max(60, 4 * settings.IDLE_GPU_SWEEP_SECONDS))


def paused(now=None) -> Paused | None:
    """Why idle reclaim is paused now, for the quota console (None when it is not): the last
    sweep's jobs paused by missing or stale metrics and each reason, or no sweep lately."""
    last = status()
    if not last or not last.get("watched"):
        return None
    now = now or timezone.now()
    at = datetime.fromisoformat(last["at"])
    if now - at > late_after():
        return Paused("Idle-GPU reclaim is paused: no idle sweep has run lately (is the worker's beat running?), "
                      "so nothing is warned or reclaimed.", at)
    reasons = Counter({reason: n for reason, n in (last.get("paused_because") or {}).items()
                       if reason not in NOT_A_PROBLEM})
    if not reasons:
        return None
    count, watched = sum(reasons.values()), last["watched"]
    which = f"every job it watches ({watched})" if count == watched else f"{count} of the {watched} jobs it watches"
    if len(reasons) == 1:
        why = next(iter(reasons))
    else:
        why = "; ".join(f"{reason.rstrip('.')} ({n} job{'' if n == 1 else 's'})"
                        for reason, n in reasons.most_common()) + "."
    return Paused(f"Idle-GPU reclaim is paused for {which}: {why}", at)


@shared_task(**RETRY_POLICY)
def sweep_idle(self) -> dict:
    # One sweep at a time: a slow Prometheus must not let two sweeps warn or reclaim twice.
    if not cache.add(LOCK_KEY, "1", timeout=max(60, 4 * settings.IDLE_GPU_SWEEP_SECONDS)):
        return {"skipped": "another idle sweep is running"}
    try:
        try:
            cluster = current_cluster()
        except NoCluster:
            return {"skipped": "no cluster"}
        return sweep_idle_jobs(cluster, prometheus_from_settings())
    finally:
        cache.delete(LOCK_KEY)
