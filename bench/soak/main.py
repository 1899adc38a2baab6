"""``make soak``: set the world up, run the compressed day, check, print the table.

1. the soak's own cluster (cluster.sh up), database (fresh, migrated) and Redis database;
2. an empty cluster, the teams and quotas, a first reconcile;
3. the observer, then the real processes: API (gunicorn), Celery worker, Celery beat
   (sweep every SOAK_SWEEP_SECONDS), status watcher (manage.py watch_cluster);
4. the run (``scenario.Run``), with its quiet windows;
5. settle, check every invariant, print the table; stop what was started. The cluster
   stays up for the next run (GPUPLATFORM_CLUSTER_STOP=1 stops it), emptied of the run's
   objects unless SOAK_KEEP=1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from datetime import datetime, timezone

from . import checks, world
from . import plan as plan_module
from .checks import Row
from .observer import CLUSTER_QUEUE, DEPLOYMENT, JOB_OBJECT_KINDS, QUEUED_KINDS, VOLCANO_QUEUE, WORKLOAD, Observer
from .processes import Processes, cluster_sh, cluster_up, kubectl
from .profile import ROOT, Profile, load, platform_env
from .timeline import accounts

SETTLE_SECONDS = 60


def main() -> int:
    profile = load()
    print(f"==> soak: {profile.minutes:g} min, {profile.jobs_per_kind} jobs per kind, database "
          f"{profile.database_name}, Redis {profile.redis_url}, logs {profile.logs}", flush=True)
    cluster = cluster_up(profile)
    kubeconfig = cluster["kubeconfig"]
    env = platform_env(profile, cluster)
    world.fresh_database(profile)
    world.migrate(env)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings

    from cluster import Cluster

    print("==> emptying the soak cluster of earlier runs", flush=True)
    world.empty_cluster(kubeconfig)
    tokens = world.seed()
    world.first_reconcile(env)
    observer = Observer(Cluster(kubeconfig=kubeconfig, field_manager="soak-observer"), settings.KUBE_FIELD_MANAGER)
    observer.start()
    import redis

    broker = redis.Redis.from_url(profile.redis_url)
    # The soak's own Redis database: tasks an earlier run left queued name job ids that a
    # fresh database gives to new jobs.
    broker.flushdb()
    procs = Processes(profile, env)
    try:
        procs.start_all()
        from .scenario import Run

        run = Run(profile, plan_module.build(profile), tokens, observer=observer, procs=procs,
                  kubeconfig=kubeconfig, env=env, redis=broker)
        grant_start, grant_end = world.dated_grants(profile, datetime.fromtimestamp(run.t0, timezone.utc))
        drain = world.dated_drain(profile, datetime.fromtimestamp(run.t0, timezone.utc))
        run.run()
        rows = final_checks(profile, run, observer, grant_start.timestamp(), grant_end.timestamp(),
                            tuple(at.timestamp() for at in drain))
    finally:
        procs.stop_all()
        observer.stop()
        if not profile.keep:  # leave an idle cluster; the next run waits for the deletion to end
            kubectl(kubeconfig, "delete", "namespaces", "-l", "app.kubernetes.io/managed-by=gpuplatform", "--wait=false")
        if profile.stop_cluster:
            cluster_sh(profile, "down")
    print("\n" + checks.table(rows), flush=True)
    broken = [r for r in rows if r.ok is False]
    print(f"\n==> soak {'FAILED: ' + str(len(broken)) + ' broken' if broken else 'passed'} "
          f"(logs in {profile.logs})", flush=True)
    return 1 if broken else 0


def settle(run, observer: Observer) -> tuple[dict, dict, list[str]]:
    """Wait (bounded) until every row shows what the cluster shows; return the last look."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        jobs = checks.load_jobs(run.job_ids(), run.cancels())
        with observer.lock:
            found = accounts(observer, jobs, run.labels())
        wrong, _ = checks.verdicts(jobs, found)
        if not wrong or time.monotonic() > deadline:
            return jobs, found, wrong
        time.sleep(2)


def charged_hours(start, end) -> float:
    """The GPU-hours the soak teams' GPU intervals hold between `start` and `end`: what the
    platform charges (the GPUs its pods held on nodes, `jobs.models.intervals`)."""
    from jobs.models import GpuInterval

    seconds = 0.0
    for interval in GpuInterval.objects.filter(team__slug__in=world.TEAMS, started_at__lt=end):
        held = min(interval.ended_at or end, end) - max(interval.started_at, start)
        seconds += interval.gpus * max(held.total_seconds(), 0.0)
    return seconds / 3600


