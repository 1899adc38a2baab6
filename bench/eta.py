"""``make bench-eta``: the ETA (`jobs.queue.eta`) replayed offline against what a queue really does.

Two traces, both generated (no slice of any trace is shipped):

(a) ``alibaba-gpu-2023``: a generator fitted by hand to the distributions the public
    cluster-trace-gpu-v2023 of alibaba/clusterdata publishes (its README and the ATC'23 paper
    "Beware of Fragmentation"): GPU requests per job mostly 1 GPU, some 2, 4 and 8 (the
    fractional-GPU pods rounded up to one GPU); heavy-tailed (log-normal) runtimes with a
    median of tens of minutes; Poisson arrivals with a day/night cycle. The parameters are
    approximations of those published figures, not a fit to the pod list itself. The load is
    scaled (arrival rate multiplied) until at least 30 % of the GPU jobs wait over 5 minutes.
(b) ``bursty-week``: a generated week with bursts (a team submitting a sweep of 20-60 jobs
    at once, a few times a day) over a steady background.

The replay is a discrete-event cluster: teams with a nominal quota on a flavor, two
priorities, BestEffortFIFO queues (`jobs.queue.queueing`), played twice: as they are, and with the
platform's reservation for the first waiting job (`jobs.queue.backfill`, a flavor's `backfill`). Each job declares a maximum runtime
(its real runtime times 1.2-4, as people over-ask). When a job must wait, the estimator is
asked with only what the platform would know then: the running jobs' elapsed time and
maximum runtime, the waiting jobs in order, and the runtimes of the team's earlier jobs of
the same shape that ended (and the share of their maximum runtime they used). The raw estimate is corrected by the calibration fitted on the
earlier estimates of the flavor whose jobs have started (`Calibration.fit`), as the platform
does. The naive estimate is position / the queue's admissions per second over the last hour.

Prints, per trace and per flavor:
  RESULT eta trace=... queue=... flavor=... jobs=N median_rel_error=... coverage=... naive_median_rel_error=...
over the jobs that waited more than 5 minutes, and writes bench/results/eta.md. Beside them,
per trace, the same estimator told more than any platform can know (`KNOWS`): the generator's
runtime distribution given each job's maximum runtime (the best any estimator fed the
platform's records could draw from), and every job's true runtime (what is left is what the
simulation does not model: later arrivals of a higher priority):
  RESULT eta-reference trace=... queue=besteffort knows=distributions|runtimes jobs=N median_rel_error=... coverage=...
BENCH_ETA_JOBS (default 2500 a trace) bounds the run; BENCH_ETA_DRAWS (100) the draws.
"""

import bisect
import functools
import heapq
import math
import os
import random
import statistics
import sys
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.queue import backfill, eta  # noqa: E402  (pure: no Django needed)

JOBS = int(os.environ.get("BENCH_ETA_JOBS", "2500"))
DRAWS = int(os.environ.get("BENCH_ETA_DRAWS", "100"))
FIVE_MINUTES = 300.0
DAY = 86400.0

# (flavor, team, nominal GPUs)
TEAMS = [("a100", "vision", 16), ("a100", "nlp", 24), ("a100", "speech", 8),
         ("h100", "llm", 32), ("h100", "rl", 16)]
# The trace's GPU request mix, fractional pods counted as one GPU.
GPU_MIX = [(1, 0.70), (2, 0.08), (4, 0.08), (8, 0.14)]
RUNTIME_MEDIAN, RUNTIME_SIGMA, RUNTIME_MIN, RUNTIME_MAX = 1800.0, 1.4, 60.0, 3 * DAY
OVER_ASK = (1.2, 4.0)  # a job's maximum runtime over its real runtime
ROUND_UP = 600  # maximum runtimes are asked in whole 10 minutes


@dataclass(order=True)
class Sub:
    at: float
    pk: int
    flavor: str = field(compare=False)
    team: str = field(compare=False)
    gpus: int = field(compare=False)
    runtime: float = field(compare=False)
    max_runtime: float = field(compare=False)
    priority: int = field(compare=False)


def _gpus(rng) -> int:
    pick, total = rng.random(), 0.0
    for gpus, share in GPU_MIX:
        total += share
        if pick <= total:
            return gpus
    return GPU_MIX[-1][0]


def _job(rng, pk, at, flavor, team, gpus=None) -> Sub:
    runtime = min(RUNTIME_MAX, max(RUNTIME_MIN, rng.lognormvariate(math.log(RUNTIME_MEDIAN), RUNTIME_SIGMA)))
    gpus = gpus or _gpus(rng)
    max_runtime = math.ceil(runtime * rng.uniform(*OVER_ASK) / ROUND_UP) * ROUND_UP
    return Sub(at, pk, flavor, team, gpus, runtime, max_runtime, 1 if rng.random() < 0.15 else 0)


