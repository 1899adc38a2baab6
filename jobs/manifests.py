"""Render a job's cluster objects for its flavor's scheduler. Pure: models in, dicts out.

- training on Kueue: an Indexed batch/v1 Job (suspended, queue-labelled) + a headless
  Service for the torchrun rendezvous;
- training on Volcano: a batch.volcano.sh Job gang (master + workers);
- inference: Deployment + Service + HorizontalPodAutoscaler, queued through Kueue or
  scheduled by Volcano.

Whatever the user typed, every pod template gets the same hardened security settings;
user input only ever reaches image, command, args and env values.
"""

from cluster.fields import FieldRules, Ownership
from cluster.names import bounded_name
from cluster.quantity import canonical, gib
from gpuplatform.ownership import JOB_LABEL, ownership_labels, owned
from quotas.manifests import cluster_queue_name, local_queue_name
from quotas.models import Scheduler
from tenants.manifests import WORKLOAD_SERVICE_ACCOUNT

from .models import Job

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RENDEZVOUS_PORT = 29500
JOB_KINDS = [
    ("batch/v1", "Job"), ("batch.volcano.sh/v1alpha1", "Job"), ("apps/v1", "Deployment"),
    ("v1", "Service"), ("autoscaling/v2", "HorizontalPodAutoscaler"),
]
# Who decides which field of a workload once it exists (DESIGN.md section 8; the table in
# docs/architecture.md says why for each). Everything not named here is ours for life.
JOB_FIELDS: Ownership = {
    # Kueue unsuspends the Job when it admits it and suspends it again to preempt; it may
    # lower parallelism for a partial admission. The pod template (where Kueue injects the
    # flavor's placement at admission), completions and completion mode cannot change.
    ("batch", "Job"): FieldRules(
        create_only=("spec.suspend", "spec.parallelism"),
        immutable=("spec.template", "spec.completions", "spec.completionMode"),
    ),
    # Volcano's admission refuses spec changes to a Job other than its gang size and task
    # replicas, which we never change either.
    ("batch.volcano.sh", "Job"): FieldRules(immutable=("spec",)),
    # The HPA (or `kubectl scale`) sets replicas through the scale subresource; we start
    # the Deployment at the minimum. A Deployment's selector cannot change.
    ("apps", "Deployment"): FieldRules(create_only=("spec.replicas",), immutable=("spec.selector",)),
    ("", "Service"): FieldRules(immutable=("spec.clusterIP",)),
}
# Keeps "<name>-<index>" pod hostnames and "<name>-<task>-<index>" Volcano pod names
# within the 63-character label limit.
OBJECT_NAME_LIMIT = 45
FINISHED_TTL_SECONDS = 7 * 24 * 3600
# The user and group every workload runs as, so images built to run as root still start
# under the restricted Pod Security level.
RUN_AS_ID = 1000


def object_name(job: Job) -> str:
    """Deterministic, unique per job (the id), DNS-1123, short enough for derived names."""
    return bounded_name(job.name, str(job.pk), limit=OBJECT_NAME_LIMIT)


def _labels(job: Job) -> dict:
    """Ownership labels for pod templates (objects get theirs through ``_owned``)."""
    return ownership_labels(team=job.team.slug, job=job.pk)


def _owned(job: Job, obj: dict) -> dict:
    return owned(obj, team=job.team.slug, job=job.pk)


def _quantities(job: Job) -> dict:
    gpus = {job.flavor.resource_name: canonical(job.gpus_per_worker)}
    memory = gib(job.memory_per_worker_gib)
    cpu = canonical(job.cpu_per_worker)
    return {"requests": {"cpu": cpu, "memory": memory, **gpus}, "limits": {"memory": memory, **gpus}}


def _container(job: Job, extra_env: list[dict], ports: list[dict], probe: dict | None = None) -> dict:
    user_env = [{"name": k, "value": v} for k, v in sorted(job.env.items())]
    container = {
        "name": "main",
        "image": job.image,
        "env": user_env + extra_env,
        "resources": _quantities(job),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if job.command:
        container["command"] = list(job.command)
    if job.args:
        container["args"] = list(job.args)
    if ports:
        container["ports"] = ports
    if probe:
        container["readinessProbe"] = probe
    return container


def pod_spec(job: Job, container: dict, **extra) -> dict:
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
        "containers": [container],
        # PyTorch data loaders share tensors through /dev/shm; the default 64 MiB is too small.
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                  "sizeLimit": gib(max(1, job.memory_per_worker_gib // 2))}}],
        **extra,
    }
    if flavor.node_labels:
        spec["nodeSelector"] = dict(flavor.node_labels)
    if flavor.tolerations:
        spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    return spec


def _torch_env(job: Job, master: str, rank_field: str | None) -> list[dict]:
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


def _kueue_labels(job: Job) -> dict:
    labels = {KUEUE_QUEUE_LABEL: local_queue_name(job.flavor)}
    if job.priority_id:
        labels[KUEUE_PRIORITY_LABEL] = job.priority.name
    return labels


# --- training ----------------------------------------------------------------------------------
def render_kueue_training(job: Job) -> list[dict]:
    name, namespace = object_name(job), job.team.namespace_name
    labels = _labels(job)
    master = f"{name}-0.{name}.{namespace}.svc"
    container = _container(job, _torch_env(job, master, COMPLETION_INDEX),
                           [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}])
    job_labels = _kueue_labels(job)
    if job.max_runtime_seconds:
        job_labels[KUEUE_MAX_EXEC_LABEL] = str(job.max_runtime_seconds)
    batch_job = _owned(job, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": job_labels},
        "spec": {
            # Kueue unsuspends the job once the team's queue admits it.
            "suspend": True,
            "completionMode": "Indexed",
            "completions": job.workers,
            "parallelism": job.workers,
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": pod_spec(job, container, restartPolicy="Never", subdomain=name),
            },
        },
    })
    return [_headless_service(job, name, namespace), batch_job]