def final_checks(profile: Profile, run, observer: Observer, grant_start: float, grant_end: float,
                 drain: tuple[float, float, float]) -> list[Row]:
    from console.accounting import usage_rows
    from jobs.models import Job
    from tenants.models import Team

    jobs, found, wrong = settle(run, observer)
    until = time.time()
    per_kind = Counter(p.label for p in run.plan if p.job_id is not None)
    _, tally = checks.verdicts(jobs, found)
    rows = [
        Row("run", f"{profile.minutes:g} min, {run.sweeps()} sweeps every {profile.sweep_seconds}s, broker queue "
                   f"at most {run.max_queue}, API retries {sum(a.retries for a in run.apis.values())}", None),
        Row(f"jobs submitted per kind (at least {profile.jobs_per_kind}; Ray and notebooks "
            f"{plan_module.wanted('kueue-notebook', profile)})",
            ", ".join(f"{k} {per_kind[k]}" for k in plan_module.KINDS),
            all(per_kind[k] >= plan_module.wanted(k, profile) for k in plan_module.KINDS)),
        Row("  final rows by state", ", ".join(f"{s} {n}" for s, n in sorted(tally.items())), None),
    ]
    rows += coverage(profile, run, observer, found, grant_start, grant_end)
    rows += checks.restarts_row(found)
    found_lags = checks.lags(jobs, found)
    rows += checks.lag_row(found_lags, profile.lag_budget_seconds)
    rows.append(checks.phantom_preemptions(jobs, found, profile.lag_budget_seconds))
    evictable = plan_module.EVICTED_WHOLE
    rows.append(checks.preemptions_charged({p.job_id for p in run.plan if p.job_id and p.label in evictable}
                                           & set(found), found, run.cancels()))
    pool = {p.job_id for p in run.plan if p.job_id and plan_module.KINDS[p.label][1] == world.DRAIN[0]} & set(found)
    with observer.lock:
        held = checks.held_from(observer.stop_policies, f"-{world.DRAIN[0]}", drain[0])
    rows += checks.drain_rows(pool, found, drain, run.cancels(), held)
    rows.append(Row("every job shows the state the cluster gave it", f"{len(wrong)} differ"
                    + (f" ({'; '.join(wrong[:4])})" if wrong else ""), not wrong))
    with observer.lock:
        orphans = [f"{i.kind[1]} {i.namespace}/{i.name} belongs to no job" for i in observer.objects.values()
                   if i.kind in (*QUEUED_KINDS, DEPLOYMENT) and i.job is not None
                   and i.job not in jobs]
        job_writes = [(i.kind, what) for i in observer.objects.values()
                      if i.kind in JOB_OBJECT_KINDS
                      for _, what in i.platform_writes]
    db_rows = Job.objects.filter(team__slug__in=world.TEAMS).count()
    rows.append(checks.exactly_once(run.plan, jobs, found, orphans, db_rows, run.retry_mismatches))
    rows += checks.writes_rows(job_writes, run.windows, [(w["at"], w["reconcile"][1]) for w in run.windows])
    rows.append(replicas_kept(run, observer))
    start, end = (datetime.fromtimestamp(t, timezone.utc) for t in (run.t0, until))
    report = usage_rows(start, end, teams=Team.objects.filter(slug__in=world.TEAMS), now=end)
    every_lag = [v for values in found_lags.values() for v in values]
    edge = min(profile.lag_budget_seconds, checks.percentile(every_lag, 99) + 1) if every_lag else profile.lag_budget_seconds
    rows += checks.gpu_hours(jobs, found, until, edge, float(sum(r.gpu_hours for r in report)), len(report),
                             charged_hours(start, end))
    with observer.lock:
        workloads = observer.job_objects(WORKLOAD)
    dump(profile, run, jobs, found, workloads)
    from jobs.models import IdleWatch

    from .profile import IDLE_POLICY

    watched = {w.job_id: (w.warned_at.timestamp() if w.warned_at else None,
                          w.reclaim_at.timestamp() if w.reclaim_at else None)
               for w in IdleWatch.objects.filter(job_id__in=[p.job_id for p in run.plan if p.job_id])}
    rows += checks.idle_rows(run.plan, {job_id: job["state"] for job_id, job in jobs.items()}, watched,
                             IDLE_POLICY["GRACE_SECONDS"], IDLE_POLICY["SWEEP_SECONDS"], run.apiserver_away)
    rows.append(Row("errors (API, processes, faults)", "; ".join(run.errors[:5]) or "none", not run.errors))
    return rows


