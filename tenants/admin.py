"""Console for teams and their members."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from .models import Membership, Team
from .tasks import reconcile_team_soon


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "display_name", "namespace", "status", "member_count", "created_at"]
    list_filter = ["status"]
    search_fields = ["slug", "display_name", "description"]
    readonly_fields = ["namespace", "status", "status_message", "created_at", "updated_at"]
    inlines = [MembershipInline]  # quotas add theirs (quotas/admin.py)
    actions = ["offboard"]

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(member_total=Count("memberships"))

    @admin.display(description="namespace")
    def namespace(self, team):
        return team.namespace_name

    @admin.display(description="members", ordering="member_total")
    def member_count(self, team):
        return team.member_total

    def has_delete_permission(self, request, obj=None):
        # Deleting the row would leave the namespace and its workloads on the cluster; offboard instead.
        return False

    def has_offboard_permission(self, request) -> bool:
        return request.user.has_perm("tenants.delete_team")

    @admin.action(description="Offboard selected teams", permissions=["offboard"])
    def offboard(self, request, queryset):
        """Ask first; once confirmed, mark each team for offboarding and reconcile it, which
        deletes its namespace, queues and workloads, and then the team."""
        if request.POST.get("post") != "yes":
            return TemplateResponse(request, "admin/tenants/team/offboard_confirmation.html", {
                **self.admin_site.each_context(request),
                "title": "Offboard these teams?",
                "opts": self.model._meta,
                "teams": queryset,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            })
        started = [team for team in queryset if team.start_offboarding(request.user)]
        for team in started:
            reconcile_team_soon(team)  # after commit
        if started:
            self.message_user(request, f"Offboarding {', '.join(t.slug for t in started)}: their namespaces, "
                              "queues and workloads are being deleted, then the teams.", messages.SUCCESS)
        if len(started) < len(queryset):
            self.message_user(request, "Teams already being offboarded were left as they are.", messages.WARNING)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["team", "user", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["team__slug", "user__username", "user__email"]
    list_select_related = ["team", "user"]
    autocomplete_fields = ["user", "team"]
