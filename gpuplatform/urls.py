"""Top-level URL configuration."""

from django.contrib import admin
from django.urls import include, path, re_path

from gpuplatform.agents.endpoint import mcp

admin.site.site_header = "GPU Platform console"
admin.site.site_title = "GPU Platform"
admin.site.index_title = "Teams, quotas and workloads"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("gpuplatform.api_urls")),
    # The read-only MCP server for agents (docs/mcp.md), with the API's tokens.
    re_path(r"^mcp/?$", mcp, name="mcp"),
    path("", include("gpuplatform.web_urls")),
]