def alibaba(load: float, seed: int = 1) -> list[Sub]:
    rng, subs, now = random.Random(seed), [], 0.0
    base = load / 600.0  # jobs a second per team at load 1, before the day/night cycle
    while len(subs) < JOBS:
        rate = base * len(TEAMS) * (1 + 0.6 * math.sin(2 * math.pi * now / DAY))
        now += rng.expovariate(max(rate, 1e-6))
        flavor, team, _ = rng.choice(TEAMS)
        subs.append(_job(rng, len(subs), now, flavor, team))
    return subs


def bursty(load: float, seed: int = 2) -> list[Sub]:
    rng, subs, now = random.Random(seed), [], 0.0
    while len(subs) < JOBS and now < 7 * DAY:
        now += rng.expovariate(load / 900.0 * len(TEAMS))
        flavor, team, _ = rng.choice(TEAMS)
        if rng.random() < 0.02:  # a sweep: many same-shape jobs at once
            gpus = rng.choice((1, 2, 4))
            for _ in range(rng.randint(20, 60)):
                subs.append(_job(rng, len(subs), now, flavor, team, gpus))
        else:
            subs.append(_job(rng, len(subs), now, flavor, team))
    subs = subs[:JOBS]
    subs.sort()
    return subs


# --- references: estimators told what no platform can know -----------------------------------
@functools.lru_cache(maxsize=None)
def _posterior(max_runtime: float, points: int = 200) -> tuple[list[float], list[float]]:
    """The generator's own runtime distribution given a job's maximum runtime (Bayes: ``_job``'s
    runtime distribution times the chance that its over-ask and rounding give that maximum), on a
    grid of runtimes (log-spaced, plus the runtimes ``_job`` raises to ``RUNTIME_MIN``) with
    their probabilities (unnormalized)."""
    low, high = OVER_ASK

    def gives_max(runtime):  # the over-ask k gives this maximum when runtime * k is in (max - ROUND_UP, max]
        return max(min(high, max_runtime / runtime) - max(low, (max_runtime - ROUND_UP) / runtime), 0.0) / (high - low)

    lo, hi = max(RUNTIME_MIN, (max_runtime - ROUND_UP) / high), min(max_runtime / low, RUNTIME_MAX)
    step = (math.log(hi) - math.log(lo)) / points
    grid, weights = [], []
    if lo == RUNTIME_MIN:  # the runs shorter than a minute, counted as one
        grid.append(RUNTIME_MIN)
        weights.append(statistics.NormalDist(math.log(RUNTIME_MEDIAN), RUNTIME_SIGMA).cdf(math.log(RUNTIME_MIN))
                       * gives_max(RUNTIME_MIN))
    density = statistics.NormalDist(math.log(RUNTIME_MEDIAN), RUNTIME_SIGMA).pdf
    for i in range(points):
        log_runtime = math.log(lo) + step * (i + 0.5)
        grid.append(math.exp(log_runtime))
        weights.append(density(log_runtime) * step * gives_max(math.exp(log_runtime)))
    return grid, weights


def known_distributions(rng, history, elapsed, cap, used=()) -> float:
    """`jobs.queue.eta`'s runtime draw for a replay that knows the generator: the runtime drawn from
    its true distribution given the job's maximum runtime and that it has run ``elapsed``."""
    grid, weights = _posterior(cap)
    first = bisect.bisect_right(grid, elapsed)
    if first == len(grid) or not any(weights[first:]):
        return (elapsed + grid[-1]) / 2
    return rng.choices(grid[first:], weights[first:])[0]


KNOWS = {
    # what the estimate is fed: the platform's records (shipped), or more than it can know
    "records": "the platform's records (the shipped estimator)",
    "distributions": "the generator's runtime distribution given each job's maximum runtime",
    "runtimes": "every job's true runtime",
}


