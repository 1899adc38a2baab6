"""The status watcher: watch the objects we own and move each Job through its lifecycle.

One informer per watched kind (`cluster.informer`, on a thread of its own) keeps an
in-memory copy of what the cluster shows, through `slim`; every event marks the job it
belongs to as dirty; the main loop
re-reads dirty jobs from the database, maps the cached objects to an observation
(``jobs.status``) and writes it only when something changed. Watches resume from their
last resourceVersion and relist after 410 Gone (``cluster.watch``), failures are retried
with the informer's one backoff, and a periodic
resync re-checks every live job, so API server restarts and disconnects lose nothing.
Jobs being cancelled are looked at in every loop: their pods give their GPUs back as they
go, and the cancel ends once nothing of the job is left (`_give_back`, `jobs.tasks.end_when_gone`).
"""

import itertools
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import replace

from django.db import connections
from django.dispatch import Signal

from cluster import ClusterError
from cluster.informer import Informer
from core.metrics import WATCH_RESTARTS, WATCHER_LAG, WATCHER_TRANSITIONS
from core.ownership import JOB_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE
from quotas.models import Quota
from workloads import Kind, kueue
from workloads.kinds import integrations

from ..actions import reconcile_soon
from ..lifecycle import NOT_STARTED, State
from ..manifests import object_name
from ..models import Job, Preemption
from ..status import labels_due, leaving_gpus, nothing_left, observe, workload_kinds
from ..tasks import end_when_gone
from .cache import EVENT, JOBS, OWNERS, POD, UIDS, job_key, owner_keys, slim, uid_key
from .logs import failures_of, keep_failed

log = logging.getLogger(__name__)

OURS = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
# The watcher reads Warnings only (`_record_warning`): the API server filters the rest out,
# a pod's Normal Events (Scheduled, Created, Started, ...) and Kueue's and Volcano's.
WARNINGS_ONLY = "type=Warning"
# What each workload kind watches (`workloads.kinds`): its workloads carry our labels; the
# schedulers' bookkeeping objects (Kueue Workloads, Volcano PodGroups) do not and are found
# through their owner, our workload. Events are found through the object they are about.
WATCHED: list[tuple[Kind, str | None]] = [
    (kind, OURS if labelled else None) for workload in integrations() for kind, labelled in workload.watched
] + [(POD, OURS), (EVENT, None)]
LABELLED = [kind for kind, selector in WATCHED if selector]
# How many objects' last Warning the watcher remembers: enough for every pod of a busy
# cluster, bounded so a stream of Warnings about short-lived pods cannot grow it forever.
# The oldest are forgotten first; a job still waiting gets fresh Warnings anyway.
MAX_WARNINGS = 10_000
# A change comes in bursts (a pod, its Workload and its Job move together): the watcher waits
# this long after the first mark before it reads the marked jobs, so a burst costs one
# evaluation (two queries) instead of one per event. It adds at most this to the status lag.
GATHER_SECONDS = 0.2
# How long a watch that keeps failing waits at most before it tries again: short, because
# every second the watcher is away after an API-server restart is status lag (budget p99
# 10 s, `make soak`); the informers' own cap (30 s) suits the worker's cache, not this.
RETRY_MAX_SECONDS = 5
# Sent by `manage.py watch_cluster` as its watcher starts watching: with leader election, in
# the one copy holding the Lease. Work that must run once for the platform, not once per
# worker process, hooks in here (the heal, `gpuplatform.heal`); a receiver hands what it
# starts back to `watcher.on_stop`.
leading = Signal()  # sender=StatusWatcher, watcher=the StatusWatcher


class _Seen:
    """One job's objects in the watcher's cache (`workloads.Seen`); read under its lock."""

    def __init__(self, watcher: "StatusWatcher", job: Job, ceilings: "Ceilings | None" = None):
        self._watcher, self._job, self._ceilings = watcher, job, ceilings
        self._namespace, self._name = job.team.namespace_name, object_name(job)

    def named(self, kind: Kind) -> dict | None:
        return self._watcher._cache[kind].get((self._namespace, self._name))

    def owned(self, kind: Kind) -> dict | None:
        return self._watcher._owned_by(kind, self._namespace, self._name)

    def pods(self) -> list[dict]:
        return self._watcher._pods_of(self._namespace, self._job.pk)

    def ceiling_gpus(self) -> int | None:
        ceilings = self._ceilings if self._ceilings is not None else Ceilings([self._job])
        return ceilings.of(self._job)