def _headless_service(job: Job, name: str, namespace: str) -> dict:
    return _owned(job, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "clusterIP": "None",
            # Workers must find each other before they report ready.
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: str(job.pk)},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    })


def render_volcano_training(job: Job) -> list[dict]:
    name, namespace = object_name(job), job.team.namespace_name
    labels = _labels(job)
    ports = [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}]
    # Volcano has no run-time limit of its own: the kubelet ends pods past their deadline.
    deadline = {"activeDeadlineSeconds": job.max_runtime_seconds} if job.max_runtime_seconds else {}

    def task(task_name: str, replicas: int, policies: list[dict]) -> dict:
        # Volcano's pytorch plugin sets MASTER_ADDR, WORLD_SIZE and RANK; we add the rest.
        container = _container(job, [{"name": "NPROC_PER_NODE", "value": str(job.gpus_per_worker)}], ports)
        return {
            "name": task_name,
            "replicas": replicas,
            "policies": policies,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": pod_spec(job, container, restartPolicy="OnFailure", **deadline),
            },
        }

    tasks = [task("master", 1, [{"event": "TaskCompleted", "action": "CompleteJob"}])]
    if job.workers > 1:
        tasks.append(task("worker", job.workers - 1, []))
    spec = {
        "schedulerName": "volcano",
        "queue": cluster_queue_name(namespace, job.flavor),
        "minAvailable": job.workers,  # all or nothing: the gang
        "maxRetry": 3,
        "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
        # An evicted worker breaks the collective: restart the whole gang.
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "plugins": {
            "pytorch": ["--master=master", "--worker=worker", f"--port={RENDEZVOUS_PORT}"],
            "svc": [],
            "env": [],
        },
        "tasks": tasks,
    }
    return [_owned(job, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                         "metadata": {"name": name, "namespace": namespace}, "spec": spec})]


# --- inference ---------------------------------------------------------------------------------
def render_inference(job: Job) -> list[dict]:
    name, namespace = object_name(job), job.team.namespace_name
    labels = _labels(job)
    probe = {
        "httpGet": {"path": job.readiness_path or "/", "port": job.port},
        # Model loading takes minutes; do not count the server unready before that.
        "initialDelaySeconds": job.readiness_initial_delay_seconds,
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    container = _container(job, [], [{"name": "http", "containerPort": job.port}], probe)
    pod_meta: dict = {"labels": dict(labels)}
    extra: dict = {"restartPolicy": "Always"}
    deployment_labels = {}
    if job.flavor.scheduler == Scheduler.KUEUE:
        deployment_labels = _kueue_labels(job)
    else:
        extra["schedulerName"] = "volcano"
        pod_meta["annotations"] = {VOLCANO_QUEUE_ANNOTATION: cluster_queue_name(namespace, job.flavor)}
    objects = [
        _owned(job, {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name, "namespace": namespace, "labels": deployment_labels},
         "spec": {
             "replicas": job.min_replicas,
             "selector": {"matchLabels": {JOB_LABEL: str(job.pk)}},
             "template": {"metadata": pod_meta, "spec": pod_spec(job, container, **extra)},
         }}),
        _owned(job, {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"type": "ClusterIP", "selector": {JOB_LABEL: str(job.pk)},
                  "ports": [{"name": "http", "port": job.port, "targetPort": "http"}]}}),
    ]
    if job.max_replicas > job.min_replicas:
        objects.append(_owned(job, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": job.min_replicas,
                "maxReplicas": job.max_replicas,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                    "type": "Utilization", "averageUtilization": job.autoscaling_target_cpu_percent or 70}}}],
            },
        }))
    return objects


def pod_templates_of(obj: dict) -> list[dict]:
    """The pod templates inside one rendered workload object (none for other kinds)."""
    spec = obj.get("spec", {})
    if obj["kind"] == "Job" and "tasks" in spec:
        return [task["template"] for task in spec["tasks"]]
    if obj["kind"] in ("Job", "Deployment"):
        return [spec["template"]]
    return []


def render_job(job: Job) -> list[dict]:
    """The objects of one job, for its kind and its flavor's scheduler."""
    if job.kind == Job.Kind.INFERENCE:
        return render_inference(job)
    if job.flavor.scheduler == Scheduler.VOLCANO:
        return render_volcano_training(job)
    return render_kueue_training(job)