class Cluster:
    """BestEffortFIFO queues, one per team, each at its nominal quota."""

    def __init__(self, estimate: bool, reserves: bool = False, knows: str = "records"):
        self.reserves = reserves
        self.knows = knows
        self.nominal = {team: gpus for _, team, gpus in TEAMS}
        self.flavor_of = {team: flavor for flavor, team, _ in TEAMS}
        self.running: dict[str, dict[int, tuple[Sub, float]]] = defaultdict(dict)
        self.waiting: dict[str, list[Sub]] = defaultdict(list)
        # as the platform reads them (`jobs.outlook.estimates`): per team, its last ended jobs of each size
        # and of any size, as (runtimes, used shares)
        self.ended: dict[tuple[str, int | None], deque] = defaultdict(lambda: deque(maxlen=eta.HISTORY))
        self.admitted_at: dict[str, deque] = defaultdict(deque)
        self.ends: list[tuple[float, int, str]] = []
        self.estimate = estimate
        self.asked: dict[int, tuple] = {}  # pk -> (raw eta, naive, flavor, submitted at)
        self.outcomes: dict[str, list] = defaultdict(list)  # flavor -> (p10, p50, p90, wait, naive)
        self.pairs: dict[str, list] = defaultdict(list)  # flavor -> (raw p50, p10, p90, wait)
        self.calibration: dict[str, eta.Calibration] = {}
        self.waits: list[float] = []
        self.big_waits: list[float] = []
        self.on_cluster: set[int] = set()  # waiting jobs let go to Kueue

    def used(self, team) -> int:
        return sum(s.gpus for s, _ in self.running[team].values())

    def _order(self, team):
        self.waiting[team].sort(key=lambda s: (-s.priority, s.at, s.pk))

    def admit(self, team, now):
        """What the platform and Kueue start now (`jobs.queue.backfill.walk`): in order, each job
        that fits and cannot delay the head's reservation; the head is let onto the cluster,
        and a job on the cluster starts whenever it fits."""
        self._order(team)
        waiting = self.waiting[team]
        decisions = backfill.walk(
            self.nominal[team], self.nominal[team] - self.used(team),
            [(at + s.max_runtime, s.gpus) for s, at in self.running[team].values()],
            [backfill.Candidate(s.gpus, s.max_runtime, not self.reserves or s.pk in self.on_cluster) for s in waiting],
            now).decisions
        self.waiting[team] = []
        for sub, decision in zip(waiting, decisions, strict=True):
            if decision is backfill.Decision.START:
                self.start(sub, now)
            else:
                if decision is backfill.Decision.WAIT:
                    self.on_cluster.add(sub.pk)
                self.waiting[team].append(sub)

    def start(self, sub, now):
        self.running[sub.team][sub.pk] = (sub, now)
        heapq.heappush(self.ends, (now + min(sub.runtime, sub.max_runtime), sub.pk, sub.team))
        self.admitted_at[sub.team].append(now)
        wait = now - sub.at
        self.waits.append(wait)
        if sub.gpus >= 8:
            self.big_waits.append(wait)
        if sub.pk in self.asked:
            raw, naive, flavor, _ = self.asked.pop(sub.pk)
            fixed = eta.calibrate(raw, self.calibration.get(flavor, eta.Calibration()))
            self.outcomes[flavor].append((fixed.p10, fixed.p50, fixed.p90, wait, naive))
            self.pairs[flavor].append((raw.p50, raw.p10, raw.p90, wait))
            if len(self.pairs[flavor]) % 10 == 0:  # recalibrated as errors come in
                self.calibration[flavor] = eta.Calibration.fit(self.pairs[flavor][-400:])

    def end(self, pk, team, now):
        sub, started = self.running[team].pop(pk)
        for key in ((team, sub.gpus), (team, None)):
            self.ended[key].append((now - started, min((now - started) / sub.max_runtime, 1.0)))
        self.admit(team, now)

    def submit(self, sub, now):
        self.waiting[sub.team].append(sub)
        self.admit(sub.team, now)
        if self.estimate and any(w.pk == sub.pk for w in self.waiting[sub.team]):
            self.ask(sub, now)

    def ask(self, sub, now):
        team = sub.team
        self._order(team)

        told = {}

        def past(s):  # (runtimes, used shares) the estimate is told for job s: its size's, else any size's
            if self.knows == "runtimes":  # its own true runtime, the one value the draw can pick
                return (s.runtime,), ()
            if s.gpus not in told:
                ended = self.ended.get((team, s.gpus)) or self.ended[(team, None)]
                told[s.gpus] = (tuple(r for r, _ in ended), tuple(u for _, u in ended))
            return told[s.gpus]

        queue = eta.Queue(
            capacity=self.nominal[team], ceiling=self.nominal[team], reserves=self.reserves,
            running=tuple(eta.Runner(s.gpus, now - at, s.max_runtime, *past(s)) for s, at in self.running[team].values()),
            waiting=tuple(eta.Waiter(w.gpus, w.max_runtime, past(w)[0], w.pk == sub.pk, past(w)[1],
                                     not self.reserves or w.pk in self.on_cluster)
                          for w in self.waiting[team]),
        )
        raw = eta.estimate(queue, draws=DRAWS, draw=known_distributions if self.knows == "distributions" else None)
        if not raw.known:
            return
        position = [w.pk for w in self.waiting[team]].index(sub.pk)
        recent = self.admitted_at[team]
        while recent and recent[0] < now - 3600:
            recent.popleft()
        self.asked[sub.pk] = (raw, eta.naive(position, len(recent) / 3600.0), self.flavor_of[team], now)

    def run(self, subs):
        for sub in subs:
            while self.ends and self.ends[0][0] <= sub.at:
                at, pk, team = heapq.heappop(self.ends)
                self.end(pk, team, at)
            self.submit(sub, sub.at)
        while self.ends:
            at, pk, team = heapq.heappop(self.ends)
            self.end(pk, team, at)
        return self


