"""The cluster's own account of each job, from what the observer recorded: when it was
admitted, running, preempted and finished (the cluster's timestamps, not ours), which
final state the cluster gave it, how many of its pods were restarts, and the intervals
during which it held GPUs.

Per scheduler, the cluster's clock is read where the cluster writes it:
- Kueue training (a batch Job or a TrainJob): Workload conditions (Admitted, Evicted,
  Finished) and the batch Job's or the TrainJob's Complete/Failed conditions, each with its
  lastTransitionTime; pods' Ready times.
- Volcano training: the Volcano Job's phase conditions (Running, Restarting, Completed,
  ...) with their lastTransitionTime; pods' creation times (Volcano creates the gang's
  pods once its PodGroup is admitted).
- Inference: pods' start and Ready times; the Deployment's deletion when cancelled.
- Ray jobs and clusters, notebooks: their Workload's Admitted and Evicted conditions, pods'
  Ready times; the RayJob's, RayCluster's or StatefulSet's deletion when cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workloads.spec import KUEUE

from .observer import BATCH_JOB, DEPLOYMENT, TRAIN_JOB, VOLCANO_JOB, WORKLOAD, Observer, PodInfo
from .plan import LONG_LIVED as PLANNED_LONG_LIVED
from .plan import VARIANTS

VOLCANO_FINAL = {"Completed": "succeeded", "Failed": "failed", "Aborted": "failed", "Terminated": "failed"}


@dataclass
class Account:
    """What the cluster says about one job."""

    job: int
    label: str
    admitted: float | None = None
    running: float | None = None
    finished: float | None = None
    preempted: float | None = None
    preemptions: list = field(default_factory=list)  # every preemption (Kueue eviction, Volcano restart)
    verdict: str = "absent"                       # succeeded | failed | gone | live | absent
    evictions: int = 0
    pods: int = 0
    restarts: int = 0
    workload_objects: int = 0
    edges: list = field(default_factory=list)     # (time, holding?)

    def held_seconds(self, until: float) -> tuple[float, int]:
        """Seconds the job held its GPUs until ``until``, and in how many intervals."""
        total, opened, intervals = 0.0, None, 0
        for at, holding in sorted(set(self.edges), key=lambda e: (e[0], e[1])):
            if at is None or at > until:
                continue
            if holding and opened is None:
                opened = at
            elif not holding and opened is not None:
                total += at - opened
                intervals += 1
                opened = None
        if opened is not None:
            total += until - opened
            intervals += 1
        return total, intervals


def _true(conds: dict, kind: str):
    c = conds.get(kind)
    return c if c and c[0] == "True" else None


def _first(values):
    values = [v for v in values if v is not None]
    return min(values) if values else None


def _evicted(account: Account, condition: tuple, evictions: set) -> None:
    """A Workload's Evicted condition (status, reason, time): its GPUs are given back; it was
    preempted unless Kueue deactivated it, which it does to a workload past its max run time
    ("DeactivatedDueToMaximumExecutionTimeExceeded" in 0.17): a deactivated workload never
    runs again."""
    _, reason, at = condition
    account.edges.append((at, False))
    evictions.add(at)
    if reason.endswith("MaximumExecutionTimeExceeded") or reason.startswith("Deactivated"):
        account.finished = _first([account.finished, at])
        account.verdict = "failed"
    else:
        account.preempted = _first([account.preempted, at])
        if at not in account.preemptions:
            account.preemptions.append(at)


# How the object Kueue queues says it ended: (condition type, verdict), first true wins.
ENDS = {
    BATCH_JOB: (("SuccessCriteriaMet", "succeeded"), ("Complete", "succeeded"),
                ("FailureTarget", "failed"), ("Failed", "failed")),
    # A TrainJob says it itself (Trainer copies its JobSet's end onto it).
    TRAIN_JOB: (("Complete", "succeeded"), ("Failed", "failed")),
}


def kueue_training(account: Account, job: dict, workloads, runs, pods: list[PodInfo], *, kind=BATCH_JOB) -> None:
    """A batch Job or a TrainJob (``kind``, the object Kueue queues, ``runs`` its objects):
    admitted, evicted and finished by its Workload's conditions, ended by its own
    (`ENDS`), running once its first run's pods are all Ready."""
    _workload_edges(account, workloads)
    for run in runs:
        for _, (conds, _suspend) in run.history:
            conds = dict(conds)
            for condition, verdict in ENDS[kind]:
                if c := _true(conds, condition):
                    account.finished = _first([account.finished, c[2]])
                    account.edges.append((c[2], False))
                    if account.verdict in ("absent", "live"):
                        account.verdict = verdict
        if run.deletion or run.gone:
            account.edges.append((run.deletion or run.gone, False))
    _running_from_pods(account, pods, job["workers"])
    _restarts(account, pods, per_run=job["workers"])


