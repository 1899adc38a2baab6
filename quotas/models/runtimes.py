"""Which Kubeflow Trainer ClusterTrainingRuntimes teams may run TrainJobs on (docs/trainjobs.md),
chosen by quota managers in the admin; the cluster admin seeds them through the chart's
``trainingRuntimes`` value (the ``TRAINING_RUNTIMES`` setting, synced after every ``migrate``:
`seed_from_settings`). Each also holds the starting point the submission form and the API
offer for it (image, command, arguments, nodes, GPUs per node, environment).

The runtime itself (its JobSet template, its launcher) is the cluster admin's, installed with
Trainer; the platform names it and never writes it. It reads them, though: every cluster sync
records whether each is installed (`record_installed`), so a TrainJob on one known to be
missing is refused at submission instead of waiting forever.
"""

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from core.validators import between, validate_env, validate_image, validate_string_list
from tenants.models import Team
from tenants.roles import is_quota_manager
from workloads.kinds import train_job

# A ClusterTrainingRuntime's name: a DNS subdomain, as its metadata.name.
validate_runtime_name = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
    "A runtime's name is its ClusterTrainingRuntime's: lowercase letters, digits, '-' and '.', e.g. torch-distributed.")


class TrainingRuntimeQuerySet(models.QuerySet):
    def visible_to(self, user, team_id: int | None = None) -> "TrainingRuntimeQuerySet":
        """The runtimes a person may read: those any team of theirs may use (with ``team_id``,
        a token's team, that team's only); every one for quota managers (who choose them)."""
        if is_quota_manager(user) and team_id is None:
            return self.all()
        teams = Team.objects.visible_to(user)
        if team_id is not None:
            teams = teams.filter(pk=team_id)
        return self.filter(enabled=True).filter(Q(limited_to_teams=False) | Q(teams__in=teams)).distinct()

    def for_team(self, team) -> "TrainingRuntimeQuerySet":
        """The runtimes ``team`` may use: the enabled ones, open to every team or to it."""
        return self.filter(enabled=True).filter(Q(limited_to_teams=False) | Q(teams=team)).distinct()


class TrainingRuntime(models.Model):
    name = models.CharField(max_length=253, unique=True, validators=[validate_runtime_name],
                            help_text="The ClusterTrainingRuntime's name on the cluster, e.g. torch-distributed.")
    label = models.CharField(max_length=100, help_text="What the submission form calls it.")
    framework = models.CharField(max_length=32, blank=True, default="",
                                 help_text="Its framework (torch, deepspeed, jax, ...), as the runtime's "
                                           "trainer.kubeflow.org/framework label says.")
    enabled = models.BooleanField(default=True, help_text="Offered to teams; off: new TrainJobs may not use it.")
    limited_to_teams = models.BooleanField(default=False, help_text="Only the teams below may use it.")
    teams = models.ManyToManyField(Team, blank=True, related_name="training_runtimes")
    # The form's and the API's starting point for it.
    image = models.CharField(max_length=512, blank=True, default="", validators=[validate_image])
    command = models.JSONField(default=list, blank=True, validators=[validate_string_list])
    args = models.JSONField(default=list, blank=True, validators=[validate_string_list])
    env = models.JSONField(default=dict, blank=True, validators=[validate_env])
    nodes = models.PositiveSmallIntegerField(default=2, validators=between(1, 256))
    gpus_per_node = models.PositiveSmallIntegerField(default=8, validators=between(1, 64))
    # What the cluster sync last saw (`quotas.tasks.check_training_runtimes`); None: never checked
    # (no cluster configured, or not read yet), which refuses nothing.
    installed = models.BooleanField(null=True, editable=False,
                                    help_text="Whether the cluster has this ClusterTrainingRuntime, as last checked; "
                                              "empty: never checked.")
    checked_at = models.DateTimeField(null=True, blank=True, editable=False,
                                      help_text="When the cluster was last read for it.")

    objects = TrainingRuntimeQuerySet.as_manager()
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.label or self.name

    def missing_problem(self) -> str:
        """Why a new TrainJob may not run on it although its team may use it ("" when it may):
        the cluster was read and has no such ClusterTrainingRuntime. Never checked is no refusal."""
        if self.installed is False:
            return f"{self.name} is not installed on the cluster: ask the platform administrators."
        return ""

    def preset(self) -> dict:
        """The fields a TrainJob on this runtime starts from (the form's and the API's preset)."""
        values = {"kind": train_job.NAME, "training_runtime": self.name, "workers": self.nodes,
                  "gpus_per_worker": self.gpus_per_node}
        if self.image:
            values["image"] = self.image
        values.update(command=list(self.command), args=list(self.args), env=dict(self.env))
        return values


def record_installed(live: dict[str, str], now) -> int:
    """Record what the cluster has: ``live`` maps each ClusterTrainingRuntime's name to its
    framework label ("" when it has none); a runtime not in it is missing. A row without a
    framework takes the runtime's label. Every row gets ``checked_at``; how many rows changed
    otherwise."""
    changed = 0
    for runtime in TrainingRuntime.objects.all():
        values = {"installed": runtime.name in live}
        if not runtime.framework and live.get(runtime.name):
            values["framework"] = live[runtime.name][:32]
        if any(getattr(runtime, name) != value for name, value in values.items()):
            changed += 1
        TrainingRuntime.objects.filter(pk=runtime.pk).update(checked_at=now, **values)
    return changed


def seed_from_settings(names, using: str = "default") -> list[str]:
    """Create the runtimes the chart seeds (``TRAINING_RUNTIMES``) that are not rows yet, enabled
    for every team; what quota managers changed since is never overwritten. The names created."""
    created = []
    for name in names:
        _, made = TrainingRuntime.objects.using(using).get_or_create(name=name, defaults={
            "label": name, "framework": name.split("-")[0]})
        if made:
            created.append(name)
    return created
