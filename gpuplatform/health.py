"""Health and metrics endpoints for the orchestrator and Prometheus.

- ``/healthz``: the process lives and answers (liveness; touches nothing else).
- ``/readyz``: the database and the Celery broker can be reached (readiness: 503 if not);
  the cluster is reported but not required, since the platform's pages and API work
  without it and the sweep catches up once it is back. So is the admission policy that
  guards team namespaces (``team_policy``): the installer's to apply, never the platform's
  (``tenants.admission``), so a missing one, or one of another version, is only reported here.
- ``/metrics``: Prometheus text format, only with ``Authorization: Bearer $METRICS_TOKEN``
  (404 while METRICS_TOKEN is unset): job counts and waiting times read from the database
  plus this process's counters (``gpuplatform.metrics``).

A middleware at the head of the stack answers these paths itself: kubelet and Prometheus
reach pods by IP over plain HTTP, which ALLOWED_HOSTS and the HTTPS redirect (right for
people) would refuse. The answers name no host and carry nothing a visitor could use.
"""

from __future__ import annotations

import hmac
import threading

from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse

from cluster import ClusterError, NotFound
from core.reconcile import NoCluster, cluster_configured, current_cluster
from tenants import admission

from .celery import app as celery_app

CHECK_TIMEOUT_SECONDS = 2.0


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as err:  # noqa: BLE001 - any failure means "not ready", with its reason
        return f"unreachable: {err.__class__.__name__}"


def _broker() -> str:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=CHECK_TIMEOUT_SECONDS)
        return "ok"
    except Exception as err:  # noqa: BLE001
        return f"unreachable: {err.__class__.__name__}"


def _reason(err: Exception) -> str:
    return str(getattr(err, "status", None) or err.__class__.__name__)


def _team_policy(cluster) -> str:
    installed = {}
    for obj in admission.render_admission():
        try:
            installed[obj["kind"]] = cluster.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
        except NotFound:
            installed[obj["kind"]] = None
    return admission.drift(installed)


def _cluster() -> dict[str, str]:
    if not cluster_configured():
        return {"cluster": "not configured", "team_policy": "not configured"}
    result = {"cluster": "timeout", "team_policy": "timeout"}

    def probe():
        try:
            cluster = current_cluster()
            try:
                cluster.get("v1", "Namespace", settings.PLATFORM_NAMESPACE)
            except NotFound:
                pass  # reached; the namespace is only a cheap thing to ask for
            result["cluster"] = "ok"
        except (ClusterError, NoCluster) as err:
            result["cluster"] = result["team_policy"] = f"unreachable: {_reason(err)}"
            return
        try:
            result["team_policy"] = _team_policy(cluster)
        except ClusterError as err:
            result["team_policy"] = f"unknown: {_reason(err)}"

    thread = threading.Thread(target=probe, daemon=True, name="readyz-cluster")
    thread.start()
    thread.join(CHECK_TIMEOUT_SECONDS)
    return dict(result)


def healthz(request) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


def readyz(request) -> JsonResponse:
    checks = {"database": _database(), "broker": _broker()}
    ready = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if ready else "unavailable", **checks, **_cluster()}
    return JsonResponse(body, status=200 if ready else 503)


def metrics(request) -> HttpResponse:
    from . import metrics as exposition

    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse("Not found\n", status=404, content_type="text/plain")
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        response = HttpResponse("Unauthorized\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = exposition.web_exposition()
    return HttpResponse(body, content_type=content_type)


ENDPOINTS = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


class HealthMiddleware:
    """Answers ``ENDPOINTS`` (GET/HEAD) before host validation and the HTTPS redirect."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        view = ENDPOINTS.get(request.path_info)
        if view is not None and request.method in ("GET", "HEAD"):
            return view(request)
        return self.get_response(request)
