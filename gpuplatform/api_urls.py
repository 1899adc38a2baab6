"""REST API routes (``/api/``): the v1 API, its OpenAPI schema and docs.

Unknown paths under ``/api/`` answer 404 in the API's error shape, not with an HTML page.
"""

from django.urls import include, path, re_path
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from accounts.api import GroupMappingViewSet, TeamAccessView
from console.api import DrainViewSet, MemberCapViewSet, TeamViewSet, VolumeViewSet
from core.api_errors import RefuseNulMixin, not_found
from jobs.api.views import JobViewSet
from notifications.api import PreferenceViewSet, WebhookViewSet
from quotas.api import FlavorViewSet, QuotaGrantViewSet, QuotaRequestViewSet, TrainingRuntimeViewSet
from tenants.api import TokenViewSet, WhoAmIView

router = SimpleRouter(trailing_slash=False)
router.register("teams", TeamViewSet, basename="team")
router.register("flavors", FlavorViewSet, basename="flavor")
router.register("training-runtimes", TrainingRuntimeViewSet, basename="training-runtime")
router.register("jobs", JobViewSet, basename="job")
router.register("tokens", TokenViewSet, basename="token")
router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
router.register("quota-grants", QuotaGrantViewSet, basename="quota-grant")
router.register("notification-preferences", PreferenceViewSet, basename="notification-preference")
router.register("webhooks", WebhookViewSet, basename="webhook")
router.register("group-mappings", GroupMappingViewSet, basename="group-mapping")
router.register("member-caps", MemberCapViewSet, basename="member-cap")
router.register("drains", DrainViewSet, basename="drain")
router.register("volumes", VolumeViewSet, basename="volume")



class Ping(RefuseNulMixin, APIView):
    """Liveness of the API process: no credentials, no database. Also the framework floor
    that ``make bench-api`` compares the real endpoints with."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    @extend_schema(responses={200: inline_serializer("Ping", fields={"ok": serializers.BooleanField()})})
    def get(self, request):
        return Response({"ok": True})


urlpatterns = [
    path("v1/ping", Ping.as_view(), name="api-ping"),
    path("v1/me", WhoAmIView.as_view(), name="api-me"),
    path("v1/teams/<slug:slug>/access", TeamAccessView.as_view(), name="api-team-access"),
    path("v1/", include((router.urls, "api"), namespace="api")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI from vendored static files, its start-up script a file of its own (?script)
    # rather than inline, so the docs page keeps the site's Content-Security-Policy.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html"),
         name="api-docs"),
    re_path(r"^", not_found),
]
