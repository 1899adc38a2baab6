"""The job spec, declared once: every field a person sets on a job, its section, whether
every kind takes it (the others: `WorkKind.takes`), the schedulers it applies to, its label
and help text, and whether the job list shows it.

Everything that shows or takes a job's settings reads this module: the submission form
(its fields, sections, what each kind asks for, cloning), the API serializer (its writable
fields, help texts, the fast list path), the job list's columns and the admin. A field
added here reaches all of them; gpuctl's job-file fields are held equal to the API's
writable fields by ``tests/api/test_job_spec.py``.

Plain declarations, no Django: the model asks ``refused_on`` too, so this sits below it.
"""

from dataclasses import dataclass

KUEUE, VOLCANO = "kueue", "volcano"
SCHEDULERS = (KUEUE, VOLCANO)

# Shapes that need more than a plain value: a related row named by one of its fields, a
# list of words, a mapping of names to values, a decimal number.
VALUE, RELATED, LIST, MAP, DECIMAL = "value", "related", "list", "map", "decimal"

JOB, CONTAINER, RESOURCES, SERVING, RAY = "Job", "Container", "Resources", "Serving", "Ray"
SECTIONS = (JOB, CONTAINER, RESOURCES, SERVING, RAY)


@dataclass(frozen=True)
class Bounds:
    """How much free text a list or mapping holds: items (variables of a mapping), characters
    of each item (each name and value), UTF-8 bytes in all. The spec is copied into every pod
    of the job and the API server keeps each object under 1.5 MB: a tenant's text stays small."""

    items: int
    item_chars: int
    total_bytes: int


# The command, its arguments and the environment: each at most 256 items of 4096 characters
# and 32 KiB in all (a long configuration belongs in a file of the image or a volume).
TEXT_BOUNDS = Bounds(items=256, item_chars=4096, total_bytes=32 * 1024)
# A job's volume mounts: a few names and paths.
VOLUME_BOUNDS = Bounds(items=16, item_chars=253, total_bytes=4096)
_WORDS = (f"At most {TEXT_BOUNDS.items} words of {TEXT_BOUNDS.item_chars} characters, "
          f"{TEXT_BOUNDS.total_bytes // 1024} KiB in all.")


@dataclass(frozen=True)
class Field:
    name: str
    section: str
    label: str
    help: str = ""
    # Given to every kind; the others only to the kinds that take them (`WorkKind.takes`).
    common: bool = True
    # Refused when given to a kind that does not take it (rather than ignored).
    refused_elsewhere: bool = False
    schedulers: tuple[str, ...] = SCHEDULERS
    shape: str = VALUE
    # RELATED: the field of the related row that names it (a team's slug, a flavor's name).
    named_by: str = ""
    listed: bool = False  # a column of the job list (and the admin's)
    bounds: Bounds | None = None  # a LIST's or MAP's free text (the model's validator reads it)

    @property
    def column(self) -> str:
        """Where a row read with ``values()`` holds the field's value."""
        return f"{self.name}__{self.named_by}" if self.shape == RELATED else self.name


