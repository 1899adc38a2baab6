"""Browser routes of single sign-on and personal access (the OIDC library's own routes are
under /oidc/, included by gpuplatform.web_urls)."""

from django.urls import path

from . import views

app_name = "accounts"
urlpatterns = [
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
    path("sso/groups/", views.group_mappings, name="group-mappings"),
    path("sso/groups/<int:pk>/delete/", views.group_mapping_delete, name="group-mapping-delete"),
    path("teams/<slug:slug>/access/", views.access, name="access"),
]
