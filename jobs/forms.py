"""The job submission form (training and inference), its presets, and cloning."""

import shlex

from django import forms
from django.core.exceptions import ValidationError

from quotas.models import GpuFlavor, PriorityClass
from tenants.models import Team

from .models import Job

TRAINING_FIELDS = ["workers", "max_runtime_seconds"]
INFERENCE_FIELDS = [
    "port", "min_replicas", "max_replicas", "readiness_path", "autoscaling_target_cpu_percent",
]

PYTORCH_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
TORCHRUN_ARGS = (
    "--nnodes=$(NNODES) --nproc-per-node=$(NPROC_PER_NODE) --node-rank=$(NODE_RANK) "
    "--master-addr=$(MASTER_ADDR) --master-port=$(MASTER_PORT) train.py --epochs 10"
)

# name -> (label, initial values). Strings for command/args/env, as the form shows them.
PRESETS = {
    "single": ("Single-GPU training", dict(
        kind="training", name="train-single", image=PYTORCH_IMAGE, command="python",
        args="train.py --epochs 10", workers=1, gpus_per_worker=1, cpu_per_worker=8,
        memory_per_worker_gib=64, max_runtime_seconds=24 * 3600,
    )),
    "ddp": ("Multi-node PyTorch DDP", dict(
        kind="training", name="train-ddp", image=PYTORCH_IMAGE, command="torchrun",
        args=TORCHRUN_ARGS, env="NCCL_DEBUG=WARN", workers=2, gpus_per_worker=8, cpu_per_worker=32,
        memory_per_worker_gib=256, max_runtime_seconds=48 * 3600,
    )),
    "inference": ("Inference server", dict(
        kind="inference", name="llm-serve", image="vllm/vllm-openai:v0.6.4", command="",
        args="--model /models/llama-3-8b --port 8000", workers=1, gpus_per_worker=1,
        cpu_per_worker=8, memory_per_worker_gib=64, port=8000, min_replicas=1, max_replicas=2,
        readiness_path="/health", autoscaling_target_cpu_percent=70,
    )),
}


def clone_initial(job: Job) -> dict:
    """Form values that reproduce ``job`` as a new submission."""
    initial = {
        field: getattr(job, field)
        for field in ["kind", "image", "workers", "gpus_per_worker", "cpu_per_worker",
                      "memory_per_worker_gib", "max_runtime_seconds", *INFERENCE_FIELDS]
    }
    initial.update(
        team=job.team_id, flavor=job.flavor_id, priority=job.priority_id,
        name=job.name if job.is_final else _copy_name(job.name),
        command=shlex.join(job.command), args=shlex.join(job.args),
        env="\n".join(f"{k}={v}" for k, v in sorted(job.env.items())),
    )
    return initial


def _copy_name(name: str) -> str:
    return f"{name[:35].rstrip('-')}-copy"


class FlavorChoiceField(forms.ModelChoiceField):
    """Flavor options say how big a node is and, for the chosen team, its quota and free GPUs."""

    usage: dict = {}

    def label_from_instance(self, flavor):
        label = f"{flavor.display_name or flavor.name} · {flavor.gpus_per_node} GPUs/node"
        item = self.usage.get(flavor.pk)
        if item is None:
            return f"{label} · no quota"
        borrow = f" (+{item.borrowable} borrowable)" if item.borrowable else ""
        return f"{label} · quota {item.nominal}{borrow} · {item.free} free"


class ListField(forms.CharField):
    """A command line typed as text, split the way a shell would."""

    def to_python(self, value):
        value = super().to_python(value)
        try:
            return shlex.split(value)
        except ValueError as err:
            raise ValidationError(f"Cannot split this into words: {err} (check the quotes).") from err