def _workload_edges(account: Account, workloads) -> None:
    evictions = set()
    for wl in workloads:
        was_admitted = False
        for _, (conds,) in wl.history:
            conds = dict(conds)
            if adm := _true(conds, "Admitted"):
                account.admitted = _first([account.admitted, adm[2]])
                account.edges.append((adm[2], True))
                was_admitted = True
            elif was_admitted and conds.get("Admitted"):
                account.edges.append((conds["Admitted"][2], False))
            if ev := _true(conds, "Evicted"):
                _evicted(account, ev, evictions)
            if fin := _true(conds, "Finished"):
                account.edges.append((fin[2], False))
        if wl.deletion or wl.gone:
            account.edges.append((wl.deletion or wl.gone, False))
    account.evictions = len(evictions)


def volcano_training(account: Account, job: dict, vcjobs, pods: list[PodInfo]) -> None:
    restarting, stops = set(), set()
    for vc in vcjobs:
        for _, (phase, phase_time, _retries, phases) in vc.history:
            for status, at in phases:
                if status == "Running":
                    account.running = _first([account.running, at])
                elif status == "Restarting":
                    restarting.add(at)
                elif status in VOLCANO_FINAL:
                    stops.add(at)
                    account.finished = _first([account.finished, at])
                    account.verdict = VOLCANO_FINAL[status]
            if phase in VOLCANO_FINAL:
                stops.add(phase_time)
                account.finished = _first([account.finished, phase_time])
                account.verdict = VOLCANO_FINAL[phase]
        if vc.deletion or vc.gone:
            stops.add(vc.deletion or vc.gone)
    restarting.discard(None)
    stops = sorted((stops | restarting) - {None})
    account.evictions = len(restarting)
    account.preempted = _first(restarting)
    account.preemptions = sorted(restarting)
    # A run holds GPUs from its first pod (Volcano creates the gang's pods once its
    # PodGroup is admitted) until the next stop: a restart, the end, or a deletion.
    created = sorted(p.created for p in pods if p.created is not None)
    account.admitted = created[0] if created else None
    boundary = None
    for at in created:
        if boundary is None or at >= boundary:
            account.edges.append((at, True))
            later = [s for s in stops if s >= at]
            boundary = later[0] if later else float("inf")
    account.edges += [(s, False) for s in stops]
    _restarts(account, pods, per_run=job["workers"])


def inference(account: Account, job: dict, deployments, workloads, pods: list[PodInfo]) -> None:
    started = sorted(p.started or p.ready for p in pods if (p.started or p.ready) is not None)
    account.admitted = started[0] if started else None
    ready = sorted(p.ready for p in pods if p.ready is not None)
    need = job["min_replicas"] or 1
    account.running = ready[need - 1] if len(ready) >= need else None
    if account.admitted is not None:
        account.edges.append((account.admitted, True))
    evictions = {ev[2] for wl in workloads for _, (conds,) in wl.history if (ev := _true(dict(conds), "Evicted"))}
    account.evictions = len(evictions)
    # Replicas asked for: the first count plus every increase (an HPA scaling up adds pods).
    asked = 0
    for deployment in deployments:
        last = 0
        for _, (replicas, _ready) in deployment.history:
            if replicas and replicas > last:
                asked += replicas - last
            last = replicas or 0
        if deployment.deletion or deployment.gone:
            account.edges.append((deployment.deletion or deployment.gone, False))
    _restarts(account, pods, per_run=1, expected=max(asked, need) + account.evictions)


