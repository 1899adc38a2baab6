"""Quota pages (browser)."""

from django.urls import path

from . import console_views, usage_views, views

app_name = "quotas"

urlpatterns = [
    path("", views.quota_list, name="list"),
    # GPU-hour accounting (everyone, scoped) and quota requests from a team page (owners).
    path("usage/", usage_views.usage, name="usage"),
    path("usage.csv", usage_views.usage_csv, name="usage-csv"),
    path("requests/<slug:slug>/new/", usage_views.request_create, name="request-create"),
    # The quota managers' console.
    path("console/", console_views.capacity_page, name="console"),
    path("console/requests/", console_views.request_list, name="console-requests"),
    path("console/requests/<int:pk>/", console_views.request_detail, name="console-request"),
    path("console/requests/<int:pk>/approve/", console_views.request_approve, name="console-approve"),
    path("console/requests/<int:pk>/deny/", console_views.request_deny, name="console-deny"),
    path("console/grants/", console_views.grant_list, name="console-grants"),
    path("console/grants/<int:pk>/end/", console_views.grant_end, name="console-grant-end"),
    path("console/history/", console_views.history, name="console-history"),
    path("console/history/<str:key>/<int:pk>/", console_views.object_history, name="console-object-history"),
]