FIELDS = (
    Field("team", JOB, "Team", "The team the job runs for, by slug.", shape=RELATED, named_by="slug",
          listed=True),
    Field("name", JOB, "Name", "At most 40 lowercase letters, digits and '-', starting with a letter. "
          "Unique among the team's live jobs.", listed=True),
    Field("kind", JOB, "Kind", "The kind of work, by name: one of the choices the form and the API schema "
          "list (training by default); some run on Kueue flavors only.", listed=True),
    Field("flavor", JOB, "Flavor", "The GPU flavor (hardware pool), by name.", shape=RELATED, named_by="name",
          listed=True),
    Field("training_runtime", JOB, "Training runtime", "The Kubeflow Trainer ClusterTrainingRuntime a TrainJob "
          "runs on, by name (e.g. torch-distributed): one your quota managers allow your team; the API's "
          "/api/v1/training-runtimes lists them. TrainJobs only.", common=False, refused_elsewhere=True,
          schedulers=(KUEUE,)),
    Field("priority", JOB, "Priority", "A priority class, by name; its value at most the team's ceiling. "
          "Kueue flavors only: Volcano flavors refuse it.", schedulers=(KUEUE,), shape=RELATED, named_by="name"),
    Field("image", CONTAINER, "Image", "A container image, e.g. pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime: "
          "[registry/]repository[:tag][@digest], the repository in lowercase."),
    Field("command", CONTAINER, "Command", "The entrypoint, e.g. python or torchrun. Empty: the image's own. "
          + _WORDS, shape=LIST, bounds=TEXT_BOUNDS),
    Field("args", CONTAINER, "Arguments", "Arguments, split like a shell would: quote words with spaces. "
          + _WORDS, shape=LIST, bounds=TEXT_BOUNDS),
    Field("env", CONTAINER, "Environment", "Environment variables, NAME=value: at most "
          f"{TEXT_BOUNDS.items}, names and values of {TEXT_BOUNDS.item_chars} characters, "
          f"{TEXT_BOUNDS.total_bytes // 1024} KiB in all. The torchrun variables (MASTER_ADDR, WORLD_SIZE, NNODES, NODE_RANK, "
          "...) are set by the platform.", shape=MAP, bounds=TEXT_BOUNDS),
    Field("volumes", CONTAINER, "Volumes", "The team's volumes to mount, name=/path (e.g. model-cache=/models, "
          "datasets=/data). A volume mounted at /home/user keeps the home directory (notebooks); without one "
          "the home is scratch space. HOME, XDG_CACHE_HOME and HF_HOME point into it. Owners create volumes on "
          "the team's page.", shape=MAP, bounds=VOLUME_BOUNDS),
    Field("workers", RESOURCES, "Workers", "Pods started together (gang-scheduled); each gets the GPUs below. "
          "Ray: the worker pods beside the head (which has no GPU).", common=False, listed=True),
    Field("gpus_per_worker", RESOURCES, "GPUs per worker", "At most the flavor's GPUs per node.", listed=True),
    Field("gpu_memory_gib", RESOURCES, "GPU memory per GPU (GiB)",
          "The GPU memory the job needs on each GPU (or share of one), e.g. about 16 GiB to run an 8B-parameter "
          "model in FP16. On a shared flavor a job needing more than one share is refused with what would fit; "
          "on MPS the share's limit is enforced. Empty: not declared."),
    Field("placement", RESOURCES, "Keep workers together",
          "rack or block: all workers in one rack (or block) of the flavor's network topology, or the job waits; "
          "rack-preferred or block-preferred: as close as the free GPUs allow. Empty: anywhere. Flavors that "
          "declare a topology only. Kueue: its topology-aware scheduling places the pods in the level asked. "
          "Volcano: the gang stays within one HyperNode (a rack, or a block of racks) or waits; the preferred "
          "ones are Volcano's soft mode, which packs the gang as close as it can at any level (rack-preferred "
          "and block-preferred are the same request there).", common=False),
    Field("cpu_per_worker", RESOURCES, "CPU cores per worker", "0.1 to 1024 cores.", shape=DECIMAL),
    Field("memory_per_worker_gib", RESOURCES, "Memory per worker (GiB)", "1 to 16384 GiB."),
    Field("max_runtime_seconds", RESOURCES, "Max runtime (seconds)",
          "Stop the job after this long, counted from its admission (60 s to 366 days). Empty: the default "
          "of its flavor and priority class, if quota managers set one; at most their cap. A notebook is "
          "stopped (not deleted, its volumes kept) when its lifetime is up.", common=False),
    Field("port", SERVING, "Port", "The port the server listens on (a notebook: 8888 when empty).",
          common=False),
    Field("min_replicas", SERVING, "Min replicas", "Replicas kept running (at least 1).", common=False),
    Field("max_replicas", SERVING, "Max replicas", "Most replicas the autoscaler may start.", common=False, listed=True),
    Field("readiness_path", SERVING, "Readiness path", "HTTP path that answers 200 once the server is ready, "
          "e.g. /health: the characters of a URL path (%XX for others), at most 200.", common=False),
    Field("readiness_initial_delay_seconds", SERVING, "Readiness delay (seconds)",
          "How long a replica may load before its readiness counts (0 to 3600 s).", common=False),
    Field("model_load_seconds", SERVING, "Model load time (seconds)",
          "How long a replica may take to load its model and first answer its readiness path before it is "
          "restarted (30 to 14400 s; default 900). A server that answers sooner is ready sooner.", common=False),
    Field("autoscaling_target_cpu_percent", SERVING, "Autoscale at CPU %",
          "Average CPU use the autoscaler keeps replicas at (1 to 100), when it scales on CPU.", common=False),
    Field("autoscale_metric", SERVING, "Autoscale on", "cpu (the default: a HorizontalPodAutoscaler on the "
          "replicas' CPU use) or gpu (KEDA, on the average GPU utilization of the job's GPUs as Prometheus has it "
          "from dcgm-exporter; only where the cluster has KEDA). Either way at most max replicas, and no more "
          "than the team's quota can run.", common=False),
    Field("ray_entrypoint", RAY, "Entrypoint", "The command the Ray job runs on its cluster, e.g. "
          "python train.py --epochs 3 (at most 4096 characters).", common=False, refused_elsewhere=True, schedulers=(KUEUE,)),
    Field("ray_runtime_env", RAY, "Runtime environment", "Ray's runtime environment as YAML, e.g. "
          "'pip: [torch]' or 'working_dir: s3://...': a mapping, at most 32 KiB. Empty: none.",
          common=False, refused_elsewhere=True, schedulers=(KUEUE,)),
    Field("target_gpu_utilization_percent", SERVING, "Autoscale at GPU %",
          "Average GPU utilization KEDA keeps replicas at (1 to 100, default 70), when it scales on gpu.",
          common=False),
)
BY_NAME = {field.name: field for field in FIELDS}

