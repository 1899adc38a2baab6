"""What every scheduler's workloads share: names, labels, the hardened pod template and the
torchrun environment (inference servers: `workloads.serving`).

Whatever the user typed, every pod template gets the same hardened security settings;
user input only ever reaches image, command, args and env values.
"""

import copy
import math
from datetime import datetime

from cluster.fields import FieldRules
from cluster.names import bounded_name
from cluster.quantity import canonical, gib
from core.ownership import WORKLOAD_SERVICE_ACCOUNT, owned, ownership_labels

RENDEZVOUS_PORT = 29500
LOCAL_MASTER = "localhost"  # a job of one worker: torchrun's rendezvous never leaves the pod
# Keeps "<name>-<index>" pod hostnames and "<name>-<task>-<index>" Volcano pod names
# within the 63-character label limit.
OBJECT_NAME_LIMIT = 45
FINISHED_TTL_SECONDS = 7 * 24 * 3600
# The user and group every workload runs as, so images built to run as root still start
# under the restricted Pod Security level.
RUN_AS_ID = 1000
# Read by the GPU container runtime, not by the program: NVIDIA_VISIBLE_DEVICES=all would
# hand a 1-GPU job every GPU on its node under the NVIDIA toolkit's stock settings (the
# toolkit also honours NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*, NVIDIA_MIG_*...), and
# AMD's container toolkit reads AMD_VISIBLE_DEVICES. Refused in job input (jobs.models) and
# in team namespaces at admission (tenants.admission). See docs/operations.md.
GPU_RUNTIME_ENV_PREFIXES = ("NVIDIA_",)
# Where a job's container has a writable home: an emptyDir of at most HOME_SCRATCH, unless one
# of the team's volumes is mounted there (a notebook's home). HOME, XDG_CACHE_HOME and HF_HOME
# point into it, so images that write caches under the user's home (Hugging Face, pip, vLLM)
# run as the non-root user.
HOME_PATH = "/home/user"
HOME_SCRATCH_GIB = 20
HOME_SCRATCH = gib(HOME_SCRATCH_GIB)
# The node's local disk a container asks for and may use (its writable layer, its logs and the
# pod's disk-backed emptyDirs count: the home scratch above must fit under the limit, or the
# kubelet evicts a pod whose cache filled it). Every container we render states them; the team
# namespaces' LimitRange gives the same numbers to any container that states none
# (`tenants.manifests.render_limit_range`). Kueue must not count them against quota
# (`resources.excludeResourcePrefixes` in its Configuration: docs/install.md).
EPHEMERAL_STORAGE = "ephemeral-storage"
EPHEMERAL_STORAGE_REQUEST = gib(2)
EPHEMERAL_STORAGE_LIMIT = gib(HOME_SCRATCH_GIB + 10)
# Probes: how often, and how long a live container may stop answering before it is restarted.
PROBE_PERIOD_SECONDS = 10
LIVENESS_TIMEOUT_SECONDS = 5
LIVENESS_FAILURES = 6
READINESS_FAILURES = 3
GPU_RUNTIME_ENV_NAMES = frozenset({"AMD_VISIBLE_DEVICES"})

# The preemption contract (docs/preemption.md): a training job's pods learn how long they
# have between SIGTERM and SIGKILL, and report their last checkpoint in their termination
# message (Kubernetes keeps it in the terminated container's state), one line
# "checkpoint=<RFC 3339 time>".
CHECKPOINT_GRACE_ENV = "GPUPLATFORM_CHECKPOINT_GRACE_SECONDS"
CHECKPOINT_PREFIX = "checkpoint="

# Kubernetes' recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/),
# beside app.kubernetes.io/managed-by (`core.ownership`).
APP_NAME_LABEL = "app.kubernetes.io/name"
APP_INSTANCE_LABEL = "app.kubernetes.io/instance"
APP_COMPONENT_LABEL = "app.kubernetes.io/component"

SERVICE = ("v1", "Service")
# A Service's clusterIP cannot change.
SERVICE_FIELDS = {("", "Service"): FieldRules(immutable=("spec.clusterIP",))}


def object_name(job) -> str:
    """Deterministic, unique per job (the id), DNS-1123, short enough for derived names."""
    return bounded_name(job.name, str(job.pk), limit=OBJECT_NAME_LIMIT)


