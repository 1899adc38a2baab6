"""The job submission form (training and inference), its presets, and cloning.

Which fields there are, their sections, labels and help, and what each kind asks for come
from the job spec (``workloads/spec.py``); this module adds only how they are typed in."""

import shlex

from django import forms
from django.core.exceptions import ValidationError
from django.utils.html import format_html, format_html_join

from quotas.models import GpuFlavor, PriorityClass, Sharing, TrainingRuntime
from quotas.models.hardware import gib_text
from tenants.models import Team
from workloads import autoscaling, kinds, spec
from workloads.kinds import train_job

from .models import Job, Volume

# name -> (label, initial values), from every kind's presets. Strings for command/args/env, as
# the form shows them.
PRESETS = kinds.presets()


def runtime_presets(user) -> dict[str, tuple[str, dict]]:
    """A preset per training runtime the person's teams may use (`quotas.TrainingRuntime`), each
    the TrainJob kind's own preset with the runtime's values over it; one the cluster sync found
    missing says so (a job on it is refused)."""
    base = next(values for _, values in PRESETS.values() if values["kind"] == train_job.NAME)
    found = {}
    for runtime in TrainingRuntime.objects.visible_to(user).filter(enabled=True):
        values = {key: value for key, value in runtime.preset().items() if value not in ("", [], {})}
        missing = " (not installed on the cluster)" if runtime.installed is False else ""
        found[f"runtime-{runtime.name}"] = (f"TrainJob on {runtime}{missing}", {**base, **values})
    return found


def presets_for(user) -> dict[str, tuple[str, dict]]:
    """Every preset the form offers a person: the kinds' and their teams' training runtimes'."""
    return {**PRESETS, **runtime_presets(user)}


def first_preset(kind: str) -> str:
    """The preset a kind's tab starts from: the first of that kind."""
    return next((key for key, (_, values) in PRESETS.items() if values["kind"] == kind), next(iter(PRESETS)))


def clone_initial(job: Job) -> dict:
    """Form values that reproduce ``job`` as a new submission: every field of the spec."""
    initial = {field.name: getattr(job, f"{field.name}_id" if field.shape == spec.RELATED else field.name)
               for field in spec.FIELDS}
    initial["name"] = job.name if job.is_final else _copy_name(job.name)
    return initial


def _copy_name(name: str) -> str:
    return f"{name[:35].rstrip('-')}-copy"


class FlavorChoiceField(forms.ModelChoiceField):
    """Flavor options say how big a node is and, for the chosen team, its quota and free GPUs."""

    usage: dict = {}

    def label_from_instance(self, flavor):
        label = f"{flavor.display_name or flavor.name} · {flavor.gpus_per_node} GPUs/node"
        if flavor.gpu_sharing != Sharing.EXCLUSIVE:  # a share or a slice: what memory it brings
            label += f" · {gib_text(flavor.unit_memory_mib)} of GPU memory each"
        item = self.usage.get(flavor.pk)
        if item is None:
            return f"{label} · no quota"
        borrow = f" (+{item.borrowable} borrowable)" if item.borrowable else ""
        return f"{label} · quota {item.nominal}{borrow} · {item.free} free"


class ListField(forms.CharField):
    """A command line typed as text, split the way a shell would."""

    def prepare_value(self, value):
        return shlex.join(value) if isinstance(value, list) else value

    def to_python(self, value):
        value = super().to_python(value)
        try:
            return shlex.split(value)
        except ValueError as err:
            raise ValidationError(f"Cannot split this into words: {err} (check the quotes).") from err


class EnvField(forms.CharField):
    """``NAME=value`` lines into a mapping."""

    widget = forms.Textarea(attrs={"rows": 3, "placeholder": "NCCL_DEBUG=WARN"})

    def prepare_value(self, value):
        return "\n".join(f"{k}={v}" for k, v in sorted(value.items())) if isinstance(value, dict) else value

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


class SuggestingNumberInput(forms.NumberInput):
    """A number with suggestions the browser offers as the person types (a ``<datalist>``):
    the GPU memory of common model sizes (``spec.MEMORY_PRESETS``)."""

    def __init__(self, suggestions, list_id: str):
        super().__init__(attrs={"list": list_id, "min": 1})
        self.suggestions, self.list_id = suggestions, list_id

    def render(self, name, value, attrs=None, renderer=None):
        options = format_html_join("", '<option value="{}">{}</option>',
                                   ((gib, f"{label}: ~{gib} GiB") for label, gib in self.suggestions))
        return format_html('{}<datalist id="{}">{}</datalist>', super().render(name, value, attrs, renderer),
                           self.list_id, options)


