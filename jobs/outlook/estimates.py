"""A waiting job's start estimate from the platform's records, its start-sooner advice, and
the published accuracy of past estimates. The simulation itself is `jobs.queue.eta` (pure); this
module reads what it needs (one team's queue on one flavor) and records every estimate it
gives (`EtaEstimate`), so the error is known once the job starts.

What the simulation is fed:
- capacity: what the team holds now or its nominal quota, whichever is more (a job that fits
  what the cohort lends now is told "starts now" by `jobs.outlook.feasibility` before any simulation);
- running jobs: their GPUs, time since admission, maximum runtime, and the runtimes of the
  team's ended jobs of the same size on the flavor (any size when none of that size ended),
  with the share of their maximum runtime those used;
- waiting jobs: in Kueue's pending order when its visibility API answers (`jobs.outlook.pending`),
  else the database's (`jobs.queue.queueing`), each with its maximum runtime and history.
"""

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone

from core.reconcile import NoCluster, current_cluster
from quotas.models import Quota
from workloads.kueue import KUEUE
from workloads.pods import object_name

from ..lifecycle import FINAL_STATE_VALUES, HOLDING_QUOTA, WAITING_FOR_QUOTA, State
from ..models import EtaEstimate, Job
from ..queue import eta, looks
from ..queue.queueing import START_GPUS
from ..use.usage import usage_of
from . import feasibility, pending, reservations

RECORD_EVERY = timedelta(minutes=5)  # one recorded estimate per job per this, however often asked
CALIBRATION_WINDOW = 400  # past estimates of a flavor the calibration learns from
RECENT = timedelta(hours=1)  # the naive estimate's admission rate window


@dataclass(frozen=True)
class Advice:
    """A change that would start the job sooner: what, the estimate with it, a clone link."""

    change: str
    message: str
    p50_seconds: float
    clone_url: str


@dataclass(frozen=True)
class Estimate:
    eta: eta.Eta
    raw: eta.Eta
    sentence: str
    naive_seconds: float | None = None
    sooner: tuple[Advice, ...] = ()

    def as_dict(self) -> dict:
        return {"known": self.eta.known, "p10_seconds": _secs(self.eta.p10), "p50_seconds": _secs(self.eta.p50),
                "p90_seconds": _secs(self.eta.p90), "reason": self.eta.reason, "message": self.sentence,
                "sooner": [{"change": a.change, "message": a.message, "p50_seconds": _secs(a.p50_seconds),
                            "clone_url": a.clone_url} for a in self.sooner]}


def _secs(value) -> int | None:
    return None if value is None else int(round(value))


def _histories(team, flavor) -> dict[int | None, tuple[tuple[float, ...], tuple[float, ...]]]:
    """Of the team's ended jobs on the flavor, the last `eta.HISTORY` of each size (the GPUs they
    started with; key None: the last of any size, for a size none of which ended): their runtimes
    (seconds), and for those with a maximum runtime the share of it they used. The last of any
    size are among the last of their own size, so one query reads them all."""
    rows = (Job.objects.filter(team=team, flavor=flavor, state__in=FINAL_STATE_VALUES,
                               run_admitted_at__isnull=False, finished_at__isnull=False)
            .annotate(size=START_GPUS)
            .annotate(recent=Window(RowNumber(), partition_by=[F("size")], order_by=F("finished_at").desc()))
            .filter(recent__lte=eta.HISTORY).order_by("-finished_at")
            .values_list("size", "run_admitted_at", "finished_at", "max_runtime_seconds"))
    runtimes: dict[int | None, list[float]] = {None: []}
    used: dict[int | None, list[float]] = {None: []}
    for size, began, ended, limit in rows:
        runtime = max((ended - began).total_seconds(), 1.0)
        for key in (size, None):
            if key is None and len(runtimes[None]) >= eta.HISTORY:
                continue
            runtimes.setdefault(key, []).append(runtime)
            if limit:
                used.setdefault(key, []).append(min(runtime / limit, 1.0))
    return {k: (tuple(v), tuple(used.get(k, ()))) for k, v in runtimes.items()}


def _history(histories, gpus) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return histories.get(gpus) or histories[None]


def _waiting(job: Job, ceiling: int) -> list[Job]:
    """The waiting jobs of ``job``'s queue in the scheduler's order, ``job`` among them (last of
    those at its priority when it is not saved yet)."""
    queue = Job.objects.queue_of(job.team, job.flavor, ceiling).annotate(size=START_GPUS)
    if job.pk is None:
        return [*queue.ahead(job), job]
    jobs = list(queue)
    order = _kueue_order(job)
    if order:  # Kueue's own order; a job it does not list yet keeps its place after those it lists
        rank = {name: i for i, name in enumerate(order)}
        jobs.sort(key=lambda j: rank.get(object_name(j), len(rank)))
    return jobs