def app_labels(job, component: str) -> dict[str, str]:
    """Kubernetes' recommended labels: the kind of work, the job's objects (their one name), and
    the part this object or pod plays in it. Never in a selector: a Deployment's or StatefulSet's
    selector cannot change once created, so selectors stay the job label alone."""
    return {APP_NAME_LABEL: job.kind, APP_INSTANCE_LABEL: object_name(job), APP_COMPONENT_LABEL: component}


def pod_labels(job, component: str) -> dict:
    """The labels of a pod template (objects get theirs through ``job_owned``)."""
    return {**app_labels(job, component), **ownership_labels(team=job.team.slug, job=job.pk)}


def job_owned(job, obj: dict, component: str) -> dict:
    """``obj`` with the recommended labels and our ownership labels (ours win)."""
    metadata = obj.setdefault("metadata", {})
    metadata["labels"] = {**metadata.get("labels", {}), **app_labels(job, component)}
    return owned(obj, team=job.team.slug, job=job.pk)


def multi_node(job) -> bool:
    """Training across more than one pod: NCCL talks over the flavor's network fabric."""
    return job.work_kind.across_nodes and job.workers > 1


def hardware_env(job) -> list[dict]:
    """What the flavor's hardware sets in every container of the job: an MPS share's limits
    (never the job's to change: `jobs.models` refuses CUDA_MPS_* in its env), and for
    multi-node training the flavor's NCCL defaults, each unless the job's env sets it."""
    flavor = job.flavor
    env = dict(flavor.mps_limits)
    if multi_node(job):
        env.update({name: value for name, value in flavor.nccl_defaults.items() if name not in job.env})
    return [{"name": name, "value": value} for name, value in env.items()]


def _quantities(job) -> dict:
    gpus = {job.flavor.resource_name: canonical(job.gpus_per_worker)}
    if multi_node(job):
        # RDMA devices (/dev/infiniband) come from their device plugin as a resource: never
        # privileged, never a host path.
        gpus.update({name: canonical(count) for name, count in sorted(job.flavor.rdma_resources.items())})
    memory = gib(job.memory_per_worker_gib)
    cpu = canonical(job.cpu_per_worker)
    return {"requests": {"cpu": cpu, "memory": memory, **gpus}, "limits": {"memory": memory, **gpus}}


def with_local_disk(resources: dict) -> dict:
    """``resources`` with the local disk every container asks for and may use."""
    return {"requests": {**resources.get("requests", {}), EPHEMERAL_STORAGE: EPHEMERAL_STORAGE_REQUEST},
            "limits": {**resources.get("limits", {}), EPHEMERAL_STORAGE: EPHEMERAL_STORAGE_LIMIT}}


def probes(action: dict, startup_seconds: int, readiness_delay_seconds: int = 0) -> dict:
    """Startup, liveness and readiness probes on one action (an ``httpGet`` or ``tcpSocket``).
    The startup probe gives the container ``startup_seconds`` to answer at all (a server loading
    its model: failureThreshold x periodSeconds covers it) before the kubelet restarts it;
    liveness and readiness run only once it answered, so a slow start is never a restart loop,
    and a server that stops answering for a minute is restarted."""
    def probe(**fields) -> dict:  # each its own dicts: shared ones would come back as YAML aliases
        return {**copy.deepcopy(action), "periodSeconds": PROBE_PERIOD_SECONDS, **fields}

    found = {"startupProbe": probe(failureThreshold=max(1, math.ceil(startup_seconds / PROBE_PERIOD_SECONDS))),
             "livenessProbe": probe(timeoutSeconds=LIVENESS_TIMEOUT_SECONDS, failureThreshold=LIVENESS_FAILURES),
             "readinessProbe": probe(failureThreshold=READINESS_FAILURES)}
    if readiness_delay_seconds:
        found["readinessProbe"]["initialDelaySeconds"] = readiness_delay_seconds
    return found


def home_env(job) -> list[dict]:
    """A writable home and cache for the non-root user, each unless the job's env sets it."""
    env = {"HOME": HOME_PATH, "XDG_CACHE_HOME": f"{HOME_PATH}/.cache", "HF_HOME": f"{HOME_PATH}/.cache/huggingface"}
    return [{"name": name, "value": value} for name, value in env.items() if name not in job.env]


def mounts(job) -> list[tuple[str, str, str]]:
    """(pod volume name, the team volume's claim, mount path) of each volume the job mounts,
    by name, the home volume included; the home is an emptyDir when no volume is mounted there."""
    volumes = dict(sorted((job.volumes or {}).items()))
    found = [(f"vol-{index}", name, path) for index, (name, path) in enumerate(volumes.items())]
    if HOME_PATH not in volumes.values():
        found.append(("home", "", HOME_PATH))
    return found


