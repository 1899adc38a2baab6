"""Will a job's pods find room on its flavor's nodes, not just in its quota? From the free
GPUs per node (and per rack or block, when the job asks to stay in one), as the nodes'
allocatable and the pods bound to them say: a quota with 16 free GPUs spread 4 per node holds
no pod asking 8.

Three answers: fits now; fits when these jobs end (the fewest of the jobs holding GPUs on the
flavor's nodes, those with a known end first: admission plus max runtime); or can never fit
(not even on empty nodes). `feasibility.assess` adds it to the quota's verdict; the cluster is
read through the door (one LIST of the flavor's Nodes by its labels, one of the pods that have not ended). Read-only.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cluster import ClusterError
from core.ownership import JOB_LABEL, TEAM_LABEL
from core.reconcile import NoCluster, current_cluster
from quotas.models.hardware import node_gpus, node_selector, selects_node

from ..lifecycle import HOLDING_QUOTA
from ..models import Job

NOW, WAIT, NEVER = "now", "wait", "never"
# Pods in these phases hold nothing (a pod being deleted still does, until it is gone).
_LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass
class Holder:
    """GPUs held on the flavor's nodes by one of the platform's jobs (``job``), or by pods it
    does not run (``job`` None: never counted on to end)."""

    job: Job | None
    per_node: Counter = field(default_factory=Counter)

    @property
    def ends_at(self) -> datetime | None:
        return ends_at(self.job) if self.job else None


def ends_at(job: Job) -> datetime | None:
    """When a running job reaches its max runtime (counted from its admission); None if it has none."""
    start = job.run_admitted_at or job.admitted_at
    return start + timedelta(seconds=job.max_runtime_seconds) if start and job.max_runtime_seconds else None


@dataclass(frozen=True)
class Room:
    verdict: str  # NOW | WAIT | NEVER
    message: str
    waits_for: tuple[Job, ...] = ()
    room_by: datetime | None = None


def _requested(pod: dict, resource: str) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get(resource) or (resources.get("requests") or {}).get(resource)
        try:
            total += int(amount or 0)
        except (TypeError, ValueError):
            continue
    return total


class Nodes:
    """The flavor's nodes as the cluster has them: what each offers and who holds what."""

    def __init__(self, flavor, nodes: list[dict], pods: list[dict], exclude_job: int | None = None):
        self.flavor = flavor
        ready = [n for n in nodes if selects_node(flavor, n) and not (n.get("spec") or {}).get("unschedulable")]
        self.size = {n["metadata"]["name"]: node_gpus(flavor, n) for n in ready}
        self.labels = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}) for n in ready}
        held: dict = defaultdict(Counter)  # (team slug, job id) or None -> node -> GPUs
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            gpus = _requested(pod, flavor.resource_name)
            if node not in self.size or not gpus:
                continue
            labels = (pod.get("metadata") or {}).get("labels") or {}
            key = (labels.get(TEAM_LABEL), labels.get(JOB_LABEL)) if labels.get(JOB_LABEL) else None
            held[key][node] += gpus
        jobs = {(job.team.slug, str(job.pk)): job for job in Job.objects.filter(
            pk__in=[int(k[1]) for k in held if k and k[1].isdigit()], state__in=HOLDING_QUOTA).select_related("team")}
        self.holders = []
        for key, per_node in held.items():
            job = jobs.get(key) if key else None
            if job is not None and job.pk == exclude_job:
                continue
            self.holders.append(Holder(job, per_node))

    def free(self, released=()) -> dict[str, int]:
        free = dict(self.size)
        for holder in self.holders:
            if holder not in released:
                for node, gpus in holder.per_node.items():
                    free[node] -= gpus
        return free

    def domains(self, label: str | None) -> dict[str, list[str]]:
        """Nodes per domain of the level ``label`` names (one domain of all when None)."""
        grouped: dict = defaultdict(list)
        for node in self.size:
            grouped[self.labels[node].get(label) if label else ""].append(node)
        grouped.pop(None, None)  # a node without the level's label is in no domain of it
        return grouped

    def pods_fit(self, job, free: dict[str, int]) -> int:
        """How many of the job's pods fit at once, in the best single domain if it asks for one."""
        asked = job.topology_request
        label = asked.label if asked and asked.required else None
        per_pod = job.gpus_per_worker or 1
        return max((sum(max(free[n], 0) // per_pod for n in members)
                    for members in self.domains(label).values()), default=0)


def _say_jobs(jobs) -> str:
    said = []
    for job in jobs:
        ends = ends_at(job)
        when = f"ends by {ends:%Y-%m-%d %H:%M} UTC" if ends else "end unknown"
        said.append(f"job {job.pk} ({job.team.slug}/{job.name}, {when})")
    return ", ".join(said)


def room(job, nodes: Nodes) -> Room | None:
    """The answer for ``job`` (unsaved or waiting) on what ``nodes`` says now; None when no
    schedulable node of the flavor is there to judge by (its labels may name nodes an
    autoscaler has not made yet)."""
    flavor, per_pod, need = job.flavor, job.gpus_per_worker or 1, job.workers or 1
    asked = job.topology_request
    where = f"one {asked.level}" if asked and asked.required else "the flavor's nodes"
    if not nodes.size:
        return None
    empty = nodes.pods_fit(job, dict(nodes.size))
    if empty < need:
        return Room(NEVER, f"Can never start: {need} pods of {per_pod} GPUs, but {where} of {flavor.name} holds at "
                           f"most {empty} such pods even when empty.")
    free = nodes.free()
    if nodes.pods_fit(job, free) >= need:
        return Room(NOW, f"Room now: {need} pods of {per_pod} GPUs fit on the free GPUs of {where}.")
    total, most = sum(max(f, 0) for f in free.values()), max(free.values())
    shape = f"{total} {flavor.name} GPUs free, but at most {most} on one node"
    if asked and asked.required:
        shape += f" and room for {nodes.pods_fit(job, free)} of the {need} pods in one {asked.level}"
    # Release the jobs most likely to end first, then keep only those the job needs gone.
    ours = [h for h in nodes.holders if h.job is not None]
    ours.sort(key=lambda h: (h.ends_at is None, h.ends_at.timestamp() if h.ends_at else 0, h.job.pk))
    released: list[Holder] = []
    for holder in ours:
        released.append(holder)
        if nodes.pods_fit(job, nodes.free(released)) >= need:
            break
    else:
        return Room(WAIT, f"{shape}: a pod asking {per_pod} cannot start until pods the platform does not run "
                          "free their GPUs.")
    for holder in list(reversed(released)):
        rest = [h for h in released if h is not holder]
        if nodes.pods_fit(job, nodes.free(rest)) >= need:
            released = rest
    waits = tuple(h.job for h in released)
    ends = [h.ends_at for h in released]
    room_by = max(ends) if all(ends) else None
    return Room(WAIT, f"{shape}: a pod asking {per_pod} per node cannot start until {_say_jobs(waits)} "
                      f"{'ends' if len(waits) == 1 else 'end'}.", waits_for=waits, room_by=room_by)


def assess(job, cluster=None) -> Room | None:
    """The nodes' answer for ``job``; None when the cluster cannot be read (no cluster, an
    error): the quota's verdict then stands alone."""
    if not job.flavor.node_labels:  # selects no node: nothing to judge by
        return None
    try:
        cluster = cluster or current_cluster()
        nodes = cluster.list("v1", "Node", label_selector=node_selector(job.flavor))
        pods = cluster.list("v1", "Pod", field_selector=_LIVE_PODS)
    except (NoCluster, ClusterError):
        return None
    return room(job, Nodes(job.flavor, nodes, pods, exclude_job=job.pk))
