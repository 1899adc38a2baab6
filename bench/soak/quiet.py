"""Does a sweep with nothing to change write nothing? Measured where the writes land.

During a quiet window (nothing submitted, cancelled, scaled or granted), the soak lets
the real beat + worker sweep at least three times and counts, over exactly that span:

- APPLY requests the kube-apiserver served on the kinds the platform writes (its own
  ``apiserver_request_total`` counter): the platform writes only by server-side apply,
  the controllers with PUT/PATCH or on status subresources, which are not counted. So it
  counts even an apply that changes nothing, which no watch can see;
- changes of the platform's own managedFields entry, and deletions of objects with its
  labels (its prunes), seen by the observer. DELETE requests are not taken from the
  metrics: Volcano's svc plugin deletes the Service and NetworkPolicy of every Volcano Job
  that finishes, and the counter cannot tell who asked.

Then ``manage.py reconcile --all`` runs twice and the second must report 0 writes.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

from .observer import Observer
from .processes import kubectl, manage

# (API group, resource) the platform writes: its job, team, queue and cluster-wide kinds.
OUR_RESOURCES = {
    ("batch", "jobs"), ("batch.volcano.sh", "jobs"), ("apps", "deployments"), ("", "services"),
    ("autoscaling", "horizontalpodautoscalers"), ("", "namespaces"), ("", "resourcequotas"),
    ("", "limitranges"), ("", "serviceaccounts"), ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"), ("networking.k8s.io", "networkpolicies"),
    ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "localqueues"), ("scheduling.volcano.sh", "queues"),
    ("kueue.x-k8s.io", "resourceflavors"), ("kueue.x-k8s.io", "cohorts"),
    ("kueue.x-k8s.io", "workloadpriorityclasses"),
}
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_WRITES = re.compile(r"(\d+) writes \(")


def write_requests(kubeconfig: str) -> Counter | None:
    """(verb, group/resource) -> APPLY requests served so far on our kinds; None if unreadable."""
    result = kubectl(kubeconfig, "get", "--raw", "/metrics", timeout=60)
    if result.returncode != 0:
        return None
    counts: Counter = Counter()
    for match in _SAMPLE.finditer(result.stdout):
        labels = dict(_LABEL.findall(match["labels"]))
        key = (labels.get("group", ""), labels.get("resource", ""))
        if labels.get("subresource") or key not in OUR_RESOURCES:
            continue
        if labels.get("verb") == "APPLY":
            counts[(labels["verb"], f"{key[0] or 'core'}/{key[1]}")] += int(float(match["value"]))
    return counts


class LogCounter:
    """Counts lines matching a pattern in a growing log (the worker's: sweeps done)."""

    def __init__(self, path: Path, pattern: str):
        self.path, self.pattern = path, re.compile(pattern)
        self.offset, self.count = 0, 0

    def __call__(self) -> int:
        if self.path.exists():
            with open(self.path, errors="replace") as log:
                log.seek(self.offset)
                chunk = log.read()
                # Count whole lines only; a half-written last line waits for the next call.
                end = chunk.rfind("\n") + 1
                self.count += len(self.pattern.findall(chunk[:end]))
                self.offset += len(chunk[:end].encode(errors="replace"))
        return self.count


def reconcile_twice(env: dict) -> tuple[int, int]:
    """Writes reported by two ``reconcile --all`` in a row (-1 when a run failed)."""
    found = []
    for _ in range(2):
        result = manage(env, "reconcile", "--all")
        match = _WRITES.search(result.stdout)
        found.append(int(match.group(1)) if result.returncode == 0 and match else -1)
    return found[0], found[1]


def platform_changes(observer: Observer, start: float, end: float) -> list[str]:
    """Platform writes and deletions of its objects (not pods) the observer saw in [start, end]."""
    seen = []
    with observer.lock:
        for info in observer.objects.values():
            if info.kind[1] == "Workload":
                continue
            seen += [f"{info.kind[1]} {info.name}: {what}" for at, what in info.platform_writes if start <= at <= end]
            gone = info.deletion or info.gone
            if gone and start <= gone <= end:
                seen.append(f"{info.kind[1]} {info.name}: deleted")
    return seen


def measure(label: str, *, kubeconfig: str, env: dict, observer: Observer, sweeps: LogCounter,
            queue_depth, busy, minimum_sweeps: int = 3, sweep_seconds: int = 5) -> dict:
    """One quiet window; ``busy()`` says whether jobs still wait for their first reconcile
    or for a cancel to finish, ``queue_depth()`` how many tasks wait in the broker."""
    # Jobs still waiting for their first apply or for a cancel to finish would write for a
    # reason; start counting once none is left. A backlog of sweep reconciles is no reason.
    deadline = time.monotonic() + 60
    while busy() and time.monotonic() < deadline:
        time.sleep(1)
    before, first_sweep, start = write_requests(kubeconfig), sweeps(), time.time()
    deadline = time.monotonic() + (minimum_sweeps + 4) * sweep_seconds + 60
    while time.monotonic() < deadline and sweeps() - first_sweep < minimum_sweeps:
        time.sleep(1)
    queue_depth()  # remembered as the run's maximum
    # The last sweep's tasks ran; give their writes a moment to reach the observer.
    time.sleep(2)
    after, end = write_requests(kubeconfig), time.time()
    window = {"at": label, "sweeps": sweeps() - first_sweep, "start": start, "end": end}
    if before is None or after is None or any(after[k] < v for k, v in before.items()):
        # Unreadable metrics, or a counter went backwards (API server restarted): no number.
        window.update(apply=-1, by_resource="API-server metrics unavailable")
    else:
        delta = after - before
        window["apply"] = sum(delta.values())
        window["by_resource"] = ", ".join(f"{res} {n}" for (_, res), n in delta.most_common(4))
    changes = platform_changes(observer, start, end)
    window["seen"] = len(changes)
    window["examples"] = changes[:5]
    window["reconcile"] = reconcile_twice(env)
    return window