def coverage(profile: Profile, run, observer: Observer, found: dict, grant_start: float, grant_end: float) -> list[Row]:
    """The run did what it claims: borrowing, preemption, cancels, grants, faults."""
    borrowed = 0
    preempted = sum(1 for a in found.values() if a.preempted is not None)
    start_seen = end_seen = None
    # The queues the grants change, found on the cluster by team label and flavor/resource.
    (g_team, g_flavor, g_gpus, _), (l_team, l_flavor, _, _) = world.GRANT_STARTS, world.GRANT_ENDS
    granted_key = f"{g_flavor}/{world.FLAVORS[g_flavor][1]}"
    granted = str(world.QUOTAS[g_team][g_flavor] + g_gpus)
    lapsed = str(world.QUOTAS[l_team][l_flavor])
    grant_queue = lapse_queue = "?"
    with observer.lock:
        for info in observer.of_kind(CLUSTER_QUEUE):
            for at, (quota, used) in info.history:
                borrowed = max([borrowed] + [int(v) for name, v in used if name == "nvidia.com/gpu" and v.isdigit()])
                if info.team == g_team and granted_key in dict(quota):
                    grant_queue = info.name
                    if start_seen is None and at >= grant_start - 1 and dict(quota)[granted_key] == granted:
                        start_seen = at
        for info in observer.of_kind(VOLCANO_QUEUE):
            for at, (capability, _) in info.history:
                resource = world.FLAVORS[l_flavor][1]
                # The team's Volcano queue of that flavor is the one whose capability names its resource.
                if info.team == l_team and resource in dict(capability):
                    lapse_queue = info.name
                    if end_seen is None and at >= grant_end - 1 and dict(capability)[resource] == lapsed:
                        end_seen = at
    bound = 6 * profile.sweep_seconds + profile.lag_budget_seconds
    cancels = sum(1 for p in run.plan if p.cancelled_at)

    def lag(seen, due) -> str:
        return "never" if seen is None else f"{max(0.0, seen - due):.0f}s"

    return [
        Row("cohort borrowing (most GPUs a queue borrowed)", str(borrowed), borrowed > 0),
        Row("jobs preempted on the cluster (Kueue eviction, Volcano restart)", str(preempted), preempted > 0),
        Row("cancellations through the API", str(cancels), cancels > 0),
        Row(f"dated grants on the cluster (within {bound:.0f}s)",
            f"start reached {grant_queue} after {lag(start_seen, grant_start)}, "
            f"end reached {lapse_queue} after {lag(end_seen, grant_end)}",
            start_seen is not None and end_seen is not None
            and start_seen - grant_start <= bound and end_seen - grant_end <= bound),
        Row("faults", "; ".join(f"{k}: {v}" for k, v in sorted(run.faults.items())) or "none",
            {"worker", "apiserver"} <= set(run.faults) and "ready again" in run.faults.get("apiserver", "")),
    ]


def replicas_kept(run, observer: Observer) -> Row:
    """An HPA-scaled Deployment keeps the replicas the HPA set, sweep after sweep."""
    resets = []
    with observer.lock:
        deployments = observer.job_objects(DEPLOYMENT)
    for job_id, scaled_at in run.scaled.items():
        for info in deployments.get(job_id, []):
            last = None
            for at, (replicas, _) in info.history:
                if at >= scaled_at and last == plan_module.SCALED_REPLICAS and replicas != last:
                    resets.append(f"#{job_id} back to {replicas}")
                last = replicas
    return Row(f"HPA-scaled Deployments keep {plan_module.SCALED_REPLICAS} replicas",
               f"{len(run.scaled)} scaled, {len(resets)} resets" + (f" ({'; '.join(resets[:3])})" if resets else ""),
               len(run.scaled) == 2 and not resets)


def dump(profile: Profile, run, jobs: dict, found: dict, workloads: dict) -> None:
    """Everything the table was computed from, per job, for a post-mortem: with each of its
    Kueue Workloads' conditions as the observer saw them change."""
    out = {job_id: {"row": {k: (str(v) if k == "events" else v) for k, v in job.items()},
                    "cluster": vars(found[job_id]),
                    "workloads": [{"name": w.name, "created": w.created, "deletion": w.deletion, "gone": w.gone,
                                   "history": w.history} for w in workloads.get(job_id, [])],
                    "plan": next((vars(p) for p in run.plan if p.job_id == job_id), None)}
           for job_id, job in jobs.items()}
    path = profile.logs / "soak-jobs.json"
    path.write_text(json.dumps(out, indent=1, default=str))
    print(f"==> per-job data: {path}", flush=True)