# What the form suggests for ``gpu_memory_gib``: the weights of common model sizes (2 bytes a
# parameter in FP16/BF16, 1 in INT8, 0.5 in INT4) plus about a tenth for the CUDA context,
# activations and the KV cache of a short context. Training needs several times more
# (gradients and optimizer state: ~16 bytes a parameter with Adam in mixed precision).
MEMORY_PRESETS = (
    ("1B parameters, FP16", 3),
    ("3B parameters, FP16", 7),
    ("7B parameters, INT4", 5),
    ("8B parameters, INT8", 10),
    ("8B parameters, FP16", 18),
    ("13B parameters, FP16", 29),
    ("34B parameters, INT4", 20),
    ("70B parameters, INT4", 40),
    ("70B parameters, FP16 (per GPU of 2)", 77),
)
NAMES = tuple(BY_NAME)
RELATED_FIELDS = tuple(field for field in FIELDS if field.shape == RELATED)
LISTED = tuple(field for field in FIELDS if field.listed)


def sections(names) -> list[tuple[str, list[str]]]:
    """``names`` grouped by section, in the spec's order; empty sections left out."""
    chosen = set(names)
    grouped = [(title, [f.name for f in FIELDS if f.section == title and f.name in chosen]) for title in SECTIONS]
    return [(title, members) for title, members in grouped if members]


def refused_on(scheduler: str, job) -> dict[str, str]:
    """Field errors for settings the flavor's scheduler cannot honour (a priority on Volcano),
    rather than accepting them and ignoring them."""
    errors = {}
    for field in FIELDS:
        value = getattr(job, f"{field.name}_id" if field.shape == RELATED else field.name, None)
        if scheduler not in field.schedulers and value not in (None, "", [], {}):
            allowed = " or ".join(name.capitalize() for name in field.schedulers)
            errors[field.name] = (f"{field.label} applies to {allowed} flavors only; this flavor is scheduled "
                                  f"by {scheduler.capitalize()}. Leave it empty or pick another flavor.")
    return errors