class EnvField(forms.CharField):
    """``NAME=value`` lines into a mapping."""

    widget = forms.Textarea(attrs={"rows": 3, "placeholder": "NCCL_DEBUG=WARN"})

    def to_python(self, value):
        env = {}
        for number, line in enumerate(super().to_python(value).splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, val = line.partition("=")
            if not sep or not name.strip():
                raise ValidationError(f"Line {number} should look like NAME=value.")
            env[name.strip()] = val
        return env


class JobForm(forms.ModelForm):
    command = ListField(required=False, help_text="The entrypoint, e.g. python or torchrun. Empty: the image's own.")
    args = ListField(required=False, help_text="Arguments, split like a shell would: quote words with spaces.")
    env = EnvField(required=False, label="Environment", help_text="One NAME=value per line.")

    class Meta:
        model = Job
        fields = [
            "team", "kind", "name", "flavor", "priority", "image", "command", "args", "env",
            "workers", "gpus_per_worker", "cpu_per_worker", "memory_per_worker_gib",
            "max_runtime_seconds", *INFERENCE_FIELDS,
        ]
        field_classes = {"flavor": FlavorChoiceField}
        labels = {
            "gpus_per_worker": "GPUs per worker",
            "cpu_per_worker": "CPU cores per worker",
            "memory_per_worker_gib": "Memory per worker (GiB)",
            "max_runtime_seconds": "Max runtime (seconds)",
            "min_replicas": "Min replicas",
            "max_replicas": "Max replicas",
            "readiness_path": "Readiness path",
            "autoscaling_target_cpu_percent": "Autoscale at CPU %",
        }
        help_texts = {
            "name": "Lowercase letters, digits and '-', starting with a letter. Unique among the team's live jobs.",
            "image": "A container image, e.g. pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime.",
            "workers": "Pods started together (gang-scheduled); each gets the GPUs below.",
            "port": "The port the server listens on.",
            "cpu_per_worker": "",
        }
        widgets = {"kind": forms.HiddenInput}

    def __init__(self, *args, user, usage_by_team=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["team"].queryset = Team.objects.submittable_by(user)
        self.fields["team"].empty_label = None
        self.fields["flavor"].queryset = GpuFlavor.objects.all()
        self.fields["flavor"].empty_label = None
        self.fields["priority"].queryset = PriorityClass.objects.all()
        self.fields["priority"].empty_label = "default (0)"
        # Only the fields of the chosen kind exist; the model's defaults fill the others.
        drop = INFERENCE_FIELDS if self.kind == Job.Kind.TRAINING else TRAINING_FIELDS
        for name in drop:
            del self.fields[name]
        if self.kind == Job.Kind.INFERENCE:
            self.fields["port"].required = True
            self.fields["min_replicas"].required = True
            self.fields["max_replicas"].required = True
        team_id = self.selected_team_id()
        usage = {flavor_id: item for (t, flavor_id), item in (usage_by_team or {}).items() if t == team_id}
        self.fields["flavor"].usage = usage
        if not self.is_bound and not self.initial.get("flavor") and usage:
            self.initial["flavor"] = self._best_flavor(usage.values())

    def _best_flavor(self, usage) -> int:
        """Start on a flavor where the job as preset can run, with the most free GPUs."""
        per_worker = int(self.initial.get("gpus_per_worker") or 1)
        replicas = self.initial.get("max_replicas") or self.initial.get("workers") or 1
        need = int(replicas) * per_worker

        def score(item):
            fits = per_worker <= item.flavor.gpus_per_node and need <= item.ceiling
            return (fits, item.free)

        return max(usage, key=score).flavor.pk

    @property
    def kind(self) -> str:
        value = self.data.get("kind") if self.is_bound else self.initial.get("kind")
        return value if value in Job.Kind.values else Job.Kind.TRAINING

    def selected_team_id(self) -> int | None:
        value = self.data.get("team") if self.is_bound else self.initial.get("team")
        try:
            return int(value)
        except (TypeError, ValueError):
            first = self.fields["team"].queryset.first()
            return first.pk if first else None

    def field_groups(self):
        """The fields in the order the page shows them, by section."""
        sections = [
            ("Job", ["team", "name", "flavor", "priority"]),
            ("Container", ["image", "command", "args", "env"]),
            ("Resources", ["workers", "gpus_per_worker", "cpu_per_worker", "memory_per_worker_gib",
                           "max_runtime_seconds"]),
            ("Serving", INFERENCE_FIELDS),
        ]
        for title, names in sections:
            fields = [self[name] for name in names if name in self.fields]
            if fields:
                yield title, fields

    def unsaved_job(self) -> Job:
        """The job the cleaned form describes, not saved (for the preview)."""
        job = self.save(commit=False)
        job.submitter = self.user
        return job

    def sizing_job(self) -> Job | None:
        """An unsaved job with just the team, flavor, priority and size as typed, for the
        feasibility verdict when other fields still have errors; None if those are unusable."""
        instance = self.instance
        if not (instance.team_id and instance.flavor_id):
            return None
        sizes = {}
        for name in ("gpus_per_worker", "workers", "max_replicas"):
            if name not in self.fields:
                continue
            try:
                sizes[name] = self.fields[name].clean(self[name].value())
            except ValidationError:
                return None
        if not sizes.get("gpus_per_worker"):
            return None
        return Job(team=instance.team, flavor=instance.flavor, priority=instance.priority,
                   kind=self.kind, **sizes)

    def submit_fields(self) -> dict:
        """Keyword arguments for ``Job.objects.submit`` (team and submitter apart)."""
        return {name: value for name, value in self.cleaned_data.items() if name != "team"}
