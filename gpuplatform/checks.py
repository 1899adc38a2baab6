"""System checks for configuration mistakes, with stable ids (``gpuplatform.E001`` ...)."""

from django.conf import settings
from django.core.checks import Error, Warning, register

SQLITE_ENGINE = "django.db.backends.sqlite3"


@register()
def secret_key_in_production(app_configs=None, **kwargs):
    if settings.DEBUG or settings.SECRET_KEY != settings.DEV_SECRET_KEY:
        return []
    return [
        Error(
            "SECRET_KEY is not set while DEBUG is off.",
            hint="Set SECRET_KEY to a long random value (python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))').",
            id="gpuplatform.E001",
        )
    ]


@register()
def sqlite_with_several_processes(app_configs=None, **kwargs):
    if settings.DATABASES["default"]["ENGINE"] != SQLITE_ENGINE:
        return []
    problems = []
    if settings.WEB_CONCURRENCY > 1:
        problems.append(f"WEB_CONCURRENCY={settings.WEB_CONCURRENCY}")
    if settings.CELERY_WORKER_CONCURRENCY > 1:
        problems.append(f"CELERY_WORKER_CONCURRENCY={settings.CELERY_WORKER_CONCURRENCY}")
    if not problems:
        return []
    return [
        Error(
            f"SQLite cannot serve several writers ({', '.join(problems)}).",
            hint="Use PostgreSQL (DATABASE_URL=postgres://...) or run one process of each.",
            id="gpuplatform.E002",
        )
    ]


@register()
def kubeconfig_exists(app_configs=None, **kwargs):
    path = settings.KUBECONFIG
    if path is None or path.exists() or settings.KUBE_IN_CLUSTER:
        return []
    return [
        Warning(
            f"KUBECONFIG points at {path}, which does not exist.",
            hint="Start the local cluster (make cluster-up) or fix the path; until then "
            "nothing is applied to a cluster.",
            id="gpuplatform.W003",
        )
    ]


@register()
def celery_eager_in_production(app_configs=None, **kwargs):
    if settings.DEBUG or not settings.CELERY_TASK_ALWAYS_EAGER:
        return []
    return [
        Warning(
            "CELERY_TASK_ALWAYS_EAGER is on while DEBUG is off: web requests will run "
            "cluster work inline.",
            hint="Run a Celery worker with a Redis broker in production.",
            id="gpuplatform.W004",
        )
    ]