# Long-lived kinds (plan.LONG_LIVED): the object Kueue queues (RayJob, RayCluster, a notebook's
# StatefulSet), and the pods one run starts (a Ray head and its workers; a notebook's one pod).
LONG_LIVED = {label: VARIANTS[label].queued for label in sorted(PLANNED_LONG_LIVED)}
# Kueue variants that end by themselves, by the object Kueue queues (a batch Job, a TrainJob).
RUNS_TO_AN_END = {label: v.queued for label, v in VARIANTS.items()
                  if v.scheduler == KUEUE and label not in LONG_LIVED and v.queued in ENDS}


def kueue_long_lived(account: Account, job: dict, workloads, pods: list[PodInfo], per_run: int) -> None:
    """A Ray job or cluster, or a notebook: admitted and evicted by its Workload's conditions,
    running once a run's pods are all Ready; it ends only when cancelled (objects gone)."""
    evictions = set()
    for wl in workloads:
        for _, (conds,) in wl.history:
            conds = dict(conds)
            if adm := _true(conds, "Admitted"):
                account.admitted = _first([account.admitted, adm[2]])
                account.edges.append((adm[2], True))
            if ev := _true(conds, "Evicted"):
                _evicted(account, ev, evictions)
        if wl.gone or wl.deletion:
            account.edges.append((wl.deletion or wl.gone, False))
    account.evictions = len(evictions)
    _running_from_pods(account, pods, per_run)
    _restarts(account, pods, per_run=per_run)


def _running_from_pods(account: Account, pods: list[PodInfo], workers: int) -> None:
    first_run = sorted(pods, key=lambda p: (p.created or p.first_seen))[:workers]
    if len(first_run) == workers and all(p.ready for p in first_run):
        account.running = max(p.ready for p in first_run)


def _restarts(account: Account, pods: list[PodInfo], *, per_run: int, expected: int | None = None) -> None:
    """Pods beyond what the job's runs explain: each run (the first, and one more per
    eviction or preemption) starts ``per_run`` pods; anything more replaced a pod nobody
    asked to stop."""
    account.pods = len(pods)
    allowed = expected if expected is not None else per_run * (1 + account.evictions)
    account.restarts = max(0, len(pods) - allowed)


def accounts(observer: Observer, jobs: dict[int, dict], labels: dict[int, str]) -> dict[int, Account]:
    """The cluster's account of every job the soak submitted (call with observer.lock held)."""
    pods = observer.pods_by_job()
    by_kind = {kind: observer.job_objects(kind) for kind in (*ENDS, VOLCANO_JOB, DEPLOYMENT, WORKLOAD,
                                                             *LONG_LIVED.values())}
    result = {}
    for job_id, job in jobs.items():
        label = labels.get(job_id, "")
        account = result[job_id] = Account(job=job_id, label=label)
        cancelled_at = job.get("cancel_requested")
        # Pods started after a cancel was asked for are not the job's runs.
        own = [p for p in pods.get(job_id, []) if not cancelled_at or (p.created or p.first_seen) <= cancelled_at + 1]
        if label in RUNS_TO_AN_END:
            kind = RUNS_TO_AN_END[label]
            objects = by_kind[kind].get(job_id, [])
            kueue_training(account, job, by_kind[WORKLOAD].get(job_id, []), objects, own, kind=kind)
        elif label in LONG_LIVED:
            objects = by_kind[LONG_LIVED[label]].get(job_id, [])
            per_run = 1 if label == "kueue-notebook" else 1 + job["workers"]  # the Ray head, then its workers
            kueue_long_lived(account, job, by_kind[WORKLOAD].get(job_id, []), own, per_run)
        elif label == "volcano-training":
            volcano_training(account, job, by_kind[VOLCANO_JOB].get(job_id, []), own)
            objects = by_kind[VOLCANO_JOB].get(job_id, [])
        else:
            objects = by_kind[DEPLOYMENT].get(job_id, [])
            inference(account, job, objects, by_kind[WORKLOAD].get(job_id, []), own)
        account.workload_objects = len(objects)
        if objects and all(o.gone or o.deletion for o in objects):
            account.verdict = "gone" if account.verdict in ("absent", "live") else account.verdict
        elif objects and account.verdict == "absent":
            account.verdict = "live"
    return result
