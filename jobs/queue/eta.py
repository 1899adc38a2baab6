"""When will a waiting job start: a forward simulation of its team's queue on one flavor.

Pure: fed plain data (`Queue`), imports nothing of Django, so the job page, the API, the
submit verdict, the tests and the offline replay (`bench/eta.py`) run the same code.

The model is the scheduler's (`jobs.queue.queueing`): the GPUs the team may use now (its nominal
quota plus what the cohort lends it now, at most its ceiling); the running jobs end at a
runtime drawn from the history of similar jobs (same team and shape, the platform's own
records) that is longer than what they have run so far, capped by their maximum runtime (and,
for a job with one, drawn as the share of their maximum that similar jobs used), or, for a
TrainJob whose trainer publishes it, at the remaining time it last said (`Runner.remaining`); the waiting
jobs are considered in the scheduler's order (Kueue's pending order when it answers) and each
takes what is free when it fits, one that does not fit blocking nobody (BestEffortFIFO). On a
flavor that reserves (`Queue.reserves`) the platform's reservation is played too
(`jobs.queue.backfill.walk`): the first job that does not fit is reserved for, and a later one
starts before it only if it cannot delay it, so there a shorter maximum runtime can start a
job sooner. The draws are repeated (`DRAWS`, a fixed seed: same input, same answer) and the
target's start times give p10, p50 and p90. `calibrate` then corrects them by what past
estimates got wrong (`Calibration.fit`).

What it leaves out, and why the calibration is there: jobs submitted later at a higher
priority, preemption, and the cohort's other teams taking back what they lent.
"""

import math
import random
from dataclasses import dataclass, field, replace

from . import backfill

DRAWS = 200
SEED = 33
# A job with no similar past run and no maximum runtime: the simulation cannot say when it
# ends, so an estimate that depends on it is "unknown".
NO_END = None
# Similar ended jobs with a maximum runtime needed before their used share is drawn from.
MIN_USED = 5
# A team's last ended jobs of a size on the flavor read for runtimes (`jobs.outlook.estimates`, the
# replay); of any size as many, for a size none of which ended.
HISTORY = 50


@dataclass(frozen=True)
class Runner:
    """A job holding GPUs: how many, how long it has run, its maximum runtime (None: none)."""

    gpus: int
    elapsed: float = 0.0
    max_runtime: float | None = None
    history: tuple[float, ...] = ()  # runtimes (seconds) of similar jobs that ended
    used: tuple[float, ...] = ()  # of similar ended jobs with a maximum runtime: runtime / maximum
    # What its trainer published of the time it still runs (a TrainJob's trainerStatus), from
    # now; None: it said nothing. Its own word beats every draw (still at most its maximum).
    remaining: float | None = None


@dataclass(frozen=True)
class Waiter:
    """A waiting job, in the scheduler's order; ``target`` marks the one asked about."""

    gpus: int
    max_runtime: float | None = None
    history: tuple[float, ...] = ()
    target: bool = False
    used: tuple[float, ...] = ()
    on_cluster: bool = False  # let go to the scheduler already (`jobs.queue.backfill`)


@dataclass(frozen=True)
class Queue:
    capacity: int  # GPUs the team may hold now: nominal + lent now, at most its ceiling
    ceiling: int  # the most it can ever hold
    running: tuple[Runner, ...] = ()
    waiting: tuple[Waiter, ...] = ()  # in order, the target among them
    reserves: bool = False  # the platform reserves for the head (`GpuFlavor.backfill`, `jobs.queue.backfill`)


@dataclass(frozen=True)
class Eta:
    """Seconds from now until the target starts (p10 <= p50 <= p90), or why it is unknown."""

    p10: float | None = None
    p50: float | None = None
    p90: float | None = None
    reason: str = ""

    @property
    def known(self) -> bool:
        return self.p50 is not None