def _kueue_order(job: Job) -> list[str] | None:
    if job.flavor.scheduler != KUEUE.name:
        return None
    try:
        return pending.kueue_order(job, current_cluster())
    except NoCluster:
        return None


def _remaining(job: Job, now) -> float | None:
    """What a running TrainJob's trainer last said it has left, counted from now."""
    end = job.trainer_expects_end(now)
    return None if end is None else (end - now).total_seconds()


def queue_for(job: Job, now=None) -> eta.Queue:
    """``job``'s queue as plain data for `jobs.queue.eta`."""
    now = now or timezone.now()
    usage = usage_of(job.team, job.flavor)
    histories = _histories(job.team, job.flavor)
    running = (Job.objects.filter(team=job.team, flavor=job.flavor, state__in=[*HOLDING_QUOTA, State.CANCELLING])
               .exclude(pk=job.pk).annotate(size=START_GPUS))
    runners = tuple(eta.Runner(r.gpus_in_use or r.size,
                               (now - (r.run_admitted_at or r.admitted_at or now)).total_seconds(),
                               r.max_runtime_seconds, *_history(histories, r.size), remaining=_remaining(r, now))
                    for r in running)
    waiters = tuple(eta.Waiter(w.gpus_to_start, w.max_runtime_seconds, _history(histories, w.gpus_to_start)[0],
                               target=(w is job or (job.pk is not None and w.pk == job.pk)),
                               used=_history(histories, w.gpus_to_start)[1],
                               on_cluster=w.pk is not None and w.state in WAITING_FOR_QUOTA and not w.behind_reservation)
                    for w in _waiting(job, usage.ceiling))
    return eta.Queue(capacity=min(max(usage.nominal, usage.in_use), usage.ceiling), ceiling=usage.ceiling,
                     running=runners, waiting=waiters, reserves=job.flavor.backfill)


def calibration_of(flavor) -> eta.Calibration:
    """What the flavor's past estimates, whose jobs have started since, say of the raw ones."""
    rows = (EtaEstimate.objects.filter(flavor=flavor, job__admitted_at__gte=F("made_at"))
            .values_list("raw_p50_seconds", "raw_p10_seconds", "raw_p90_seconds", "made_at", "job__admitted_at")
            [:CALIBRATION_WINDOW])
    return eta.Calibration.fit([(p50, p10, p90, (admitted - made).total_seconds())
                                for p50, p10, p90, made, admitted in rows])


def _naive(job: Job, now) -> float | None:
    position = feasibility.queue_position(job) if job.pk else Job.objects.ahead_of(job)
    if position is None:
        return None
    admitted = Job.objects.filter(team=job.team, flavor=job.flavor, admitted_at__gte=now - RECENT).count()
    return eta.naive(position, admitted / RECENT.total_seconds())


def applies(job: Job) -> bool:
    """Whether ``job`` gets an estimate: it waits for quota (asked before anything is read)."""
    return job.state in WAITING_FOR_QUOTA


@looks.one_look()  # its verdict, queue order, naive figure and advice read the queue once
def estimate(job: Job, *, record: bool = True, advise=True, verdict=None, now=None) -> Estimate | None:
    """The start estimate of a waiting (or unsaved) job, calibrated; None when it does not wait.
    ``advise``: whether to add the start-sooner advice (a callable is asked only when there
    is a wait to advise on); ``verdict``: `feasibility.assess` of the job, if already asked."""
    now = now or timezone.now()
    if job.pk is not None and not applies(job):
        return None
    if job.pk is not None and job.at_personal_cap:
        held = eta.Eta(reason="it is held back until its submitter's other jobs end (their personal cap)")
        return Estimate(held, held, eta.sentence(held))
    verdict = verdict or feasibility.assess(job)
    if verdict.verdict == feasibility.Feasibility.NOW:  # fits what is free (or lent) now
        now_eta = eta.Eta(0.0, 0.0, 0.0)
        return Estimate(now_eta, now_eta, eta.sentence(now_eta))
    if verdict.verdict == feasibility.Feasibility.NEVER:
        # The model's numbers when it agrees; Kueue's verdict alone otherwise (its words are on the page).
        ours = verdict.message.startswith("Can never run: ") or not verdict.kueue_reason
        why = verdict.message.removeprefix("Can never run: ").rstrip(".") if ours else "Kueue cannot admit it as it is"
        unknown = eta.Eta(reason=why)
        return Estimate(unknown, unknown, eta.sentence(unknown))
    queue = queue_for(job, now)
    raw = eta.estimate(queue)
    fixed = eta.calibrate(raw, calibration_of(job.flavor))
    naive = _naive(job, now)
    if record and job.pk and fixed.known:
        _record(job, raw, fixed, naive, now)
    if callable(advise):
        advise = fixed.known and advise()
    sooner = tuple(_sooner(job, queue, fixed)) if advise and fixed.known else ()
    return Estimate(fixed, raw, eta.sentence(fixed), naive, sooner)


