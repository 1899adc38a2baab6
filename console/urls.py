"""Browser routes of the cross-app pages: teams, quotas, usage, the managers' console."""

from django.urls import path

from . import manager_views, storage_views, usage_views, views

app_name = "console"
urlpatterns = [
    path("teams/<slug:slug>/", views.team_detail, name="team"),
    path("teams/<slug:slug>/members/", views.member_add, name="member-add"),
    path("teams/<slug:slug>/members/<int:pk>/remove/", views.member_remove, name="member-remove"),
    path("teams/<slug:slug>/caps/", views.cap_set, name="cap-set"),
    path("teams/<slug:slug>/caps/<int:pk>/remove/", views.cap_remove, name="cap-remove"),
    path("teams/<slug:slug>/volumes/", storage_views.volume_create, name="volume-create"),
    path("teams/<slug:slug>/volumes/<int:pk>/delete/", storage_views.volume_delete, name="volume-delete"),
    path("teams/<slug:slug>/grants/<int:pk>/", views.grant_detail, name="grant"),
    path("teams/<slug:slug>/grants/<int:pk>/renew/", views.grant_renew, name="grant-renew"),
    path("quotas/", views.quota_list, name="quotas"),
    # Quota requests from a team page (owners), GPU-hour accounting (everyone, scoped).
    path("quotas/requests/<slug:slug>/new/", views.request_create, name="request-create"),
    path("quotas/usage/", usage_views.usage, name="usage"),
    path("quotas/usage.csv", usage_views.usage_csv, name="usage-csv"),
    # The quota managers' console.
    path("quotas/console/", manager_views.capacity_page, name="capacity"),
    path("quotas/console/requests/", manager_views.request_list, name="requests"),
    path("quotas/console/requests/<int:pk>/", manager_views.request_detail, name="request"),
    path("quotas/console/requests/<int:pk>/approve/", manager_views.request_approve, name="approve"),
    path("quotas/console/requests/<int:pk>/deny/", manager_views.request_deny, name="deny"),
    path("quotas/console/grants/", manager_views.grant_list, name="grants"),
    path("quotas/console/grants/<int:pk>/end/", manager_views.grant_end, name="grant-end"),
    path("quotas/console/drains/", manager_views.drain_list, name="drains"),
    path("quotas/console/drains/<int:pk>/", manager_views.drain_detail, name="drain"),
    path("quotas/console/drains/<int:pk>/end/", manager_views.drain_end, name="drain-end"),
    path("quotas/console/history/", manager_views.history, name="history"),
    path("quotas/console/eta/", manager_views.eta_accuracy, name="eta-accuracy"),
    path("quotas/console/history/<str:key>/<int:pk>/", manager_views.object_history, name="object-history"),
]