def _draw_runtime(rng, history, elapsed: float, cap: float | None, used=()) -> float | None:
    """A total runtime for a job that has run ``elapsed`` seconds, longer than that (the
    remaining life given its age), at most its cap:
    - with a maximum runtime and enough similar jobs that had one: the share of their maximum
      they used, times this one's (people over-ask alike: that share varies less than runtimes);
    - else a past run of a similar job that lasted longer;
    - the cap itself when none lasted longer."""
    if cap is not None and len(used) >= MIN_USED:
        longer = [u * cap for u in used if u * cap > elapsed]
        if longer:
            return min(rng.choice(longer), cap)
    longer = [h for h in history if h > elapsed]
    if longer:
        runtime = rng.choice(longer)
    elif cap is not None:
        runtime = cap
    elif history:  # every similar run ended sooner: it ends soon, by the longest of them
        runtime = elapsed + max(history) * 0.25
    else:
        return NO_END
    return min(runtime, cap) if cap is not None else runtime


def _unknown_ends(queue: Queue) -> int:
    jobs = [*queue.running, *(w for w in queue.waiting if not w.target)]
    return sum(1 for j in jobs if not j.history and j.max_runtime is None and getattr(j, "remaining", None) is None)


def _left(r: Runner, rng, draw) -> float:
    """How long a running job still holds its GPUs in one draw (inf: unknown): what its trainer
    said is left when it said so, else a draw from similar jobs; at most its maximum runtime."""
    sure = None if r.max_runtime is None else max(r.max_runtime - r.elapsed, 0.0)
    if r.remaining is not None:
        return max(r.remaining, 0.0) if sure is None else min(max(r.remaining, 0.0), sure)
    runtime = draw(rng, r.history, r.elapsed, r.max_runtime, r.used)
    return math.inf if runtime is None else max(runtime - r.elapsed, 0.0)


def _simulate_once(queue: Queue, rng, draw) -> float | None:
    """One draw: the target's start (seconds from now), or None when it never starts."""
    holding: list[tuple[float, float | None, int]] = []  # (time it ends, time it surely has ended, GPUs)
    for r in queue.running:
        sure = None if r.max_runtime is None else max(r.max_runtime - r.elapsed, 0.0)
        holding.append((_left(r, rng, draw), sure, r.gpus))
    waiting = list(queue.waiting)
    now = 0.0
    while True:
        free = queue.capacity - sum(g for *_, g in holding)
        if queue.reserves:
            decisions = backfill.walk(queue.capacity, free, [(sure, g) for _, sure, g in holding],
                                      [backfill.Candidate(w.gpus, w.max_runtime, w.on_cluster) for w in waiting],
                                      now).decisions
        else:  # BestEffortFIFO alone: the walk with every job let go, without its bookkeeping (3.5x faster)
            decisions = []
            for w in waiting:
                fits = w.gpus <= free
                free -= w.gpus if fits else 0
                decisions.append(backfill.Decision.START if fits else backfill.Decision.WAIT)
        still = []
        for w, decision in zip(waiting, decisions, strict=True):
            if decision is backfill.Decision.START:
                if w.target:
                    return now
                runtime = draw(rng, w.history, 0.0, w.max_runtime, w.used)
                holding.append((math.inf if runtime is None else now + runtime,
                                None if w.max_runtime is None else now + w.max_runtime, w.gpus))
            else:
                still.append(w if w.on_cluster or decision is backfill.Decision.HOLD else replace(w, on_cluster=True))
        waiting = still
        finite = [end for end, *_ in holding if end < math.inf]
        if not finite:
            return None
        now = min(finite)
        holding = [h for h in holding if h[0] != now]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def estimate(queue: Queue, draws: int = DRAWS, seed: int = SEED, draw=None) -> Eta:
    """The target's start as p10/p50/p90 seconds from now, or unknown with the reason.
    ``draw(rng, history, elapsed, cap, used)`` picks a job's total runtime: the offline replay
    swaps in one that knows its generator's distributions, to measure what no estimator using
    the platform's records could beat."""
    target = next((w for w in queue.waiting if w.target), None)
    if target is None:
        return Eta(reason="the job is not waiting")
    if target.gpus > queue.ceiling:
        return Eta(reason=f"it needs {target.gpus} GPUs, more than the team can ever use ({queue.ceiling})")
    rng = random.Random(seed)
    starts = [_simulate_once(queue, rng, draw or _draw_runtime) for _ in range(draws)]
    known = [s for s in starts if s is not None]
    if len(known) < draws * 0.9:
        blind = _unknown_ends(queue)
        if blind:
            jobs = "job has" if blind == 1 else "jobs have"
            return Eta(reason=f"{blind} {jobs} no maximum runtime and no similar past run, "
                              "so when they end cannot be estimated")
        return Eta(reason="the GPUs it needs are not freed by the jobs that hold them")
    return Eta(_quantile(known, 0.1), _quantile(known, 0.5), _quantile(known, 0.9))