def _record(job: Job, raw: eta.Eta, fixed: eta.Eta, naive, now) -> None:
    if EtaEstimate.objects.filter(job=job, made_at__gt=now - RECORD_EVERY).exists():
        return
    EtaEstimate.objects.create(job=job, flavor=job.flavor, made_at=now, p10_seconds=fixed.p10, p50_seconds=fixed.p50,
                               p90_seconds=fixed.p90, raw_p10_seconds=raw.p10, raw_p50_seconds=raw.p50,
                               raw_p90_seconds=raw.p90, naive_seconds=naive)


def _clone_url(job: Job, **change) -> str:
    if job.pk is None:
        return ""
    return f"{reverse('jobs:submit')}?{urlencode({'clone': job.pk, **change})}"


def _sooner(job: Job, queue: eta.Queue, current: eta.Eta):
    """Changes that would start the job at least a minute and a fifth sooner, best first: a
    shorter maximum runtime that ends before the GPUs its flavor reserves for another job are
    needed (backfill, `jobs.outlook.reservations`), fewer GPUs (half the workers, or half the GPUs per
    worker), another flavor where the team has the GPUs free now. Kueue itself never reads a
    maximum runtime when it admits (docs/eta.md), so a shorter one is only advised where the
    platform reserves."""
    earlier = []
    if (gap := reservations.gap_for(job)) and gap < (job.max_runtime_seconds or gap + 1):
        shorter = eta.estimate(eta.with_target(queue, max_runtime=float(gap)))
        if shorter.known and _worth(current.p50, shorter.p50):
            was = eta.words(job.max_runtime_seconds) if job.max_runtime_seconds else "none"
            earlier.append(Advice("shorter_max_runtime", f"With a maximum runtime of {eta.words(gap)} instead of "
                                  f"{was}: {eta.sentence(shorter).lower()}", shorter.p50,
                                  _clone_url(job, max_runtime_seconds=gap)))
    if job.work_kind.across_nodes and job.gpus_to_start > 1:
        change = ({"workers": job.workers // 2} if job.workers > 1
                  else {"gpus_per_worker": job.gpus_per_worker // 2})
        gpus = change.get("workers", job.workers) * change.get("gpus_per_worker", job.gpus_per_worker)
        smaller = eta.estimate(eta.with_target(queue, gpus=gpus))
        if smaller.known and _worth(current.p50, smaller.p50):
            earlier.append(Advice("fewer_gpus", f"With {gpus} GPUs instead of {job.gpus_to_start}: "
                                  f"{eta.sentence(smaller).lower()}", smaller.p50, _clone_url(job, **change)))
    for quota in (Quota.objects.filter(team=job.team).exclude(flavor=job.flavor).select_related("flavor")):
        flavor = quota.flavor
        if job.gpus_per_worker > flavor.gpus_per_node or not _worth(current.p50, 0.0):
            continue
        free = usage_of(job.team, flavor)
        if job.gpus_to_start <= free.nominal - free.in_use:
            earlier.append(Advice("other_flavor", f"On {flavor.name}: starts now ({free.nominal - free.in_use} of "
                                  f"the team's {free.nominal} GPUs there are free).", 0.0,
                                  _clone_url(job, flavor=flavor.pk)))
    return sorted(earlier, key=lambda a: a.p50_seconds)


def _worth(was: float, would: float) -> bool:
    return was - would >= max(60.0, 0.2 * was)


# --- published accuracy ----------------------------------------------------------------------
def accuracy_by_flavor(since=None) -> dict[str, dict[str, eta.Accuracy]]:
    """Per flavor name: the accuracy of recorded estimates whose job has started since, over
    starts that waited over 5 minutes and over all of them."""
    rows = EtaEstimate.objects.filter(job__admitted_at__gte=F("made_at"))
    if since is not None:
        rows = rows.filter(made_at__gte=since)
    by_flavor: dict[str, list] = {}
    for name, p10, p50, p90, naive, made, admitted in rows.values_list(
            "flavor__name", "p10_seconds", "p50_seconds", "p90_seconds", "naive_seconds", "made_at", "job__admitted_at"):
        by_flavor.setdefault(name, []).append((p10, p50, p90, (admitted - made).total_seconds(), naive))
    return {name: {"long": eta.accuracy(rows), "all": eta.accuracy(rows, min_wait=0.0)}
            for name, rows in sorted(by_flavor.items())}


