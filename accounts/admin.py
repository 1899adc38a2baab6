"""Admin pages for IdP group mappings and SSO identities (rows of ``tenants``)."""

from django.contrib import admin
from simple_history.admin import SimpleHistoryAdmin

from tenants.models.identities import GroupMapping, OidcIdentity


@admin.register(GroupMapping)
class GroupMappingAdmin(SimpleHistoryAdmin):
    list_display = ["group", "role", "team", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["group", "team__slug"]
    autocomplete_fields = ["team"]


@admin.register(OidcIdentity)
class OidcIdentityAdmin(SimpleHistoryAdmin):
    """Who signs in as whom. Deleting a row unlinks the account: the next SSO login with
    that IdP account makes or links an account afresh."""

    list_display = ["user", "subject", "issuer", "cluster_username", "quota_manager_via_idp", "last_login_at"]
    search_fields = ["user__username", "subject", "cluster_username"]
    readonly_fields = ["issuer", "subject", "cluster_username", "groups", "quota_manager_via_idp", "last_login_at"]
    autocomplete_fields = ["user"]
