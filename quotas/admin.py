"""Console for GPU flavors, cohorts, quotas and priority classes."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.utils import timezone
from simple_history.admin import SimpleHistoryAdmin

from tenants.admin import TeamAdmin
from tenants.models import Membership

from .actions import apply_grants, cluster_objects_changed, quotas_changed
from .models import (
    Cohort,
    GpuFlavor,
    IdlePolicy,
    PriorityClass,
    Quota,
    QuotaGrant,
    QuotaRequest,
    StorageQuota,
    TrainingRuntime,
)
from .models.requests import four_eyes_lookback


def in_team(user, team) -> bool:
    """Four eyes: a quota manager does not set the quota of a team she is or lately was in
    (``Membership.was_in``: leaving the team for the edit does not help)."""
    return team is not None and Membership.was_in(team.pk, user, timezone.now() - four_eyes_lookback())


class QuotaInlineFormSet(forms.BaseInlineFormSet):
    """The quotas on a team's admin page: once saved, the team's queues follow."""

    def save(self, commit=True):
        saved = super().save(commit)
        if commit and (self.new_objects or self.changed_objects or self.deleted_objects):
            quotas_changed(self.instance)
        return saved


class QuotaInline(admin.TabularInline):
    model = Quota
    formset = QuotaInlineFormSet
    extra = 0
    fields = ["flavor", "cohort", "nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus",
              "cpu_cores", "memory_gib", "weight"]

    # ``obj`` is the team of the page.
    def has_add_permission(self, request, obj=None):
        return super().has_add_permission(request, obj) and not in_team(request.user, obj)

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and not in_team(request.user, obj)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and not in_team(request.user, obj)


class FourEyesForm(forms.ModelForm):
    """Quotas and grants: refused for a team the person saving is in (``request_user``)."""

    request_user = None

    def clean(self):
        cleaned = super().clean()
        team = cleaned.get("team") or (self.instance.team if self.instance.team_id else None)
        if in_team(self.request_user, team):
            raise ValidationError(f"You are in {team.slug}; another quota manager sets its quota.")
        return cleaned


class FourEyesAdmin(SimpleHistoryAdmin):
    form = FourEyesForm

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.request_user = request.user
        return form

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and not (obj and in_team(request.user, obj.team))

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and not (obj and in_team(request.user, obj.team))


class StorageQuotaInline(QuotaInline):
    """A team's storage per storage class (its ResourceQuota follows, like its GPU quotas)."""

    model = StorageQuota
    fields = ["storage_class", "storage_gib", "volumes"]


# A team's page in the admin shows its quotas too; tenants cannot know of quotas.
TeamAdmin.inlines = [*TeamAdmin.inlines, QuotaInline, StorageQuotaInline]


class ClusterObjectAdmin:
    """A row rendered into cluster-wide objects: saved or deleted here, it reaches the cluster
    through `quotas.actions` once the transaction commits, not at the next sweep.
    `quotas_of(obj)`: the quotas whose team queues name it."""

    @admin.display(description="Levels")
    def topology(self, obj) -> str:
        return obj.topology_description

    def quotas_of(self, obj):
        return Quota.objects.none()

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        cluster_objects_changed(self.quotas_of(obj))

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        cluster_objects_changed()

    def delete_queryset(self, request, queryset):
        super().delete_queryset(request, queryset)
        cluster_objects_changed()


