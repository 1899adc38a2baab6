"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does.

Several copies of a process that must act alone (the status watcher) run side by side; the
one holding the Lease works, the others wait. The holder renews the Lease every
`renew_seconds`; a standby takes it over when the holder released it (a clean shutdown:
within `retry_seconds`) or when the Lease has not changed for `lease_seconds` as seen by the
standby's own clock (a crash), so clocks of different machines never need to agree.
Every write is an update with the resourceVersion read just before, so two candidates
can never both win: the loser gets a 409 and stays a standby.

`Leases` reads and writes them through either door (`Cluster`, or `FakeCluster` in unit
tests) and knows nothing of what the elected process does.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from datetime import datetime, timezone

from .errors import ClusterError, NotFound, TransientError

log = logging.getLogger(__name__)

API = "coordination.k8s.io/v1"
KIND = "Lease"


class Conflict(Exception):
    """Somebody else wrote the Lease between our read and our write."""


def _micro_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Leases:
    """Get, create and replace Leases through a door (`Cluster` or `FakeCluster`): create
    and replace carry the server's preconditions, so a lost race is a `Conflict`."""

    def __init__(self, cluster):
        self.cluster = cluster

    def get(self, name: str, namespace: str) -> dict | None:
        try:
            return self.cluster.get(API, KIND, name, namespace)
        except NotFound:
            return None

    def create(self, lease: dict) -> dict:
        return self._write(self.cluster.create, lease)

    def replace(self, lease: dict) -> dict:
        return self._write(self.cluster.replace, lease)  # carries the resourceVersion read

    @staticmethod
    def _write(write, lease: dict) -> dict:
        try:
            return write(lease)
        except TransientError as err:
            if err.status == 409:
                raise Conflict(err.message) from err
            raise


class LeaderElector:
    """One candidate for one Lease. `acquire` waits until it leads; `keep_renewing` holds on
    in a thread and calls `on_lost` once if the Lease slips away; `release` hands it over."""

    def __init__(self, leases, *, name: str, namespace: str, identity: str, lease_seconds: float = 15,
                 renew_seconds: float = 5, retry_seconds: float = 1, clock=time.monotonic, wall=time.time):
        if not renew_seconds < lease_seconds:
            raise ValueError("renew_seconds must be shorter than lease_seconds")
        self.leases, self.name, self.namespace, self.identity = leases, name, namespace, identity
        self.lease_seconds, self.renew_seconds, self.retry_seconds = lease_seconds, renew_seconds, retry_seconds
        self._clock, self._wall = clock, wall
        self._observed: tuple[str, str] | None = None  # (resourceVersion, holder) last seen
        self._observed_at = 0.0
        self._last_renewed = 0.0
        self.leading = False

    # --- one attempt --------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One read and at most one write; True when we hold the Lease afterwards."""
        now, wall = self._clock(), self._wall()
        try:
            live = self.leases.get(self.name, self.namespace)
            if live is None:
                self.leases.create(self._lease(None, wall, transitions=0))
                return self._won(now)
            spec = live.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            version = (live["metadata"].get("resourceVersion", ""), holder)
            if version != self._observed:  # the Lease moved: its holder is alive
                self._observed, self._observed_at = version, now
            duration = spec.get("leaseDurationSeconds") or self.lease_seconds
            if holder and holder != self.identity and now < self._observed_at + duration:
                self.leading = False
                return False
            transitions = (spec.get("leaseTransitions") or 0) + (holder != self.identity)
            self.leases.replace(self._lease(live, wall, transitions=transitions,
                                            acquired=spec.get("acquireTime") if holder == self.identity else None))
            return self._won(now)
        except (Conflict, ClusterError) as err:
            log.debug("lease %s/%s: %s", self.namespace, self.name, err)
            self.leading = False
            return False

    def _won(self, now: float) -> bool:
        self.leading = True
        self._last_renewed = now
        return True

    def _lease(self, live: dict | None, wall: float, *, transitions: int, acquired: str | None = None) -> dict:
        lease = copy.deepcopy(live) if live else {
            "apiVersion": API, "kind": KIND, "metadata": {"name": self.name, "namespace": self.namespace}}
        lease["metadata"].pop("managedFields", None)
        lease["spec"] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(round(self.lease_seconds)),
            "acquireTime": acquired or _micro_time(wall),
            "renewTime": _micro_time(wall),
            "leaseTransitions": int(transitions),
        }
        return lease

    # --- the loop -------------------------------------------------------------------------
    def acquire(self, stop: threading.Event) -> bool:
        """Wait until this candidate leads (True) or `stop` is set (False)."""
        while not stop.is_set():
            if self.try_acquire_or_renew():
                log.info("lease %s/%s: %s is the leader", self.namespace, self.name, self.identity)
                return True
            stop.wait(self.retry_seconds)
        return False

    def keep_renewing(self, stop: threading.Event, on_lost) -> threading.Thread:
        """Renew every `renew_seconds` until `stop`; when no renewal succeeded for two thirds
        of the lease (others may take it at the full lease), call `on_lost` and return."""
        deadline = self.lease_seconds * 2 / 3

        def loop():
            while not stop.wait(self.renew_seconds):
                while not self.try_acquire_or_renew():
                    if self._observed and self._observed[1] not in ("", self.identity) \
                            or self._clock() - self._last_renewed > deadline:
                        log.warning("lease %s/%s: %s lost the lease", self.namespace, self.name, self.identity)
                        self.leading = False
                        on_lost()
                        return
                    if stop.wait(self.retry_seconds):
                        return

        thread = threading.Thread(target=loop, daemon=True, name=f"lease-{self.name}")
        thread.start()
        return thread

    def release(self) -> bool:
        """Hand the Lease over at once (a clean shutdown): no holder, and a one-second lease."""
        try:
            live = self.leases.get(self.name, self.namespace)
            if live is None or (live.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            lease = copy.deepcopy(live)
            lease["metadata"].pop("managedFields", None)
            lease["spec"] = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1,
                             "renewTime": _micro_time(self._wall())}
            self.leases.replace(lease)
        except (Conflict, ClusterError) as err:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, err)
            return False
        finally:
            self.leading = False
        return True
