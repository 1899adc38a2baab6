"""Console for jobs: searchable, filterable, with their lifecycle events read-only."""

from django.contrib import admin
from simple_history.admin import SimpleHistoryAdmin

from quotas.models import MemberCap
from workloads import spec

from .actions import remove_cap, save_cap
from .models import GpuInterval, Job, JobEvent

STATUS_FIELDS = ["state", "reason", "message", "kueue_reason", "kueue_message", "created_at", "updated_at",
                 "submitted_at", "admitted_at", "started_at", "finished_at"]


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    fields = readonly_fields = ["created_at", "from_state", "to_state", "reason", "message"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    # The job spec's columns and sections (workloads/spec.py), then what the platform records.
    list_display = [*(field.name for field in spec.LISTED), "state", "reason", "submitter", "created_at"]
    list_filter = ["state", "kind", "flavor", "team"]
    search_fields = ["name", "team__slug", "submitter__username", "image"]
    list_select_related = ["team", "flavor", "submitter"]
    fieldsets = [*((title, {"fields": names}) for title, names in spec.sections(spec.NAMES)),
                 ("Status", {"fields": ["submitter", *STATUS_FIELDS]})]
    readonly_fields = STATUS_FIELDS
    inlines = [JobEventInline]
    date_hierarchy = "created_at"


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ["job", "created_at", "from_state", "to_state", "reason"]
    list_filter = ["to_state"]
    search_fields = ["job__name", "job__team__slug", "reason", "message"]
    list_select_related = ["job__team"]
    readonly_fields = ["job", "created_at", "from_state", "to_state", "reason", "message"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(GpuInterval)
class GpuIntervalAdmin(admin.ModelAdmin):
    """What the usage page sums; written by the job's state changes only, so read-only."""

    list_display = ["job", "team", "flavor", "submitter", "gpus", "started_at", "ended_at"]
    list_filter = ["flavor", "team"]
    search_fields = ["job__name", "team__slug", "submitter__username"]
    list_select_related = ["job__team", "team", "flavor", "submitter"]
    readonly_fields = list_display
    date_hierarchy = "started_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(MemberCap)
class MemberCapAdmin(SimpleHistoryAdmin):
    """Per-person caps (docs/caps.md), set by a team's owners on its page; here for quota
    managers. Saved and removed the way the team page does it (`jobs.actions.save_cap`), so
    the jobs a raised cap lets through go at once."""

    list_display = ["team", "flavor", "user", "max_gpus", "max_jobs", "set_by", "updated_at"]
    list_filter = ["flavor", "team"]
    search_fields = ["team__slug", "user__username"]
    list_select_related = ["team", "flavor", "user", "set_by"]
    fields = ["team", "flavor", "user", "max_gpus", "max_jobs", "set_by", "updated_at"]
    readonly_fields = ["set_by", "updated_at"]

    def save_model(self, request, obj, form, change):
        save_cap(obj, request.user)

    def delete_model(self, request, obj):
        remove_cap(obj, request.user)

    def delete_queryset(self, request, queryset):
        for cap in queryset.select_related("team"):
            remove_cap(cap, request.user)
