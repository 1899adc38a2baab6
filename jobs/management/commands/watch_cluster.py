"""Run the status watcher until interrupted (started like the Celery worker).

With leader election (``--leader-elect``, or WATCHER_LEADER_ELECTION=true as the Helm
chart sets it) several copies may run: the one holding the Lease watches, the others
wait and take over within seconds when it stops. A new leader starts with a full LIST
of every watched kind and re-checks every live job, so a change that happened while
nobody was watching still reaches the database. The leader, and only it, also runs what
must run once for the platform (`jobs.watch.watcher.leading`: the heal). A leader that cannot renew its Lease
stops and exits non-zero (Kubernetes restarts it as a standby).
"""

import os
import signal
import socket
import threading
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from cluster.lease import LeaderElector, Leases
from core.metrics import LEADER, LEADER_TRANSITIONS
from core.reconcile import NoCluster, current_cluster
from jobs.watch.watcher import StatusWatcher, leading

LEASE_NAME = "gpuplatform-watcher"


class Command(BaseCommand):
    help = "Watch the objects the platform owns and bring job states back into the database."

    def add_arguments(self, parser):
        parser.add_argument("--resync", type=float, default=60, help="seconds between full re-checks (default 60)")
        parser.add_argument("--leader-elect", action="store_true", default=settings.WATCHER_LEADER_ELECTION,
                            help="wait for the Lease before watching (default: WATCHER_LEADER_ELECTION)")
        parser.add_argument("--lease-seconds", type=float, default=settings.WATCHER_LEASE_SECONDS,
                            help="how long a crashed leader keeps the Lease (default: WATCHER_LEASE_SECONDS)")
        parser.add_argument("--metrics-port", type=int, default=settings.METRICS_PORT,
                            help="serve Prometheus metrics on this port (default: METRICS_PORT; 0: off)")

    def handle(self, *args, resync: float, leader_elect: bool, lease_seconds: float, metrics_port: int, **options):
        try:
            cluster = current_cluster()
        except NoCluster as err:
            raise CommandError(str(err)) from None
        if metrics_port:
            from prometheus_client import start_http_server

            start_http_server(metrics_port)
        watcher = StatusWatcher(cluster, resync_seconds=resync)
        stop, lost = threading.Event(), threading.Event()
        _stop_on_signals(watcher, stop)
        elector = None
        if leader_elect:
            elector = self._take_the_lease(cluster, watcher, stop, lost, lease_seconds)
            if elector is None:  # stopped while waiting for it
                return
        self.stdout.write("Watching jobs, workloads, pods and gangs; Ctrl-C to stop.")
        try:
            self._start_leading(watcher)
            watcher.run()
        finally:
            stop.set()
            if elector is not None:
                LEADER.labels(LEASE_NAME).set(0)
                if not lost.is_set():
                    elector.release()
        if lost.is_set():
            raise CommandError("Lost the Lease to another watcher; exiting so this one restarts as a standby.")
        self.stdout.write(f"Stopped after {watcher.transitions} job updates.")

    def _take_the_lease(self, cluster, watcher, stop, lost, lease_seconds: float) -> LeaderElector | None:
        """Wait for the Lease and keep renewing it; a lost Lease sets ``lost`` and stops the
        watcher. None if ``stop`` was set first."""
        identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        elector = LeaderElector(Leases(cluster), name=LEASE_NAME, namespace=settings.PLATFORM_NAMESPACE,
                                identity=identity, lease_seconds=lease_seconds,
                                renew_seconds=max(1.0, lease_seconds / 3), retry_seconds=1.0)
        self.stdout.write(f"Waiting for the Lease {settings.PLATFORM_NAMESPACE}/{LEASE_NAME} as {identity}.")
        if not elector.acquire(stop):
            return None
        LEADER.labels(LEASE_NAME).set(1)
        LEADER_TRANSITIONS.labels(LEASE_NAME).inc()

        def on_lost():
            lost.set()
            watcher.stop()

        elector.keep_renewing(stop, on_lost)
        return elector

    def _start_leading(self, watcher):
        # What runs once for the platform (the heal); a receiver that fails does not stop the watch.
        for receiver, result in leading.send_robust(sender=StatusWatcher, watcher=watcher):
            if isinstance(result, Exception):
                self.stderr.write(f"{receiver.__module__}.{receiver.__name__} failed to start: {result}")


def _stop_on_signals(watcher, stop):
    def shutdown(*_):
        stop.set()
        watcher.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, shutdown)
