"""System checks catch configuration mistakes, each with a stable id."""

import pytest
from django.conf import settings
from django.test import override_settings

from gpuplatform import checks
from gpuplatform.settings import DEV_SECRET_KEY

POSTGRES = "django.db.backends.postgresql"
SQLITE = "django.db.backends.sqlite3"


@pytest.fixture
def engine(monkeypatch):
    """Pretend the default database uses another engine, without reconnecting."""
    return lambda name: monkeypatch.setitem(settings.DATABASES["default"], "ENGINE", name)


def ids(messages):
    return [m.id for m in messages]


@override_settings(DEBUG=False, SECRET_KEY=DEV_SECRET_KEY)
def test_production_without_secret_key_is_an_error():
    assert ids(checks.secret_key_in_production()) == ["gpuplatform.E001"]


@override_settings(DEBUG=True, SECRET_KEY=DEV_SECRET_KEY)
def test_development_key_is_fine_while_debugging():
    assert checks.secret_key_in_production() == []


@override_settings(DEBUG=False, SECRET_KEY="a-real-secret-" * 4)
def test_production_with_secret_key_passes():
    assert checks.secret_key_in_production() == []


@override_settings(WEB_CONCURRENCY=4, CELERY_WORKER_CONCURRENCY=1)
def test_sqlite_with_several_web_workers_is_an_error(engine):
    engine(SQLITE)
    [error] = checks.sqlite_with_several_processes()
    assert error.id == "gpuplatform.E002"
    assert "WEB_CONCURRENCY=4" in error.msg


@override_settings(WEB_CONCURRENCY=1, CELERY_WORKER_CONCURRENCY=3)
def test_sqlite_with_several_celery_workers_is_an_error(engine):
    engine(SQLITE)
    assert ids(checks.sqlite_with_several_processes()) == ["gpuplatform.E002"]


@override_settings(WEB_CONCURRENCY=8, CELERY_WORKER_CONCURRENCY=8)
def test_postgres_with_many_workers_passes(engine):
    engine(POSTGRES)
    assert checks.sqlite_with_several_processes() == []


@override_settings(WEB_CONCURRENCY=1, CELERY_WORKER_CONCURRENCY=1)
def test_sqlite_with_one_process_each_passes(engine):
    engine(SQLITE)
    assert checks.sqlite_with_several_processes() == []


def test_missing_kubeconfig_file_is_a_warning(tmp_path):
    with override_settings(KUBECONFIG=tmp_path / "nope", KUBE_IN_CLUSTER=False):
        assert ids(checks.kubeconfig_exists()) == ["gpuplatform.W003"]
    present = tmp_path / "config"
    present.write_text("apiVersion: v1\n")
    with override_settings(KUBECONFIG=present, KUBE_IN_CLUSTER=False):
        assert checks.kubeconfig_exists() == []
    with override_settings(KUBECONFIG=None):
        assert checks.kubeconfig_exists() == []


@override_settings(DEBUG=False, CELERY_TASK_ALWAYS_EAGER=True)
def test_eager_celery_in_production_is_a_warning():
    assert ids(checks.celery_eager_in_production()) == ["gpuplatform.W004"]


def test_checks_are_registered_with_django():
    from django.core.checks import registry

    names = {check.__name__ for check in registry.registry.registered_checks}
    assert {"secret_key_in_production", "sqlite_with_several_processes", "kubeconfig_exists",
            "celery_eager_in_production"} <= names


@pytest.mark.django_db
def test_models_and_migrations_agree(capsys):
    """No model change is missing its migration (and set-ordered conditions stay stable)."""
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", "tenants", "quotas", "jobs", verbosity=1)
    assert "No changes detected" in capsys.readouterr().out
