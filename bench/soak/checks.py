"""The invariants of a day of operation, computed from the database and the cluster's own
account (``timeline``), and the table the soak prints at the end.

Each check gives a ``Row``: what was measured, the number, and whether it holds. A row
marked ``info`` only reports; every other row that fails makes the soak exit non-zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone

from .timeline import Account

FINAL = {"succeeded", "failed", "cancelled"}


@dataclass
class Row:
    check: str
    result: str
    ok: bool | None  # None: information only

    @property
    def verdict(self) -> str:
        return "info" if self.ok is None else ("ok" if self.ok else "BROKEN")


def epoch(value) -> float | None:
    return value.timestamp() if value else None


def load_jobs(ids, cancels: dict[int, float]) -> dict[int, dict]:
    """The rows of the given jobs, as plain values (timestamps in epoch seconds)."""
    from jobs.models import Job, JobEvent

    jobs = {}
    for job in Job.objects.filter(pk__in=list(ids)).select_related("flavor", "team"):
        jobs[job.pk] = dict(
            id=job.pk, team=job.team.slug, name=job.name, state=job.state, kind=job.kind,
            workers=job.workers, min_replicas=job.min_replicas, total_gpus=job.total_gpus,
            admitted_at=epoch(job.admitted_at), started_at=epoch(job.started_at),
            finished_at=epoch(job.finished_at), events=[], recorded={}, cancel_requested=cancels.get(job.pk),
        )
    for job_id, at, recorded_at, state in (JobEvent.objects.filter(job_id__in=list(jobs)).order_by("created_at", "id")
                                           .values_list("job_id", "created_at", "recorded_at", "to_state")):
        jobs[job_id]["events"].append((at, state))
        # When the platform wrote each step down (the events' times are the cluster's).
        jobs[job_id]["recorded"].setdefault(state, []).append(epoch(recorded_at))
    return jobs


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def lags(jobs: dict[int, dict], accounts: dict[int, Account]) -> dict[str, list[float]]:
    """Seconds from the cluster's transition to when the platform wrote it down, per kind of
    step (the rows carry the cluster's time where it keeps one: their write time is the lag)."""
    found: dict[str, list[float]] = defaultdict(list)
    for job_id, job in jobs.items():
        account = accounts[job_id]
        written = job["recorded"]
        first = {state: times[0] for state, times in written.items()}
        pairs = [("admitted", first.get("admitted"), account.admitted), ("running", first.get("running"), account.running)]
        recorded = written.get("preempted", [])
        for preempted in account.preemptions:
            # The first preemption written at or after the cluster's (its timestamp is cut to the second).
            pairs.append(("preempted", next((r for r in recorded if r >= preempted - 1), None), preempted))
        if job["state"] in ("succeeded", "failed"):
            pairs.append(("finished", first.get(job["state"]), account.finished))
        for step, row_time, cluster_time in pairs:
            if row_time is None or cluster_time is None:
                continue
            if step == "running" and any(cluster_time < at <= row_time for at in account.preemptions):
                # That run was preempted before its step was written (it ran a second or two):
                # the step written is a later run's, no lag of this one. The preemption rows
                # and the GPU-hours row judge what the short run cost.
                continue
            found[step].append(row_time - cluster_time)
    return found


def lag_row(found: dict[str, list[float]], budget: float) -> list[Row]:
    every = [v for values in found.values() for v in values]
    if not every:
        return [Row("status lag, cluster -> database", "no transitions measured", False)]
    p50, p99 = percentile(every, 50), percentile(every, 99)
    steps = ", ".join(f"{step} {percentile(v, 50):.1f}/{percentile(v, 99):.1f}s (n={len(v)})"
                      for step, v in sorted(found.items()))
    return [
        Row("status lag p50 / p99 (budget p99 <= %.0fs)" % budget,
            f"{p50:.1f}s / {p99:.1f}s over {len(every)} transitions", p99 <= budget),
        Row("  per step p50/p99", steps, None),
    ]


def preemptions_charged(kueue_jobs: set[int], accounts: dict[int, Account], cancels: dict[int, float]) -> Row:
    """Every preemption Kueue made of a soak job is recorded with the job that took its GPUs,
    whose team is charged the hours lost (docs/preemption.md): one `jobs.Preemption` with a
    preemptor per eviction the cluster showed, but of a job already cancelled (its owner gave
    its GPUs back; its objects were on their way out)."""
    from jobs.models import Preemption

    made = {(job_id, round(at)) for job_id in kueue_jobs for at in accounts[job_id].preemptions
            if job_id not in cancels or at < cancels[job_id]}
    charged = {(job_id, round(at.timestamp())) for job_id, at in Preemption.objects.filter(
        job_id__in=kueue_jobs, by_team__isnull=False).values_list("job_id", "preempted_at")}
    missing = sorted(made - charged)
    return Row("preemptions charged to the preemptor", f"{len(made & charged)} of {len(made)}"
               + (f" (not: #{', #'.join(str(j) for j, _ in missing[:6])})" if missing else ""), not missing)


def held_from(stop_policies: dict[str, list[tuple[float, str]]], suffix: str, start: float) -> float | None:
    """When every ClusterQueue of the drained flavor (named ``...-<flavor>``) was seen at
    ``stopPolicy: Hold`` from the drain's start on: when the hold reached the cluster."""
    queues = {name: seen for name, seen in stop_policies.items() if name.endswith(suffix)}
    firsts = [next((at for at, policy in seen if policy == "Hold" and at >= start - 1), None) for seen in queues.values()]
    return max(firsts) if firsts and None not in firsts else None


def drain_rows(pool_jobs: set[int], accounts: dict[int, Account], window: tuple[float, float, float],
               cancels: dict[int, float], held: float | None) -> list[Row]:
    """The drain window (docs/drain.md) on the cluster's own record. From the moment the pool's
    queues were held on the cluster (``held``: the sweep's `drain_windows` and a reconcile after
    the drain's start) until it reopened: no job that held GPUs of the pool then was evicted or
    failed (cancels aside), and nothing was admitted; after it reopened, jobs were admitted."""
    start, _, reopen = window
    if held is None:
        return [Row("jobs killed by a drain", "the pool's queues were never seen held", False)]
    held_at_start, killed, admitted_inside, admitted_after = [], [], [], []
    for job_id in sorted(pool_jobs):
        account = accounts[job_id]
        edges = sorted((at, holding) for at, holding in account.edges if at is not None)
        holding = False
        for at, on in edges:
            if at > held:
                break
            holding = on
        if holding:
            held_at_start.append(job_id)
            cancelled = job_id in cancels and held <= cancels[job_id] <= reopen
            evicted = [at for at in account.preemptions if held <= at <= reopen]
            failed = account.verdict == "failed" and account.finished is not None and held <= account.finished <= reopen
            if (evicted or failed) and not cancelled:
                killed.append(job_id)
        # Kubernetes stamps conditions in whole seconds: an admission stamped s happened in
        # [s, s + 1), inside the window only if it ended before the reopening.
        admissions = [at for at, on in edges if on]
        if any(held < at and at + 1 <= reopen for at in admissions):
            admitted_inside.append(job_id)
        if any(at + 1 > reopen for at in admissions):
            admitted_after.append(job_id)
    ids = lambda found: f" (#{', #'.join(map(str, found[:6]))})" if found else ""  # noqa: E731
    return [
        Row("jobs killed by a drain", f"{len(killed)} of {len(held_at_start)} on the pool when its queues held "
            f"({held - start:.0f}s after the drain's start)" + ids(killed), not killed and bool(held_at_start)),
        Row("jobs admitted to a drained pool before it reopened", str(len(admitted_inside)) + ids(admitted_inside),
            not admitted_inside),
        Row("jobs admitted after the pool reopened", str(len(admitted_after)), None),
    ]


def phantom_preemptions(jobs: dict[int, dict], accounts: dict[int, Account], budget: float) -> Row:
    """Preemptions the database records that the cluster never made (no Kueue eviction, no
    Volcano restart within the lag budget before it)."""
    phantoms = []
    for job_id, job in sorted(jobs.items()):
        cluster = accounts[job_id].preemptions
        for at, state in job["events"]:
            t = epoch(at)
            if state == "preempted" and not any(c - 1 <= t <= c + budget for c in cluster):
                phantoms.append(job_id)
    jobs_hit = sorted(set(phantoms))
    return Row("preemptions recorded that the cluster never made", f"{len(phantoms)} in {len(jobs_hit)} jobs"
               + (f" (#{', #'.join(map(str, jobs_hit[:6]))})" if jobs_hit else ""), not phantoms)


def verdicts(jobs: dict[int, dict], accounts: dict[int, Account]) -> tuple[list[str], Counter]:
    """Jobs whose row does not show the state the cluster gave them."""
    wrong, tally = [], Counter()
    for job_id, job in sorted(jobs.items()):
        account, state = accounts[job_id], job["state"]
        cancelled = job["cancel_requested"] is not None
        expected = {
            "succeeded": {"succeeded"}, "failed": {"failed"},
            "gone": set(), "absent": set(),
        }.get(account.verdict)
        if expected is not None and cancelled:
            # A cancel and the job's own end can cross: either end is the cluster's word.
            expected = expected | {"cancelled"}
        if state == "reclaimed":  # the platform stopped it (idle GPUs): idle_rows judge whether rightly
            good = account.verdict != "succeeded"
        elif expected is None:  # live on the cluster: the row must be live (and not stuck cancelling)
            good = state not in FINAL and not (cancelled and state == "cancelling")
        else:
            good = state in expected
        tally[state] += 1
        if not good:
            wrong.append(f"#{job_id} {account.label}: cluster {account.verdict}, row {state}")
    return wrong, tally


def exactly_once(planned, jobs: dict[int, dict], accounts: dict[int, Account], orphans: list[str],
                 db_rows: int, retry_mismatches: list[str]) -> Row:
    ids = [p.job_id for p in planned if p.job_id is not None]
    names = Counter((jobs[i]["team"], jobs[i]["name"]) for i in ids if i in jobs)
    problems = [f"{db_rows - len(set(ids))} extra rows"] if db_rows != len(set(ids)) else []
    problems += [f"{team}/{name} x{n}" for (team, name), n in names.items() if n > 1]
    problems += [f"#{i} missing from the database" for i in ids if i not in jobs]
    problems += [f"#{i} has {a.workload_objects} workload objects" for i, a in accounts.items() if a.workload_objects > 1]
    problems += [f"#{i} never reached the cluster" for i, a in accounts.items()
                 if a.workload_objects == 0 and jobs[i]["cancel_requested"] is None]
    problems += orphans + retry_mismatches
    result = f"{len(ids)} submitted, {db_rows} rows, {sum(1 for a in accounts.values() if a.workload_objects)} on the cluster"
    if problems:
        result += "; " + "; ".join(problems[:5]) + (f" (+{len(problems) - 5})" if len(problems) > 5 else "")
    return Row("every job once in the database and once on the cluster", result, not problems)


def gpu_hours(jobs: dict[int, dict], accounts: dict[int, Account], until: float, edge: float,
              report_total: float, report_rows: int, charged_total: float) -> list[Row]:
    """Accounting (the platform's admitted intervals, from job events) against the intervals
    the cluster's own timestamps give. Each interval has two edges; the row stamps each one
    ``edge`` seconds after the cluster at most (the measured p99 status lag plus the second
    the cluster's timestamps are cut to), so a job may differ by 2 x edge x intervals x GPUs."""
    from jobs.use.usage import admitted_intervals

    until_dt = datetime.fromtimestamp(until, timezone.utc)
    db_total = cluster_total = tolerance_total = 0.0
    off, unmeasured = [], 0
    for job_id, job in jobs.items():
        intervals = admitted_intervals(job["events"], until_dt)
        db_seconds = sum((hi - lo).total_seconds() for lo, hi in intervals)
        account = accounts[job_id]
        if account.label.startswith("volcano") and account.admitted is None and job["state"] == "admitted":
            # A gang Volcano has put Inqueue whose pods are not created yet when the run
            # ends: the cluster keeps no timestamp for Inqueue, so there is nothing to
            # compare with (the first pod stands in for it once it exists).
            unmeasured += 1
            continue
        cluster_seconds, n = account.held_seconds(until)
        gpus = job["total_gpus"]
        tolerance = 2 * edge * max(len(intervals), n, 1)
        db_total += db_seconds * gpus
        cluster_total += cluster_seconds * gpus
        tolerance_total += tolerance * gpus
        if abs(db_seconds - cluster_seconds) > tolerance:
            off.append(f"#{job_id} {db_seconds:.0f}s vs {cluster_seconds:.0f}s")
    rows = [
        Row("GPU-hours: accounting vs cluster intervals",
            f"{db_total / 3600:.3f} vs {cluster_total / 3600:.3f} GPU-h (tolerance {tolerance_total / 3600:.3f}, "
            f"edge {edge:.1f}s); "
            f" jobs off: {len(off)}" + (f" ({'; '.join(off[:4])})" if off else "")
            + (f"; {unmeasured} Volcano gangs admitted without pods yet, not comparable" if unmeasured else ""),
            not off and abs(db_total - cluster_total) <= tolerance_total),
        # The report charges what ran (the GPU intervals: pods on nodes, an inference server's
        # replicas as they scale), not the admitted time above times the job's maximum GPUs.
        Row("  usage report (console.accounting.usage_rows) total vs the GPU intervals",
            f"{report_total:.2f} vs {charged_total:.2f} GPU-h",
            # Each report row is rounded to 0.01 GPU-h, and rows under that are left out.
            abs(report_total - charged_total) <= 0.01 * (report_rows + 1)),
    ]
    return rows


def restarts_row(accounts: dict[int, Account]) -> list[Row]:
    by_label = Counter()
    for account in accounts.values():
        by_label[account.label] += account.restarts
    total = sum(by_label.values())
    evicted = sum(a.evictions for a in accounts.values())
    detail = ", ".join(f"{label} {n}" for label, n in sorted(by_label.items()) if n) or "none"
    return [Row("pod restarts outside preemption or cancel", f"{total} ({detail}); runs ended by the scheduler (preemption, eviction): {evicted}",
                total == 0)]


def writes_rows(job_object_writes: list[tuple], windows: list[dict], reconciles: list[tuple[str, int]]) -> list[Row]:
    kinds = Counter(f"{kind[1]} {what}" for kind, what in job_object_writes)
    detail = "; ".join(f"{k} x{n}" for k, n in kinds.most_common(4)) or "none"
    rows = [Row("platform writes to a job's objects after creation", f"{len(job_object_writes)} ({detail})",
                not job_object_writes)]
    for window in windows:
        rows.append(Row(
            f"quiet window at {window['at']}: writes during {window['sweeps']} sweeps",
            f"{window['apply']} APPLY requests at the API server"
            + (f" ({window['by_resource']})" if window["by_resource"] else "")
            + f", {window['seen']} platform writes or prunes seen",
            window["apply"] == 0 and window["seen"] == 0 and window["sweeps"] >= 2))
    for at, writes in reconciles:
        rows.append(Row(f"reconcile --all twice ({at}): writes of the second", str(writes), writes == 0))
    return rows


def idle_rows(planned, states: dict[int, str], watches: dict[int, tuple], grace: float, sweep: float,
              away: tuple[float, float] | None = None) -> list[Row]:
    """Idle-GPU reclaim (plan.IDLE_SCENES): no busy job reclaimed; every idle one reclaimed
    within its grace and one sweep of its warning. ``watches``: job id -> (warned_at,
    reclaimed_at) in epoch seconds (jobs.IdleWatch; reclaim_at is when it was reclaimed).
    ``away``: when the API server was down (the fault); a job is reclaimed when its workload
    can be stopped, so a grace that ended then reclaims at the first sweep after it."""
    busy = [p.job_id for p in planned if p.scene.startswith("busy-") and p.job_id]
    idle = [p.job_id for p in planned if p.scene.startswith("idle") and p.job_id]
    busy_reclaimed = [f"#{j}" for j in busy if states.get(j) == "reclaimed"]
    late, on_time = [], 0
    for job_id in idle:
        warned, reclaimed = watches.get(job_id, (None, None))
        due = (warned or 0) + grace
        if away and away[0] <= due + sweep and away[1] > due:
            due = away[1]  # the grace ended while the API server was away
        if states.get(job_id) == "reclaimed" and warned and reclaimed and reclaimed <= due + sweep + 1:
            on_time += 1
        else:
            late.append(f"#{job_id} {states.get(job_id)}"
                        + (f" after {reclaimed - warned:.0f}s" if warned and reclaimed else ""))
    return [
        Row("busy jobs reclaimed", str(len(busy_reclaimed)) + (f" ({', '.join(busy_reclaimed)})" if busy_reclaimed else "")
            + f" of {len(busy)} (steady, bursty, one busy rank)", not busy_reclaimed and bool(busy)),
        Row(f"idle jobs reclaimed within grace + one sweep ({grace:g}+{sweep:g}s)",
            f"{on_time} of {len(idle)}" + (f" ({'; '.join(late)})" if late else ""), bool(idle) and on_time == len(idle)),
    ]


def table(rows: list[Row]) -> str:
    width = max(len(r.check) for r in rows)
    lines = [f"{'check':<{width}}  {'verdict':<7}  result", f"{'-' * width}  {'-' * 7}  {'-' * 40}"]
    lines += [f"{r.check:<{width}}  {r.verdict:<7}  {r.result}" for r in rows]
    return "\n".join(lines)
