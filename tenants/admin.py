"""Console for teams and their members."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import ActionLocation
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from . import actions
from .models import Membership, Team

LAST_OWNER = "A team always keeps an owner: add another owner before removing or demoting this one."


class MembershipInlineFormSet(forms.BaseInlineFormSet):
    """The team's members as edited on its admin page: a team that has an owner keeps one."""

    def clean(self):
        super().clean()
        for form in self.initial_forms:  # IdP memberships follow their group, not this page
            if form.instance.from_idp and (form.has_changed() or self._should_delete_form(form)):
                raise forms.ValidationError(form.instance.idp_locked_message)
        had_owner = any(form.initial.get("role") == Membership.Role.OWNER for form in self.initial_forms)
        keeps_owner = any(
            form.cleaned_data.get("role") == Membership.Role.OWNER
            for form in self.forms
            if form.cleaned_data and not self._should_delete_form(form)
        )
        if had_owner and not keeps_owner:
            raise forms.ValidationError(LAST_OWNER)


class MembershipInline(admin.TabularInline):
    model = Membership
    formset = MembershipInlineFormSet
    extra = 0
    autocomplete_fields = ["user"]
    readonly_fields = ["source", "via_group"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "display_name", "namespace", "status", "member_count", "created_at"]
    list_filter = ["status"]
    search_fields = ["slug", "display_name", "description"]
    readonly_fields = ["namespace", "status", "status_message", "created_at", "updated_at"]
    inlines = [MembershipInline]  # quotas add theirs (quotas/admin.py)
    actions = ["offboard"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("memberships"))

    @admin.display(description="namespace")
    def namespace(self, team):
        return team.namespace_name

    @admin.display(description="members", ordering="member_total")
    def member_count(self, team):
        return team.member_total

    def get_readonly_fields(self, request, obj=None):
        # The slug names the namespace, bindings and queues: fixed once the team exists
        # (the model refuses a change too).
        return [*self.readonly_fields, "slug"] if obj is not None else self.readonly_fields

    def get_actions(self, request, action_location=ActionLocation.CHANGE_LIST):
        # "Offboard selected teams" is the bulk delete: it asks first and cleans the cluster.
        actions = super().get_actions(request, action_location)
        actions.pop("delete_selected", None)
        return actions

    # Deleting a team is offboarding it: the row alone would leave the namespace, its
    # RoleBindings, queues and workloads on the cluster. The reconcile deletes them, then the row.
    def get_deleted_objects(self, objs, request):
        teams = list(objs)
        described = [f"Team {team.slug}: the namespace {team.namespace_name} and everything in it, its "
                     "queues and workloads on the cluster, then the team with its members, quotas and jobs"
                     for team in teams]
        return described, {Team._meta.verbose_name_plural: len(teams)}, set(), []

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        actions.team_saved(obj)  # its namespace follows now, not at the next sweep

    def delete_model(self, request, obj):
        actions.offboard(obj, request.user)

    def delete_queryset(self, request, queryset):
        for team in queryset:
            self.delete_model(request, team)

    def response_delete(self, request, obj_display, obj_id):
        self.message_user(request, f"Offboarding {obj_display}: its namespace, queues and workloads are being "
                          "deleted, then the team.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:tenants_team_changelist"))

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
        started = [team for team in queryset if actions.offboard(team, request.user)]
        if started:
            self.message_user(request, f"Offboarding {', '.join(t.slug for t in started)}: their namespaces, "
                              "queues and workloads are being deleted, then the teams.", messages.SUCCESS)
        if len(started) < len(queryset):
            self.message_user(request, "Teams already being offboarded were left as they are.", messages.WARNING)


class MembershipForm(forms.ModelForm):
    def clean(self):
        cleaned = super().clean()
        was = self.instance
        if (was.pk and was.role == Membership.Role.OWNER and cleaned.get("role") != Membership.Role.OWNER
                and not _other_owners(was).exists()):
            raise forms.ValidationError(LAST_OWNER)
        return cleaned


def _other_owners(membership: Membership):
    return Membership.objects.filter(team_id=membership.team_id, role=Membership.Role.OWNER).exclude(pk=membership.pk)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    form = MembershipForm
    list_display = ["team", "user", "role", "source", "via_group", "created_at"]
    list_filter = ["role", "source", "team"]
    readonly_fields = ["source", "via_group"]
    search_fields = ["team__slug", "user__username", "user__email"]
    list_select_related = ["team", "user"]
    autocomplete_fields = ["user", "team"]

    # Memberships from IdP groups are shown, not edited: they follow the group at each login.
    def has_change_permission(self, request, obj=None):
        return not (obj is not None and obj.from_idp) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not (obj is not None and obj.from_idp) and super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs, request):
        # Django refuses a deletion that lists protected objects: the last owner of a team is one.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        objs = list(objs)
        for team_id in {m.team_id for m in objs if m.role == Membership.Role.OWNER}:
            chosen = {m.pk for m in objs if m.team_id == team_id}
            if not Membership.objects.filter(team_id=team_id, role=Membership.Role.OWNER).exclude(pk__in=chosen).exists():
                protected = [*protected, f"{Team.objects.get(pk=team_id).slug}: {LAST_OWNER}"]
        return deleted, counts, perms_needed, protected
