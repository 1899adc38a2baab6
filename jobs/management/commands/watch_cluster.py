"""Run the status watcher until interrupted (started like the Celery worker)."""

import signal

from django.core.management.base import BaseCommand, CommandError

from core.reconcile import NoCluster, current_cluster
from jobs.watcher import StatusWatcher


class Command(BaseCommand):
    help = "Watch the objects the platform owns and bring job states back into the database."

    def add_arguments(self, parser):
        parser.add_argument("--resync", type=float, default=60, help="seconds between full re-checks (default 60)")

    def handle(self, *args, resync: float, **options):
        try:
            cluster = current_cluster()
        except NoCluster as err:
            raise CommandError(str(err)) from None
        watcher = StatusWatcher(cluster, resync_seconds=resync)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: watcher.stop())
        self.stdout.write("Watching jobs, workloads, pods and gangs; Ctrl-C to stop.")
        watcher.run()
        self.stdout.write(f"Stopped after {watcher.transitions} job updates.")