def with_target(queue: Queue, **change) -> Queue:
    """``queue`` with its target changed (e.g. ``gpus=``): for the start-sooner advice."""
    return replace(queue, waiting=tuple(replace(w, **change) if w.target else w for w in queue.waiting))


# --- calibration: what the recorded errors say -------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    """Multipliers of the raw p50 that past (raw p50, actual wait) pairs say give the median
    and the 10th and 90th percentiles of the actual wait. Identity until enough are seen."""

    low: float = 1.0
    mid: float = 1.0
    high: float = 1.0
    samples: int = 0
    # Starts this soon (seconds) count as "now": no ratio is learned from them.
    MIN_WAIT = 60.0
    MIN_SAMPLES = 20

    @classmethod
    def fit(cls, pairs, *, prior: "Calibration | None" = None) -> "Calibration":
        """From (raw p50, raw p10, raw p90, actual wait) of past estimates of waits over a minute."""
        ratios = [actual / p50 for p50, _, _, actual in pairs if p50 and p50 >= cls.MIN_WAIT and actual > 0]
        if len(ratios) < cls.MIN_SAMPLES:
            return prior or cls()
        logs = [math.log(r) for r in ratios]
        return cls(math.exp(_quantile(logs, 0.1)), math.exp(_quantile(logs, 0.5)),
                   math.exp(_quantile(logs, 0.9)), len(ratios))


def calibrate(eta: Eta, calibration: Calibration) -> Eta:
    """The raw simulation corrected: the median scaled by the median observed ratio, and the
    range at least as wide as the observed ratios' 10th-90th percentiles (never narrower than
    the simulation's own spread)."""
    if not eta.known or not calibration.samples or eta.p50 < Calibration.MIN_WAIT:
        return eta
    p50 = eta.p50 * calibration.mid
    p10 = min(eta.p10 * calibration.mid, eta.p50 * calibration.low)
    p90 = max(eta.p90 * calibration.mid, eta.p50 * calibration.high)
    return Eta(min(p10, p50), p50, max(p90, p50))


# --- accuracy: what is published --------------------------------------------------------------
@dataclass
class Accuracy:
    jobs: int = 0
    median_rel_error: float | None = None
    coverage: float | None = None
    naive_median_rel_error: float | None = None
    rows: list = field(default_factory=list, repr=False)


def accuracy(outcomes, *, min_wait: float = 300.0) -> Accuracy:
    """Over (p10, p50, p90, actual wait, naive estimate or None) of starts that waited at least
    ``min_wait`` seconds: the median of |p50 - actual| / actual, the share of actual waits
    inside [p10, p90], and the naive estimate's median relative error beside it."""
    rows = [o for o in outcomes if o[3] >= min_wait and o[1] is not None]
    if not rows:
        return Accuracy()
    errors = [abs(p50 - actual) / actual for _, p50, _, actual, _ in rows]
    inside = sum(1 for p10, _, p90, actual, _ in rows if p10 <= actual <= p90)
    naive = [abs(n - actual) / actual for *_, actual, n in rows if n is not None]
    return Accuracy(len(rows), _quantile(errors, 0.5), inside / len(rows),
                    _quantile(naive, 0.5) if naive else None, rows)


def naive(position: int, admissions_per_second: float) -> float | None:
    """The naive estimate: position in the queue over the queue's recent admission rate."""
    if admissions_per_second <= 0:
        return None
    return (position + 1) / admissions_per_second


# --- in plain words ---------------------------------------------------------------------------
def words(seconds: float) -> str:
    seconds = max(int(round(seconds)), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min"
    return "under a minute"


def sentence(estimate: Eta) -> str:
    """"Starts in about 25 min (likely 10 min to 1 h 05 min)." or why it cannot say."""
    if not estimate.known:
        return f"Start time unknown: {estimate.reason}."
    if estimate.p90 < 60:
        return "Starts within a minute."
    return (f"Starts in about {words(estimate.p50)} "
            f"(likely {words(estimate.p10)} to {words(estimate.p90)}).")
