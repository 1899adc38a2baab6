"""A job's pods and container logs, as its page shows them and as the watcher keeps them.

What a pod says (phase, node, restarts, why it waits or how its containers ended) is read
from the pod as the cluster gives it; logs come through the door (`cluster.pod_logs`). Every
problem is said in plain words: a researcher reads "the container has not started yet", never
the transport's "dial tcp ...: connection refused" (`problem_of`). Only pods labelled with the
job's id are ever read, so a pod name typed into a URL cannot reach another job's pods.
"""

from dataclasses import dataclass, field

from cluster import ClusterError, NotFound, TransientError
from core.ownership import job_selector

from ..manifests import object_name
from ..models import Job
from ..models.logtails import MAX_TAIL_BYTES, MAX_TAIL_LINES, LogTail

# The last lines the page shows (and follows); a download is the whole log, up to a bound that
# keeps one request from filling the web process's memory.
LOG_LINES = 200
DOWNLOAD_LIMIT_BYTES = 32 * 1024 * 1024
# A job with hundreds of workers lists them all; the page shows this many.
MAX_PODS_SHOWN = 50
MAIN_CONTAINER = "main"


@dataclass(frozen=True)
class Failure:
    """One run of a container that ended badly, as its status tells it."""

    container: str
    exit_code: int | None
    reason: str
    message: str
    restarts: int
    previous: bool  # the run before the current one (its logs are the pod's previous logs)
    finished_at: str


@dataclass
class PodView:
    name: str
    phase: str
    node: str
    restarts: int
    detail: str
    containers: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.failures) or self.phase == "Failed"


def failures_of(pod: dict) -> list[Failure]:
    """The containers of ``pod`` whose current or last run ended with a non-zero exit code."""
    found = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state, last = status.get("state") or {}, status.get("lastState") or {}
        for ended, previous in ((state.get("terminated"), False), (last.get("terminated"), True)):
            if ended and ended.get("exitCode", 0) != 0:
                found.append(Failure(
                    container=status.get("name", ""), exit_code=ended.get("exitCode"),
                    reason=ended.get("reason", ""), message=(ended.get("message") or "").strip(),
                    restarts=status.get("restartCount", 0), previous=previous,
                    finished_at=ended.get("finishedAt") or ended.get("containerID") or "",
                ))
                break  # the current run's end, else the last one's: one per container
    return found


def pod_view(pod: dict) -> PodView:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    waiting = next((c["state"]["waiting"] for c in containers if "waiting" in (c.get("state") or {})), None)
    failures = failures_of(pod)
    detail = (waiting or {}).get("reason", "")
    if not detail and failures:
        detail = f"exit code {failures[0].exit_code}" + (f" ({failures[0].reason})" if failures[0].reason else "")
    names = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    return PodView(
        name=pod["metadata"]["name"], phase=status.get("phase", "Unknown"),
        node=(pod.get("spec") or {}).get("nodeName", ""), restarts=sum(c.get("restartCount", 0) for c in containers),
        detail=detail, containers=names or [MAIN_CONTAINER], failures=failures,
    )


def problem_of(err: ClusterError, *, previous: bool = False) -> str:
    """What went wrong reading logs, in a sentence a researcher can act on."""
    said = (err.message or "").lower()
    if isinstance(err, TransientError):
        return "The cluster did not answer just now; the logs appear here once it does."
    if isinstance(err, NotFound):
        return "This pod is gone from the cluster, and its logs with it."
    if err.status == 403:
        return "The cluster does not let the platform read this pod's logs."
    if previous and ("previous" in said or "not found" in said or "no such file" in said):
        return "This container has not restarted, so there is no earlier run to show."
    if any(word in said for word in ("waiting to start", "containercreating", "podinitializing", "not started",
                                     "does not have a host", "is pending")):
        return "The container has not started yet, so it has written nothing."
    return "The cluster has no logs for this container yet."


