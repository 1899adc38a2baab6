"""Django settings, read from environment variables (see ``.env.example``).

Every value goes through a typed helper in ``gpuplatform.env`` so a bad value stops the
process with a message naming the variable. Semantic mistakes (production without a
secret key, SQLite behind several workers) are system checks in ``gpuplatform.checks``.
"""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from cluster.names import is_dns1123_label

from .env import (
    database_config,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_path,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

# Used only while DEBUG is on and SECRET_KEY is unset; check gpuplatform.E001 refuses it
# in production.
DEV_SECRET_KEY = "django-insecure-gpuplatform-development-only"

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY") or DEV_SECRET_KEY
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "simple_history",
    "gpuplatform",
    "tenants",
    "quotas",
    "jobs",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Records who made each change in the audit trail (django-simple-history).
    "simple_history.middleware.HistoryRequestMiddleware",
]

ROOT_URLCONF = "gpuplatform.urls"
WSGI_APPLICATION = "gpuplatform.wsgi.application"
ASGI_APPLICATION = "gpuplatform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_config("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gpuplatform.sqlite3'}")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env_path("STATIC_ROOT", str(VAR_DIR / "static"))
STATICFILES_DIRS = [BASE_DIR / "static"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

MAILERS = {"default": {"BACKEND": env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")}}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpuplatform@localhost")
# Team owners get one email this many days before a quota grant ends.
GRANT_EXPIRY_WARNING_DAYS = env_int("GRANT_EXPIRY_WARNING_DAYS", 7, minimum=1)

# --- Processes ---------------------------------------------------------------------------
# How many web and worker processes share the database; SQLite cannot take several writers.
WEB_CONCURRENCY = env_int("WEB_CONCURRENCY", 1, minimum=1)

# --- Redis and Celery --------------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss"))
CELERY_BROKER_URL = env_url(
    "CELERY_BROKER_URL", REDIS_URL, schemes=("redis", "rediss", "memory", "filesystem")
)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 1, minimum=1)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A message taken by a worker that dies (even by SIGKILL) goes back to the queue after this
# long; it must exceed the longest retry countdown (retry_backoff_max, 300 s).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 900, minimum=1)}
# The drift-correcting sweep (Celery beat); see gpuplatform/tasks.py. As low as 2 s so the
# soak (make soak) can compress a day of five-minute sweeps into minutes.
SWEEP_INTERVAL_SECONDS = env_int("SWEEP_INTERVAL_SECONDS", 300, minimum=2)
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "gpuplatform.tasks.sweep", "schedule": SWEEP_INTERVAL_SECONDS},
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded fallback for machines without Redis: a spool folder under var/.
    _spool = VAR_DIR / "celery-spool"
    _spool.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(data_folder_in=str(_spool), data_folder_out=str(_spool))

# --- Kubernetes --------------------------------------------------------------------------
KUBECONFIG = env_path("KUBECONFIG")
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
KUBE_FIELD_MANAGER = env_str("KUBE_FIELD_MANAGER", "gpuplatform")
TEAM_NAMESPACE_PREFIX = env_str("TEAM_NAMESPACE_PREFIX", "team-")
PLATFORM_NAMESPACE = env_str("PLATFORM_NAMESPACE", "gpuplatform-system")
# Pod Security Admission level enforced on team namespaces.
POD_SECURITY_LEVEL = env_choice(
    "POD_SECURITY_LEVEL", "restricted", ("restricted", "baseline", "privileged")
)

if TEAM_NAMESPACE_PREFIX and not is_dns1123_label(TEAM_NAMESPACE_PREFIX + "x"):
    raise ImproperlyConfigured(
        f"TEAM_NAMESPACE_PREFIX={TEAM_NAMESPACE_PREFIX!r} must be lowercase letters, digits "
        "and '-', starting with a letter."
    )
if not is_dns1123_label(PLATFORM_NAMESPACE):
    raise ImproperlyConfigured(f"PLATFORM_NAMESPACE={PLATFORM_NAMESPACE!r} is not a DNS-1123 label.")

# --- REST framework ----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Bearer tokens first, so a request without credentials gets 401 (not 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "tenants.auth.TokenScope",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["tenants.auth.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": env_str("API_THROTTLE_RATE", "600/minute")},
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Platform API",
    "VERSION": "1",
    "DESCRIPTION": "Teams, GPU flavors, jobs and quota requests for CI pipelines. See docs/api.md.",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api_errors.add_error_responses",
    ],
    "ENUM_NAME_OVERRIDES": {"JobState": "jobs.lifecycle.State"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
}