# Shapes typed in as text: a command line (split as a shell would), NAME=value lines.
TYPED_AS_TEXT = {spec.LIST: ListField, spec.MAP: EnvField}
# What the form says beyond the spec's help: how to type it here.
HOW_TO_TYPE = {"env": f"One NAME=value per line, at most {spec.TEXT_BOUNDS.items} (names and values of "
                      f"{spec.TEXT_BOUNDS.item_chars} characters, {spec.TEXT_BOUNDS.total_bytes // 1024} KiB in all). "
                      "The torchrun variables (MASTER_ADDR, WORLD_SIZE, NNODES, ...) are set by the platform.",
               "volumes": "One volume=/mount/path per line, e.g. model-cache=/models: the team's volumes, which "
                          "owners create on the team's page. One mounted at /home/user keeps the home directory."}


class JobForm(forms.ModelForm):
    class Meta:
        model = Job
        fields = list(spec.NAMES)
        field_classes = {"flavor": FlavorChoiceField}
        labels = {field.name: field.label for field in spec.FIELDS}
        help_texts = {field.name: field.help for field in spec.FIELDS}
        widgets = {"kind": forms.HiddenInput,
                   "gpu_memory_gib": SuggestingNumberInput(spec.MEMORY_PRESETS, "gpu-memory-presets")}

    def __init__(self, *args, user, usage_by_team=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["team"].queryset = Team.objects.submittable_by(user)
        self.fields["team"].empty_label = None
        self.fields["flavor"].queryset = GpuFlavor.objects.all()
        self.fields["flavor"].empty_label = None
        self.fields["priority"].queryset = PriorityClass.objects.all()
        self.fields["priority"].empty_label = "default (0)"
        for field in spec.FIELDS:
            if field.shape in TYPED_AS_TEXT:
                self.fields[field.name] = TYPED_AS_TEXT[field.shape](
                    required=False, label=field.label, help_text=HOW_TO_TYPE.get(field.name, field.help))
        # Only the fields of the chosen kind exist; the model's defaults fill the others.
        kind = kinds.by_name(self.kind)
        given = {field.name for field in kind.spec_fields}
        for field in spec.FIELDS:
            if field.name not in given:
                del self.fields[field.name]
            elif field.name in kind.requires:
                self.fields[field.name].required = True
        # A number left empty is the field's default (30 s of readiness delay, 4 CPU cores, ...),
        # and so is a choice not sent (a server's autoscale metric: cpu).
        self.defaults = {}
        for name, form_field in self.fields.items():
            model_field = Job._meta.get_field(name)
            if (isinstance(form_field, forms.IntegerField | forms.ChoiceField) and model_field.has_default()
                    and not model_field.null and name != "kind"):
                form_field.required = False
                self.defaults[name] = model_field.get_default()
        if "autoscale_metric" in self.fields:
            self._offer_gpu_scaling(self.fields["autoscale_metric"])
        team_id = self.selected_team_id()
        usage = {flavor_id: item for (t, flavor_id), item in (usage_by_team or {}).items() if t == team_id}
        self.fields["flavor"].usage = usage
        if not self.is_bound and not self.initial.get("flavor") and usage:
            self.initial["flavor"] = self._best_flavor(usage.values())

    def clean(self):
        data = super().clean()
        for name, default in self.defaults.items():
            if name in data and data[name] in (None, ""):
                data[name] = default
        return data

    @staticmethod
    def _offer_gpu_scaling(field) -> None:
        """GPU utilization is offered where the cluster has KEDA and a Prometheus is set; else
        the option says it is unavailable, and why (`Job.clean` refuses it all the same)."""
        why = autoscaling.unavailable()
        if why:
            field.choices = [(value, f"{label} (unavailable here)" if value == Job.Autoscale.GPU else label)
                             for value, label in Job.Autoscale.choices]
            field.help_text = why

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
        return value if value in Job.Kind.values else kinds.KINDS[0].name

    def selected_team_id(self) -> int | None:
        value = self.data.get("team") if self.is_bound else self.initial.get("team")
        try:
            return int(value)
        except (TypeError, ValueError):
            first = self.fields["team"].queryset.first()
            return first.pk if first else None

    def field_groups(self):
        """The visible fields in the order the page shows them, by section (the spec's)."""
        names = [name for name, field in self.fields.items() if not field.widget.is_hidden]
        for title, members in spec.sections(names):
            yield title, [self[name] for name in members]

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


class VolumeForm(forms.Form):
    """A new volume of the team (`Volume.objects.add` holds the rules: the storage quota)."""

    name = forms.CharField(max_length=63, help_text=Volume._meta.get_field("name").help_text)
    storage_class = forms.ChoiceField(label="Storage class")
    size_gib = forms.IntegerField(label="Size (GiB)", min_value=1)

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        classes = team.storage_quotas.values_list("storage_class", flat=True)
        self.fields["storage_class"].choices = [(name, name) for name in classes]