def container(job, extra_env: list[dict], ports: list[dict], checks: dict | None = None) -> dict:
    """The job's hardened container; ``checks``: its probes (`probes`), for a server."""
    user_env = [{"name": k, "value": v} for k, v in sorted(job.env.items())]
    out = {
        "name": "main",
        "image": job.image,
        "env": user_env + hardware_env(job) + home_env(job) + extra_env,
        "resources": with_local_disk(_quantities(job)),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                         *({"name": name, "mountPath": path} for name, _, path in mounts(job))],
    }
    if job.command:
        out["command"] = list(job.command)
    if job.args:
        out["args"] = list(job.args)
    if ports:
        out["ports"] = ports
    if checks:
        out.update(checks)
    return out


def pod_spec(job, main: dict, **extra) -> dict:
    """The hardened pod spec every workload shares; placement comes from the flavor only."""
    flavor = job.flavor
    spec = {
        "serviceAccountName": WORKLOAD_SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        # No hostNetwork/hostPID/hostIPC: false is their default, and the API server drops a
        # false it is sent, so stating it would make every re-apply look like a change.
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_ID,
            "runAsGroup": RUN_AS_ID,
            "fsGroup": RUN_AS_ID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [main],
        # PyTorch data loaders share tensors through /dev/shm; the default 64 MiB is too small.
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                  "sizeLimit": gib(max(1, job.memory_per_worker_gib // 2))}},
                    *({"name": name, "persistentVolumeClaim": {"claimName": claim}} if claim
                      else {"name": name, "emptyDir": {"sizeLimit": HOME_SCRATCH}} for name, claim, _ in mounts(job))],
        **extra,
    }
    if flavor.node_labels:
        spec["nodeSelector"] = dict(flavor.node_labels)
    if flavor.tolerations:
        spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    return spec


def checkpoint_grace(job) -> tuple[list[dict], dict]:
    """(env, pod spec fields) of the preemption contract for a training job: the pods get
    the grace of the job's priority class (`job.checkpoint_grace_seconds`) as their
    terminationGracePeriodSeconds, and are told it."""
    grace = job.checkpoint_grace_seconds
    return [{"name": CHECKPOINT_GRACE_ENV, "value": str(grace)}], {"terminationGracePeriodSeconds": grace}


def _checkpoint_in(message: str | None) -> datetime | None:
    for line in reversed((message or "").splitlines()):
        line = line.strip()
        if line.startswith(CHECKPOINT_PREFIX):
            stamp = line[len(CHECKPOINT_PREFIX):].strip().replace("Z", "+00:00")
            try:
                found = datetime.fromisoformat(stamp)
            except ValueError:
                return None
            return found if found.tzinfo else None  # a time without a zone says nothing sure
    return None


def last_checkpoint(pods: list[dict]) -> datetime | None:
    """The latest checkpoint any container of ``pods`` reported in its termination message
    (its current or previous run), or None."""
    found = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in (status.get("state"), status.get("lastState")):
                terminated = (state or {}).get("terminated") or {}
                if (at := _checkpoint_in(terminated.get("message"))) is not None:
                    found.append(at)
    return max(found, default=None)


def torch_env(job, master: str, rank_field: str | None) -> list[dict]:
    env = [
        {"name": "MASTER_ADDR", "value": master},
        {"name": "MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
        {"name": "WORLD_SIZE", "value": str(job.workers)},
        {"name": "NNODES", "value": str(job.workers)},
        {"name": "NPROC_PER_NODE", "value": str(job.gpus_per_worker)},
    ]
    if rank_field:
        env.append({"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": rank_field}}})
    return env


def pod_templates_of(obj: dict) -> list[dict]:
    """The pod templates inside one rendered workload object (none for other kinds)."""
    spec = obj.get("spec", {})
    if obj["kind"] == "Job" and "tasks" in spec:
        return [task["template"] for task in spec["tasks"]]
    if obj["kind"] in ("Job", "Deployment", "StatefulSet"):
        return [spec["template"]]
    if obj["kind"] in ("RayJob", "RayCluster"):  # its head and worker groups
        cluster = spec.get("rayClusterSpec", spec)
        return [group["template"] for group in [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]]
    return []


def conditions(obj: dict | None) -> dict[str, dict]:
    if not obj:
        return {}
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def true_condition(found: dict, kind: str) -> dict | None:
    condition = found.get(kind)
    return condition if condition and condition.get("status") == "True" else None
