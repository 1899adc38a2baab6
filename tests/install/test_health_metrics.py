"""/healthz, /readyz and /metrics (gpuplatform.health, gpuplatform.metrics), and the
counters the Celery signals and the watcher feed (core.metrics)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from jobs.lifecycle import State
from jobs.models import Job

from ..builders import make_job

pytestmark = pytest.mark.django_db

TOKEN = "metrics-test-token"


@pytest.fixture
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_healthz_answers_any_host_over_plain_http(settings):
    settings.SECURE_SSL_REDIRECT = True  # production: people are sent to HTTPS, probes are not
    response = Client(HTTP_HOST="10.1.2.3:8000").get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


def test_readyz_reports_database_and_broker_and_the_cluster_without_requiring_it(settings):
    settings.KUBECONFIG = "/nonexistent/kubeconfig"
    response = Client(HTTP_HOST="10.1.2.3").get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok", "cluster": "not configured",
                               "team_policy": "not configured"}


def test_readyz_reports_whether_the_team_admission_policy_is_this_versions_without_requiring_it(fake, monkeypatch):
    """The installer applies it (the chart); the platform only reads it and says how it stands."""
    import copy

    from gpuplatform import health
    from tenants.admission import POLICY_NAME, render_admission

    monkeypatch.setattr(health, "cluster_configured", lambda: True)  # imported by name there

    def team_policy():
        response = Client().get("/readyz")
        assert response.status_code == 200, response.json()
        return response.json()["team_policy"]

    assert team_policy() == (f"ValidatingAdmissionPolicy {POLICY_NAME} missing; ValidatingAdmissionPolicyBinding "
                             f"{POLICY_NAME} missing: install this version's chart (docs/install.md)")
    policy, binding = render_admission()
    served = copy.deepcopy(binding)
    served["spec"]["matchResources"].update({"objectSelector": {}, "matchPolicy": "Equivalent"})  # server defaults
    fake.apply([policy, served])
    assert team_policy() == "ok"
    older = copy.deepcopy(policy)
    older["spec"]["validations"] = older["spec"]["validations"][:-1]  # a rule this version added
    fake.apply([older])
    assert team_policy() == (f"ValidatingAdmissionPolicy {POLICY_NAME} differs from this version's: "
                             "install this version's chart (docs/install.md)")


def test_readyz_is_unavailable_when_the_broker_cannot_be_reached(monkeypatch):
    from kombu import Connection

    from gpuplatform import health

    monkeypatch.setattr(health.celery_app, "connection_for_write", lambda: Connection("redis://127.0.0.1:1/0"))
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["database"] == "ok"
    assert body["broker"].startswith("unreachable")


def test_metrics_are_not_served_without_a_token(settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404


def test_metrics_refuse_a_wrong_or_missing_token(metrics_token):
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def test_metrics_count_jobs_by_state_team_and_flavor(metrics_token, team, flavor):
    make_job(team, flavor, name="a")
    make_job(team, flavor, name="b")
    samples = scrape(Client(HTTP_HOST="10.0.0.9"))
    key = ("gpuplatform_jobs", (("flavor", flavor.name), ("state", "draft"), ("team", team.slug)))
    assert samples[key] == 2


def test_metrics_histogram_the_wait_from_submission_to_admission_and_start(metrics_token, team, flavor):
    now = timezone.now()
    for name, admitted_after, started_after in [("quick", 3, 10), ("slow", 400, None)]:
        job = make_job(team, flavor, name=name)
        Job.objects.filter(pk=job.pk).update(
            state=State.ADMITTED, submitted_at=now, admitted_at=now + timedelta(seconds=admitted_after),
            started_at=now + timedelta(seconds=started_after) if started_after else None)
    samples = scrape(Client())
    admission = "gpuplatform_job_admission_wait_seconds"
    assert samples[(f"{admission}_bucket", (("flavor", flavor.name), ("le", "5.0")))] == 1
    assert samples[(f"{admission}_bucket", (("flavor", flavor.name), ("le", "600.0")))] == 2
    assert samples[(f"{admission}_bucket", (("flavor", flavor.name), ("le", "+Inf")))] == 2
    assert samples[(f"{admission}_count", (("flavor", flavor.name),))] == 2
    assert samples[(f"{admission}_sum", (("flavor", flavor.name),))] == pytest.approx(403)
    assert samples[("gpuplatform_job_start_wait_seconds_count", (("flavor", flavor.name),))] == 1


def value(name, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_reconcile_tasks_count_runs_writes_and_duration(fake, team, settings):
    from tenants.tasks import reconcile_team

    settings.CELERY_TASK_ALWAYS_EAGER = True
    task = "tenants.tasks.reconcile_team"
    runs = value("gpuplatform_reconcile_runs_total", task=task, outcome="ok")
    writes = value("gpuplatform_reconcile_writes_total", task=task)
    durations = value("gpuplatform_reconcile_duration_seconds_count", task=task)
    reconcile_team.apply(args=(team.pk,))
    assert value("gpuplatform_reconcile_runs_total", task=task, outcome="ok") == runs + 1
    assert value("gpuplatform_reconcile_writes_total", task=task) > writes  # a new team: namespace, RBAC, ...
    assert value("gpuplatform_reconcile_duration_seconds_count", task=task) == durations + 1


def test_a_transient_error_counts_a_retry_and_a_reconcile_error(fake, team):
    from cluster import TransientError
    from tenants.tasks import reconcile_team

    task = "tenants.tasks.reconcile_team"
    retries = value("gpuplatform_celery_task_retries_total", task=task)
    errors = value("gpuplatform_reconcile_errors_total", task=task, error="TransientError")
    fake.fail_next("LIST", TransientError("the API server is restarting", status=503), times=100)
    reconcile_team.apply(args=(team.pk,), throw=False)
    assert value("gpuplatform_celery_task_retries_total", task=task) > retries
    assert value("gpuplatform_reconcile_errors_total", task=task, error="TransientError") > errors


def test_the_watcher_counts_job_updates_and_its_lag(fake, team, flavor):
    import threading

    from jobs.watch.watcher import StatusWatcher

    lag = value("gpuplatform_watcher_lag_seconds_count")
    watcher = StatusWatcher(fake, resync_seconds=3600, retry_seconds=0.05)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        job = make_job(team, flavor, name="w")
        fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "w-0", "namespace": team.namespace_name,
            "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}}})
        deadline = timezone.now() + timedelta(seconds=10)
        while value("gpuplatform_watcher_lag_seconds_count") == lag and timezone.now() < deadline:
            threading.Event().wait(0.05)
        assert value("gpuplatform_watcher_lag_seconds_count") > lag
    finally:
        watcher.stop()
        thread.join(10)