@admin.register(GpuFlavor)
class GpuFlavorAdmin(ClusterObjectAdmin, SimpleHistoryAdmin):
    list_display = ["name", "display_name", "scheduler", "resource_name", "gpus_per_node",
                    "one_unit", "network_fabric", "idle_reclaim", "cost_per_gpu_hour"]
    list_filter = ["scheduler", "resource_name", "gpu_sharing", "network_fabric"]
    search_fields = ["name", "display_name", "resource_name"]
    readonly_fields = ["one_unit", "network", "topology", "idle_reclaim"]
    fieldsets = [
        (None, {"fields": ["name", "display_name", "description", "scheduler", "cost_per_gpu_hour"]}),
        ("Queue", {"fields": ["backfill"],
                   "description": "Whether the first waiting job of a team gets a reservation (docs/eta.md)."}),
        ("Hardware and sharing", {
            "fields": ["resource_name", "gpu_model", "gpu_memory_gib", "gpus_per_node", "gpu_sharing",
                       "replicas_per_gpu", "one_unit"],
            "description": "What one unit of quota is: docs/sharing.md explains each mode."}),
        ("Placement", {"fields": ["node_labels", "node_taints", "tolerations"]}),
        ("Network topology", {
            "fields": ["topology_block_label", "topology_rack_label", "topology"],
            "description": "Node labels of the blocks and racks jobs may keep their workers in: Kueue flavors get a "
                           "Topology of them; on Volcano flavors Volcano's HyperNode label discovery must list the "
                           "same labels (docs/topology.md)."}),
        ("Network for multi-node training", {
            "fields": ["network_fabric", "nccl_socket_ifname", "nccl_ib_hca", "nccl_ib_gid_index",
                       "nccl_net_gdr_level", "rdma_resources", "network"],
            "description": "Multi-node jobs get these NCCL variables (their own env wins) and RDMA devices."}),
        ("Idle GPUs", {"fields": ["idle_reclaim"]}),
    ]

    @admin.display(description="One unit")
    def one_unit(self, obj) -> str:
        return obj.unit_description if obj.gpu_memory_gib else "Set once the GPU's memory is given."

    @admin.display(description="What multi-node jobs get")
    def network(self, obj) -> str:
        return obj.network_description

    @admin.display(description="Levels")
    def topology(self, obj) -> str:
        return obj.topology_description

    def quotas_of(self, obj):
        return Quota.objects.filter(flavor=obj)

    @admin.display(description="Idle-GPU reclaim")
    def idle_reclaim(self, obj) -> str:
        """The flavor's idle policy in words; time-sliced and MPS flavors say they are exempt."""
        if obj.pk is None:
            return "Set once the flavor is saved (Idle-GPU policies)."
        return obj.idle_exempt_because or IdlePolicy.objects.rules(None, obj).describe()


@admin.register(IdlePolicy)
class IdlePolicyAdmin(SimpleHistoryAdmin):
    """A flavor's idle-GPU policy (no team) and quota managers' overrides for one team;
    empty values are inherited (the flavor's, then the settings')."""

    list_display = ["flavor", "team", "action", "threshold_percent", "idle_after_seconds", "grace_seconds",
                    "owners_may_exempt", "in_force"]
    list_filter = ["flavor", "action"]
    search_fields = ["flavor__name", "team__slug", "note"]
    list_select_related = ["flavor", "team"]
    autocomplete_fields = ["team"]

    @admin.display(description="In force")
    def in_force(self, obj) -> str:
        return IdlePolicy.objects.rules(obj.team, obj.flavor).describe()


@admin.register(TrainingRuntime)
class TrainingRuntimeAdmin(SimpleHistoryAdmin):
    """The Kubeflow Trainer ClusterTrainingRuntimes teams may run TrainJobs on (docs/trainjobs.md),
    and the preset each offers. Nothing reaches the cluster: the runtimes are the cluster admin's;
    the list says which the cluster sync found installed."""

    list_display = ["name", "label", "framework", "enabled", "installed", "limited_to_teams", "nodes", "gpus_per_node"]
    list_filter = ["enabled", "installed", "framework", "limited_to_teams"]
    readonly_fields = ["installed", "checked_at"]
    search_fields = ["name", "label", "framework"]
    filter_horizontal = ["teams"]
    fieldsets = [
        (None, {"fields": ["name", "label", "framework", "enabled", "limited_to_teams", "teams"]}),
        ("On the cluster", {"fields": ["installed", "checked_at"],
                            "description": "What the cluster sync last read: not installed refuses new TrainJobs."}),
        ("Preset", {"fields": ["image", "command", "args", "env", "nodes", "gpus_per_node"]}),
    ]

    def save_model(self, request, obj, form, change):
        if "name" in form.changed_data:  # what was read was of another name: unknown until read again
            obj.installed, obj.checked_at = None, None
        super().save_model(request, obj, form, change)
        cluster_objects_changed()  # whether the cluster has it is read now, not at the next sweep