class Ceilings:
    """The most GPUs each team can use on each flavor, for a batch of jobs: read in one query
    the first time a job's observer asks (a Volcano gang, to tell whether it can ever fit),
    never for a batch whose observers do not."""

    def __init__(self, jobs):
        self._pairs = {(job.team_id, job.flavor_id) for job in jobs}
        self._by_pair: dict[tuple[int, int], int] | None = None

    def of(self, job: Job) -> int | None:
        if self._by_pair is None:
            self._by_pair = gpu_ceilings(self._pairs)
        return self._by_pair.get((job.team_id, job.flavor_id))


def gpu_ceilings(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(team id, flavor id) -> the most GPUs the team can use on the flavor, for ``pairs``."""
    if not pairs:
        return {}
    quotas = Quota.objects.filter(team_id__in={t for t, _ in pairs}, flavor_id__in={f for _, f in pairs})
    return {(q.team_id, q.flavor_id): q.ceiling_gpus for q in quotas.with_cohort_lendable()
            if (q.team_id, q.flavor_id) in pairs}


class StatusWatcher:
    def __init__(self, cluster, *, resync_seconds: float = 60, retry_seconds: float = 2,
                 max_warnings: int = MAX_WARNINGS, gather_seconds: float = GATHER_SECONDS):
        self.cluster = cluster
        self.resync_seconds = resync_seconds
        self.gather_seconds = gather_seconds
        self.retry_seconds = retry_seconds
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._dirty: set[int] = set()
        self._dirty_since: float | None = None  # when the oldest unevaluated mark was made (lag)
        self._wake = threading.Event()
        self._informers = {kind: self._informer(kind, selector) for kind, selector in WATCHED}
        # Views into the informers' stores, so evaluating one job does not look through every
        # object: (apiVersion, kind) -> (namespace, name) -> object; (apiVersion, kind) ->
        # (namespace, owner name) -> keys of the objects it owns; (namespace, job label) ->
        # keys of the job's pods (dicts as ordered sets). Events are not stored (`_record`).
        self._cache = {kind: informer.store.objects for kind, informer in self._informers.items()}
        self._owners = {kind: informer.store.indexes[OWNERS] for kind, informer in self._informers.items()}
        self._job_pods = self._informers[POD].store.indexes[JOBS]
        # (kind, namespace, name) -> (sequence, "Reason: message") of the last Warning about
        # it, least recently warned first (at most `max_warnings`)
        self._warnings: OrderedDict[tuple[str, str, str], tuple[int, str]] = OrderedDict()
        self.max_warnings = max_warnings
        self._sequence = itertools.count()
        self.transitions = 0
        # Failed container runs whose last lines are still to be kept with their job (read in
        # the main loop, outside the lock: a pod that failed may be gone in seconds), and the
        # runs already handled (at most `max_warnings`, oldest forgotten first).
        self._tails_due: dict[tuple, tuple[int, dict, list]] = {}
        self._tails_seen: OrderedDict[tuple, None] = OrderedDict()
        # What follow-up work last saw of a job (`_changed`): a preemption recorded, labels
        # found in place; at most `max_warnings` jobs, least recently evaluated forgotten first.
        self._followed: OrderedDict[tuple, object] = OrderedDict()
        # job id -> {eviction time: Preempted} as each Workload event showed them: Kueue may
        # admit a preempted workload again before the job is evaluated, and every preemption
        # is recorded and charged all the same (`_record_preemptions`).
        self._preemptions_due: dict[int, dict] = {}
        self._on_stop: list = []  # what `leading`'s receivers started, stopped with the watcher

    # --- watching ---------------------------------------------------------------------------
    def _informer(self, kind: tuple[str, str], selector: str | None) -> Informer:
        indexers = {OWNERS: owner_keys, UIDS: uid_key}
        if selector is not None:  # labelled by us: found by job
            indexers[JOBS] = job_key

        def event(event_type: str, obj: dict) -> None:
            self._record(kind, event_type, obj)  # looked up at each event: tests listen in

        def failed(err: ClusterError) -> None:
            WATCH_RESTARTS.labels(kind[1]).inc()

        return Informer(
            self.cluster, *kind, on_event=event, on_error=failed, selector=selector,
            field_selector=WARNINGS_ONLY if kind == EVENT else None, transform=slim, indexers=indexers,
            lock=self._lock, stopping=self.stop_event, logger=log, name="status watcher",
            retry=self.retry_seconds, retry_max=max(self.retry_seconds, RETRY_MAX_SECONDS))

    def _record(self, kind, event: str, obj: dict) -> None:
        if kind == EVENT:
            self._record_warning(event, obj)
            return
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self._lock:
            self._informers[kind].store.apply(event, obj)
            if event == "DELETED":
                self._warnings.pop((kind[1], *key), None)  # nothing left to warn about
            job_id = (meta.get("labels") or {}).get(JOB_LABEL)
            if job_id is None:
                job_id = self._owner_job(key[0], meta.get("ownerReferences") or [])
            if job_id is not None and str(job_id).isdigit():
                self._dirty.add(int(job_id))
                self._dirty_since = self._dirty_since or time.monotonic()
                self._wake.set()
                if kind == POD and event != "DELETED":
                    self._note_failures(int(job_id), obj)
                elif kind == kueue.WORKLOAD and event != "DELETED" and (preempted := kueue.preemption_of(obj)):
                    self._preemptions_due.setdefault(int(job_id), {})[preempted.at] = preempted

    def _note_failures(self, job_id: int, pod: dict) -> None:
        """Mark the failed container runs of ``pod`` not handled yet (under the lock)."""
        meta = pod["metadata"]
        for failure in failures_of(pod):
            key = (meta.get("uid") or meta.get("name"), failure.container, failure.finished_at)
            if key in self._tails_seen or key in self._tails_due:
                continue
            self._tails_due[key] = (job_id, pod, [failure])

    def keep_failed_tails(self) -> int:
        """Keep the last lines of the failed runs marked since the last call (`jobs.watch.logs`)."""
        with self._lock:
            due, self._tails_due = self._tails_due, {}
        kept = 0
        for key, (job_id, pod, failures) in due.items():
            try:
                kept += keep_failed(self.cluster, job_id, pod, failures)
            except Exception:  # a failed write must not stop the watcher; the run is not retried
                log.exception("keeping the log tail of pod %s failed", pod["metadata"].get("name"))
            with self._lock:
                self._tails_seen[key] = None
                while len(self._tails_seen) > self.max_warnings:
                    self._tails_seen.popitem(last=False)
        return kept

    def _record_warning(self, event: str, obj: dict) -> None:
        if event == "DELETED" or obj.get("type") != "Warning":
            return
        about = obj.get("involvedObject") or {}
        key = (about.get("kind", ""), about.get("namespace", ""), about.get("name", ""))
        with self._lock:
            # Kept by the object it is about: the pod may reach our cache after its event.
            self._warnings[key] = (next(self._sequence), f"{obj.get('reason', 'Warning')}: {obj.get('message', '')}")
            self._warnings.move_to_end(key)
            while len(self._warnings) > self.max_warnings:
                self._warnings.popitem(last=False)
            subject = self._cache.get((about.get("apiVersion", ""), key[0]), {}).get(key[1:])
            job_id = ((subject or {}).get("metadata", {}).get("labels") or {}).get(JOB_LABEL)
            if job_id is not None and str(job_id).isdigit():
                self._dirty.add(int(job_id))
                self._dirty_since = self._dirty_since or time.monotonic()
                self._wake.set()

    def _pods_of(self, namespace: str, job_id) -> list[dict]:
        pods = self._cache[POD]
        return [pods[key] for key in self._job_pods.get((namespace, str(job_id)), ())]

    def _last_warning(self, job: Job) -> str | None:
        namespace, name = job.team.namespace_name, object_name(job)
        keys = [("Job", namespace, name), ("Deployment", namespace, name)] + [
            ("Pod", namespace, pod_name) for _, pod_name in self._job_pods.get((namespace, str(job.pk)), ())
        ]
        found = [self._warnings[key] for key in keys if key in self._warnings]
        return max(found)[1] if found else None

    def _owner_job(self, namespace: str, owners: list[dict]) -> str | None:
        for owner in owners:
            kind = (owner.get("apiVersion", ""), owner.get("kind", ""))
            if kind not in LABELLED:
                continue
            parent = self._cache[kind].get((namespace, owner.get("name", "")))
            if parent is not None:
                return (parent["metadata"].get("labels") or {}).get(JOB_LABEL)
        return None

    # --- evaluating -------------------------------------------------------------------------
    def _owned_by(self, kind, namespace: str, owner_name: str) -> dict | None:
        for key in self._owners[kind].get((namespace, owner_name), ()):
            return self._cache[kind][key]
        return None

    def observe(self, job: Job, ceilings: Ceilings | None = None):
        seen = self._observe(job, ceilings)
        with self._lock:
            warning = self._last_warning(job)
        if seen is not None and warning and seen.state in NOT_STARTED:
            return replace(seen, message=f"{seen.message} Last warning from the cluster: {warning}")
        return seen

    def _observe(self, job: Job, ceilings: Ceilings | None = None):
        with self._lock:
            return observe(job, _Seen(self, job, ceilings))

    def evaluate(self, job_ids) -> int:
        """Bring the given jobs up to date with the cache; returns how many changed."""
        changed = 0
        # The submitter too: a job that starts or ends tells them (`notifications`), from this row.
        job_ids = set(job_ids)
        jobs = list(Job.objects.select_related("team", "flavor", "submitter", "priority").filter(pk__in=job_ids)
                    .live().exclude(state=State.DRAFT))
        with self._lock:  # a job that ended has no preemption left to charge
            for ended in job_ids - {job.pk for job in jobs}:
                self._preemptions_due.pop(ended, None)
        ceilings = Ceilings(jobs)
        for job in jobs:
            seen = self.observe(job, ceilings)
            if seen is None:
                changed += self._give_back(job)
                continue
            if job.observe(seen.state, reason=seen.reason, message=seen.message, gpus=seen.gpus, times=seen.times):
                changed += 1
                log.info("job %s: %s (%s)", job.pk, job.state, job.reason)
            job.record_progress(seen.progress)  # a TrainJob's trainer's own words, when it published any
            job.hear_kueue(seen.kueue_reason, seen.kueue_message)
            self._record_preemptions(job, seen)
            if self._labels_due(job):
                reconcile_soon(job)
        self.transitions += changed
        WATCHER_TRANSITIONS.inc(changed)
        return changed

    def _changed(self, key: tuple, value, *, remember: bool = True) -> bool:
        """Whether ``value`` differs from what was last remembered for ``key`` (then remembered
        unless told not to): follow-up work runs once per change, not at every evaluation and
        resync. Forgotten after a restart; the work is idempotent, so it runs once more."""
        last = self._followed.get(key, self._followed)  # the dict itself: nothing remembered
        if last == value:
            self._followed.move_to_end(key)
            return False
        if remember:
            self._followed[key] = value
            while len(self._followed) > self.max_warnings:
                self._followed.popitem(last=False)
        return True

    def _give_back(self, job: Job) -> int:
        """A job being cancelled whose workload is gone: its pods give its GPUs back as the
        garbage collector deletes them (`jobs.status.leaving_gpus`), so its GPU-hours end with
        its pods; once nothing of it is left in the cache, the cancel ends (`end_when_gone`,
        which lists to be sure). Not before every watch has listed: an empty cache proves nothing."""
        if job.state != State.CANCELLING or not self._listed():
            return 0
        with self._lock:
            seen = _Seen(self, job)
            gpus, left = leaving_gpus(job, seen), not nothing_left(self._objects_of(job), seen.pods())
        changed = int(job.give_back(gpus))
        if not left and end_when_gone(self.cluster, job):
            changed += 1
            log.info("job %s: %s (%s)", job.pk, job.state, job.reason)
        return changed

    def _objects_of(self, job: Job) -> list[dict]:
        """The job's objects that make its pods, in the cache (under the lock)."""
        key = (job.team.namespace_name, str(job.pk))
        return [self._cache[kind][found] for kind in workload_kinds(job) if kind in self._informers
                for found in self._informers[kind].store.by(JOBS, key)]

    def _listed(self) -> bool:
        return all(informer.synced.is_set() for informer in self._informers.values())

    def _cancelling(self) -> set[int]:
        """The jobs being cancelled, looked at in every loop (`run`): a cancel ends when nothing
        of it is seen left, which an event need not announce (a watcher restarted after the
        pods went, a job the reconcile found nothing of). None before every watch has listed."""
        if not self._listed():
            return set()
        return set(Job.objects.filter(state=State.CANCELLING).values_list("pk", flat=True))

    # --- the preemption contract (docs/preemption.md) -----------------------------------------
    def _job_of_uid(self, job_uid: str | None, workload_uid: str | None) -> Job | None:
        """Our job a scheduler names by its workload's UID (a batch Job) or by its Kueue
        Workload's (through its owner, our workload); None for a workload that is not ours."""
        job_id = None
        with self._lock:
            for kind, selector in WATCHED:
                uid = job_uid if selector else workload_uid
                if kind == EVENT or not uid:
                    continue
                for key in self._informers[kind].store.by(UIDS, uid):
                    meta = self._cache[kind][key]["metadata"]
                    job_id = ((meta.get("labels") or {}).get(JOB_LABEL) if selector
                              else self._owner_job(meta.get("namespace", ""), meta.get("ownerReferences") or []))
                if job_id is not None:
                    break
        if job_id is None or not str(job_id).isdigit():
            return None
        return Job.objects.select_related("team", "priority").filter(pk=int(job_id)).first()

    def _record_preemptions(self, job: Job, seen) -> None:
        """The preemption the job shows now (with its checkpoint), and every one its Workload's
        events showed since the last evaluation, even when Kueue admitted it again meanwhile."""
        with self._lock:
            due = self._preemptions_due.pop(job.pk, {})
        now = seen.preempted if seen.preempted is not None and job.state == State.PREEMPTED else None
        if now is not None and self._changed(("preempted", job.pk), (now.at, seen.checkpoint)):
            due[now.at] = now
        elif now is not None:
            due.pop(now.at, None)  # recorded already, with this checkpoint
        for at, preempted in sorted(due.items(), key=lambda item: item[0] or 0):
            by_job = self._job_of_uid(preempted.by_job_uid, preempted.by_workload_uid)
            Preemption.objects.record(job, at=at, reason=preempted.reason, by_job=by_job,
                                      checkpoint=seen.checkpoint if preempted is now else None)

    def _labels_due(self, job: Job) -> bool:
        """Whether the job's objects on the cluster carry other labels than it renders now
        (`jobs.status.labels_due`): a job whose class has a minimum runtime only."""
        if not job.minimum_runtime_seconds:
            return False
        # What the labels it renders depend on: checked again only when that changes.
        key, renders = ("labels", job.pk), (job.state, job.run_admitted_at, job.priority_id,
                                             job.is_protected_from_preemption())
        if not self._changed(key, renders, remember=False):
            return False
        namespace = job.team.namespace_name
        with self._lock:
            due = labels_due(job, lambda kind, name: self._cache.get(kind, {}).get((namespace, name)))
        if not due:  # in place: not looked at again until what they depend on changes
            self._changed(key, renders)
        return due

    def run(self) -> None:
        for informer in self._informers.values():
            informer.start()
        next_resync = 0.0
        while not self.stop_event.is_set():
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            dirty, since = self._take_dirty()
            dirty |= self._cancelling()
            if time.monotonic() >= next_resync:
                dirty |= set(Job.objects.live().exclude(state=State.DRAFT).values_list("pk", flat=True))
                next_resync = time.monotonic() + self.resync_seconds
            if dirty:
                self._evaluate_robustly(dirty, since)
            if self._tails_due:
                self.keep_failed_tails()
        for informer in self._informers.values():
            informer.stop()
        for stop in self._on_stop:
            stop()
        connections.close_all()  # this thread's database connection

    def _take_dirty(self) -> tuple[set[int], float | None]:
        """The jobs marked dirty, and since when; after the rest of a burst arrived (one
        evaluation for all of it)."""
        with self._lock:
            since = self._dirty_since
        if since is not None:
            self.stop_event.wait(max(0.0, since + self.gather_seconds - time.monotonic()))
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            since, self._dirty_since = self._dirty_since, None
        return dirty, since

    def _evaluate_robustly(self, dirty: set[int], since: float | None) -> None:
        try:
            self.evaluate(dirty)
        except Exception:  # a bad row must not stop the watcher
            log.exception("evaluating jobs %s failed", sorted(dirty))
        if since is not None:
            WATCHER_LAG.observe(time.monotonic() - since)

    def on_stop(self, stop) -> None:
        """Call `stop()` when the watcher stops."""
        self._on_stop.append(stop)

    def stop(self) -> None:
        self.stop_event.set()
        self._wake.set()