def share_waiting(trace) -> float:
    waits = Cluster(estimate=False).run(trace).waits
    return sum(1 for w in waits if w > FIVE_MINUTES) / max(len(waits), 1)


def scaled(make) -> tuple[float, list[Sub]]:
    """The lowest load (x1.25 steps) at which >= 30 % of the GPU jobs wait over 5 minutes."""
    load = 0.5
    while True:
        trace = make(load)
        if share_waiting(trace) >= 0.30 or load > 50:
            return load, trace
        load *= 1.25


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _against_targets(name, acc) -> str:
    """The issue's targets, met or not, in one line."""
    if acc.median_rel_error is None or acc.coverage is None:
        return f"- {name}: no job waited over 5 minutes with an estimate"
    lower = 1 - acc.median_rel_error / acc.naive_median_rel_error if acc.naive_median_rel_error else None
    checks = [f"median error {acc.median_rel_error:.0%} (target < 25 %: {'met' if acc.median_rel_error < 0.25 else 'missed'})",
              f"coverage {acc.coverage:.0%} (target 75-85 %: {'met' if 0.75 <= acc.coverage <= 0.85 else 'missed'})"]
    if lower is not None:
        checks.append(f"{lower:.0%} below the naive error (target >= 30 %: {'met' if lower >= 0.30 else 'missed'})")
    return f"- {name}: " + "; ".join(checks)


QUEUES = {"besteffort": False, "reserving": True}  # the flavor's backfill off (the default) and on


def main() -> int:
    lines = ["# make bench-eta", "", f"{JOBS} jobs a trace, {DRAWS} draws an estimate; jobs that waited > 5 min.",
             "Queue: `besteffort` is Kueue's BestEffortFIFO alone (a flavor's default); `reserving` adds the "
             "platform's reservation for the first waiting job (`GpuFlavor.backfill`).", "",
             "| trace | queue | flavor | load | waited>5min | 8-GPU p90 wait | jobs | median rel. error | "
             "p10-p90 coverage | naive median rel. error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    references = ["", "What the same estimator reaches when told more than the platform can know "
                  "(`besteffort`, all flavors): the floor its information sets.", "",
                  "| trace | told | jobs | median rel. error | p10-p90 coverage |", "|---|---|---|---|---|"]
    notes = []
    for name, make in (("alibaba-gpu-2023", alibaba), ("bursty-week", bursty)):
        load, trace = scaled(make)
        for queue, reserves in QUEUES.items():
            cluster = Cluster(estimate=True, reserves=reserves).run(trace)
            waited = sum(1 for w in cluster.waits if w > FIVE_MINUTES) / len(cluster.waits)
            big = eta.words(eta._quantile(cluster.big_waits, 0.9)) if cluster.big_waits else "n/a"
            per_flavor = {flavor: eta.accuracy(rows) for flavor, rows in sorted(cluster.outcomes.items())}
            per_flavor["all"] = eta.accuracy([r for rows in cluster.outcomes.values() for r in rows])
            for flavor, acc in per_flavor.items():
                print(f"RESULT eta trace={name} queue={queue} flavor={flavor} jobs={acc.jobs} "
                      f"median_rel_error={_fmt(acc.median_rel_error)} coverage={_fmt(acc.coverage)} "
                      f"naive_median_rel_error={_fmt(acc.naive_median_rel_error)}", flush=True)
                lines.append(f"| {name} | {queue} | {flavor} | {load:.2f} | {waited:.0%} | {big} | {acc.jobs} | "
                             f"{_fmt(acc.median_rel_error)} | {_fmt(acc.coverage)} | {_fmt(acc.naive_median_rel_error)} |")
            notes.append(_against_targets(f"{name}, {queue}", per_flavor["all"]))
        for knows in ("distributions", "runtimes"):
            cluster = Cluster(estimate=True, knows=knows).run(trace)
            acc = eta.accuracy([r for rows in cluster.outcomes.values() for r in rows])
            print(f"RESULT eta-reference trace={name} queue=besteffort knows={knows} jobs={acc.jobs} "
                  f"median_rel_error={_fmt(acc.median_rel_error)} coverage={_fmt(acc.coverage)}", flush=True)
            references.append(f"| {name} | {KNOWS[knows]} | {acc.jobs} | {_fmt(acc.median_rel_error)} | {_fmt(acc.coverage)} |")
    lines += references
    lines += ["", "Against the targets (jobs that waited > 5 min, all flavors):", "", *notes]
    (ROOT / "bench" / "results" / "eta.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