@admin.register(Cohort)
class CohortAdmin(ClusterObjectAdmin, admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name"]

    @admin.display(description="Levels")
    def topology(self, obj) -> str:
        return obj.topology_description

    def quotas_of(self, obj):
        return Quota.objects.filter(cohort=obj)


@admin.register(Quota)
class QuotaAdmin(FourEyesAdmin):
    list_display = ["team", "flavor", "cohort", "nominal_gpus", "borrowing_limit_gpus",
                    "lending_limit_gpus", "cpu_cores", "memory_gib", "weight"]
    list_filter = ["flavor", "cohort", "flavor__scheduler"]
    search_fields = ["team__slug", "team__display_name", "flavor__name"]
    list_select_related = ["team", "flavor", "cohort"]
    autocomplete_fields = ["team"]

    def get_readonly_fields(self, request, obj=None):
        # Grants decide these numbers once a quota has any; edit the grants instead.
        if obj is not None and QuotaGrant.objects.filter(team_id=obj.team_id, flavor_id=obj.flavor_id).exists():
            return ["nominal_gpus", "borrowing_limit_gpus", "cpu_cores", "memory_gib"]
        return []

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        quotas_changed(obj.team)  # its queues follow now, not at the next sweep

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        quotas_changed(obj.team)

    def delete_queryset(self, request, queryset):
        teams = {quota.team for quota in queryset.select_related("team")}
        super().delete_queryset(request, queryset)
        for team in teams:
            quotas_changed(team)


@admin.register(QuotaRequest)
class QuotaRequestAdmin(SimpleHistoryAdmin):
    """Read only, for everyone: a request is what its team's owner filed (the team page or
    the API), and it is decided in the console, under four eyes. A manager who would give
    other numbers approves with them there (the grant records them); nobody rewrites what
    was asked, before or after the decision (``QuotaRequest.save`` refuses it too)."""

    list_display = ["id", "team", "flavor", "gpus", "starts_on", "ends_on", "renews", "status", "requested_by",
                    "decided_by"]
    list_filter = ["status", "flavor"]
    search_fields = ["team__slug", "justification"]
    list_select_related = ["team", "flavor", "requested_by", "decided_by"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(QuotaGrant)
class QuotaGrantAdmin(FourEyesAdmin):
    list_display = ["id", "team", "flavor", "gpus", "borrowing_limit_gpus", "starts_at", "ends_at", "renewable",
                    "applied"]
    list_filter = ["flavor", "applied", "renewable"]
    search_fields = ["team__slug", "note"]
    list_select_related = ["team", "flavor"]
    readonly_fields = ["applied", "expiry_warning_sent_at", "request", "granted_by"]
    autocomplete_fields = ["team"]

    def get_readonly_fields(self, request, obj=None):
        # A grant stays on the quota it was added to; the sweep only recomputes that one.
        if obj is None:
            return self.readonly_fields
        if obj.request_id is not None:  # a decision's numbers, as decided: end it early in the console
            return [*self.readonly_fields, "team", "flavor", "gpus", "borrowing_limit_gpus", "cpu_cores",
                    "memory_gib", "starts_at", "ends_at", "note"]
        return [*self.readonly_fields, "team", "flavor"]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
        else:  # the first grant on a quota keeps the quota's numbers as a standing grant
            obj._history_user = request.user
            obj.granted_by = request.user
            QuotaGrant.objects.add(obj)
        apply_grants(team=obj.team, flavor=obj.flavor)  # an edit takes effect now, not at the next sweep

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        apply_grants(team=obj.team, flavor=obj.flavor)


@admin.register(PriorityClass)
class PriorityClassAdmin(ClusterObjectAdmin, admin.ModelAdmin):
    list_display = ["name", "value", "checkpoint_grace_seconds", "minimum_runtime_seconds", "description"]
    search_fields = ["name"]