def pods_problem(err: ClusterError) -> str:
    if isinstance(err, TransientError):
        return "The cluster did not answer just now, so this job's pods cannot be shown; the page tries again."
    return "The cluster refused to list this job's pods; the job's state above still comes from the database."


def job_pods(cluster, job: Job) -> list[dict]:
    """The job's pods, by name (raises `ClusterError`)."""
    pods = cluster.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=job_selector(job.pk))
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def default_pod(views: list[PodView]) -> PodView | None:
    """The pod whose logs the page opens on: the first that failed (it says why), else the first."""
    return next((v for v in views if v.failed), views[0] if views else None)


def read(cluster, job: Job, pod: str, *, container: str = MAIN_CONTAINER, previous: bool = False,
         tail_lines: int | None = LOG_LINES, limit_bytes: int | None = None) -> tuple[str, str]:
    """(text, problem) of one container of one of the job's pods; exactly one is non-empty,
    or both empty when the container has written nothing yet."""
    try:
        text = cluster.pod_logs(job.team.namespace_name, pod, container=container, tail_lines=tail_lines,
                                previous=previous, limit_bytes=limit_bytes)
    except ClusterError as err:
        return "", problem_of(err, previous=previous)
    return text, ""


def replicas(cluster, job: Job) -> dict | None:
    """An inference server's replicas as its Deployment counts them (None before it exists)."""
    try:
        deployment = cluster.get("apps/v1", "Deployment", object_name(job), job.team.namespace_name)
    except NotFound:
        return None
    status = deployment.get("status") or {}
    return {"current": status.get("replicas", 0), "ready": status.get("readyReplicas", 0),
            "wanted": (deployment.get("spec") or {}).get("replicas")}


# --- kept with the job (the watcher) ---------------------------------------------------------
def keep_failed(cluster, job_id: int, pod: dict, failures: list[Failure] | None = None) -> int:
    """Keep the last lines of each failed container of ``pod`` with its job, once per run
    (a run already kept is not read again). Returns how many were kept."""
    meta = pod["metadata"]
    kept = 0
    for failure in failures if failures is not None else failures_of(pod):
        if LogTail.objects.filter(job_id=job_id, pod=meta["name"], container=failure.container,
                                  ended_at=failure.finished_at).exists():
            continue
        try:
            text = cluster.pod_logs(meta["namespace"], meta["name"], container=failure.container,
                                    tail_lines=MAX_TAIL_LINES, limit_bytes=MAX_TAIL_BYTES, previous=failure.previous)
        except ClusterError:
            text = ""  # gone already: how it ended is still worth keeping
        kept += LogTail.objects.keep(
            job_id, pod=meta["name"], container=failure.container, text=text, exit_code=failure.exit_code,
            reason=failure.reason, message=failure.message, restarts=failure.restarts, ended_at=failure.finished_at,
        )
    return kept


def landed(cluster, job: Job, views: list[PodView]) -> str:
    """Where the job's placed pods are in its flavor's topology ("" when the flavor declares
    none or no pod is on a node): per level, the domains and their nodes, from the nodes'
    labels (the ones Kueue's TAS assigned from)."""
    levels = [(level, label) for level, label in job.flavor.topology_levels if level != "host"]
    placed = sorted({view.node for view in views if view.node})
    if not levels or not placed:
        return ""
    labels = {node["metadata"]["name"]: node["metadata"].get("labels") or {} for node in cluster.list("v1", "Node")}
    said = []
    for level, label in levels:
        domains: dict[str, list[str]] = {}
        for node in placed:
            domains.setdefault(labels.get(node, {}).get(label, "unlabelled"), []).append(node)
        where = "; ".join(f"{domain} ({', '.join(nodes)})" for domain, nodes in sorted(domains.items()))
        said.append(f"one {level}: {where}" if len(domains) == 1 else f"{len(domains)} {level}s: {where}")
    return "Placed in " + "; in ".join(said) + "."
