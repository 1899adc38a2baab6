"""Top-level URL configuration."""

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

admin.site.site_header = "GPU Platform console"
admin.site.site_title = "GPU Platform"
admin.site.index_title = "Teams, quotas and workloads"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
]
