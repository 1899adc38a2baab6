"""Console for teams and their members."""

from django.contrib import admin

from quotas.models import Quota

from .models import Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0
    fields = ["flavor", "cohort", "nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus",
              "cpu_cores", "memory_gib", "weight"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "display_name", "namespace", "status", "member_count", "created_at"]
    list_filter = ["status"]
    search_fields = ["slug", "display_name", "description"]
    readonly_fields = ["namespace", "status", "status_message", "created_at", "updated_at"]
    inlines = [MembershipInline, QuotaInline]

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(member_total=Count("memberships"))

    @admin.display(description="namespace")
    def namespace(self, team):
        return team.namespace_name

    @admin.display(description="members", ordering="member_total")
    def member_count(self, team):
        return team.member_total


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["team", "user", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["team__slug", "user__username", "user__email"]
    list_select_related = ["team", "user"]
    autocomplete_fields = ["user", "team"]
