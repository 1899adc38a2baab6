"""Top-level URL configuration."""

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "GPU Platform console"
admin.site.site_title = "GPU Platform"
admin.site.index_title = "Teams, quotas and workloads"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("gpuplatform.api_urls")),
    path("", include("gpuplatform.web_urls")),
]
