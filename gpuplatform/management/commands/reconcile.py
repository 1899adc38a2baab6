"""Reconcile now, in this process, and print what was applied and pruned."""

import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from cluster import ClusterError
from core.owners import Scope, registered
from core.reconcile import NoCluster, Outcome, current_cluster

from ...owners import steps


class Command(BaseCommand):
    help = "Apply the desired state to the cluster: --all, --team SLUG or --job ID."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", action="store_true", help="cluster-wide objects, every team, every live job")
        which.add_argument("--team", metavar="SLUG")
        which.add_argument("--job", metavar="ID", type=int)
        parser.add_argument("--parallel", type=int, default=8, metavar="N",
                            help="teams and jobs reconciled at once (default 8)")

    def handle(self, *args, all: bool, team: str | None, job: int | None, parallel: int, **options):
        try:
            cluster = current_cluster()
        except NoCluster as err:
            raise CommandError(str(err)) from None
        cluster.reset_counts()
        self._done = 0
        self._lock = threading.Lock()
        stages = self._plan(all, team, job)
        total = sum(len(stage) for stage in stages)
        outcome = Outcome()
        # Stages run in order (cluster-wide objects, then teams, then jobs); the steps of a
        # stage run in parallel.
        for stage in stages:
            if parallel <= 1:
                for label, step in stage:
                    outcome += self._report(label, self._run(step, cluster, own_thread=False), total)
                continue
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                futures = {pool.submit(self._run, step, cluster): label for label, step in stage}
                for future in as_completed(futures):
                    outcome += self._report(futures[future], future.result(), total)
        unchanged = len(outcome.applied) - sum(r.wrote for r in outcome.applied)
        counts = ", ".join(f"{verb} {n}" for verb, n in sorted(cluster.requests.items())) or "none"
        self.stdout.write(self.style.SUCCESS(
            f"{outcome.writes} writes ({unchanged} objects already up to date, {len(outcome.pruned)} pruned); "
            f"API requests: {counts}"
        ))

    @staticmethod
    def _run(step, cluster, own_thread: bool = True):
        try:
            return step(cluster)
        except ClusterError as err:
            return err
        finally:
            if own_thread:
                connections.close_all()  # the pool thread's database connection

    def _report(self, label: str, result, total: int) -> Outcome:
        with self._lock:
            self._done += 1
            self.stdout.write(f"[{self._done}/{total}] {label}")
            if isinstance(result, ClusterError):
                self.stderr.write(self.style.ERROR(f"    failed: {result}"))
                return Outcome()
            for line in result.lines():
                self.stdout.write(f"    {line}")
            return result

    @staticmethod
    def _plan(everything: bool, slug: str | None, job_id: int | None) -> list[list]:
        """One stage per scope (`gpuplatform.owners`), each item reconciled by every owner
        of its scope in turn: the cluster-wide objects, then every team, then every live job."""
        if everything:
            return [stage for scope in Scope if (stage := steps(scope))]
        scope, label = (Scope.TEAM, slug) if slug else (Scope.JOB, str(job_id))
        owner = next(o for o in registered() if o.scope is scope)
        key = owner.key_for(label)
        stage = [] if key is None else steps(scope, [key])
        if not stage:
            raise CommandError(f"No {scope} {slug!r}." if slug else f"No {scope} {job_id}.")
        return [stage]
