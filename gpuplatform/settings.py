"""Django settings, read from environment variables (see ``.env.example``).

Every value goes through a typed helper in ``gpuplatform.env`` so a bad value stops the
process with a message naming the variable. Semantic mistakes (production without a
secret key, SQLite behind several workers) are system checks in ``gpuplatform.checks``.
"""

from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from cluster.names import is_dns1123_label

from .env import (
    database_config,
    env_bool,
    env_choice,
    env_header_pair,
    env_int,
    env_list,
    env_path,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

# Used only while DEBUG is on and SECRET_KEY is unset.
DEV_SECRET_KEY = "django-insecure-gpuplatform-development-only"

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY") or DEV_SECRET_KEY
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    # Refused here, at import, and not only by a system check: gunicorn and Celery load
    # the settings without running checks, and would sign sessions with a public key.
    raise ImproperlyConfigured(
        "SECRET_KEY is not set while DEBUG is off. Set SECRET_KEY to a long random value "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))'), or DEBUG=true on a "
        "development machine."
    )
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# --- HTTPS and the proxy in front ----------------------------------------------------------
# With DEBUG off the defaults assume one TLS-terminating reverse proxy that sets
# X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-For; without such a proxy, turn the
# three proxy settings off (they would let clients claim HTTPS, a host or an address).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
# A signed-in session ends after this long without a request, and this long after its
# sign-in whatever its activity (accounts.sessions); the cookie and the stored row expire then.
SESSION_IDLE_TIMEOUT_MINUTES = env_int("SESSION_IDLE_TIMEOUT_MINUTES", 120, minimum=1)
SESSION_MAX_AGE_HOURS = env_int("SESSION_MAX_AGE_HOURS", 12, minimum=1)
SESSION_COOKIE_AGE = SESSION_MAX_AGE_HOURS * 3600
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_PROXY_SSL_HEADER = env_header_pair(
    "SECURE_PROXY_SSL_HEADER", "" if DEBUG else "X-Forwarded-Proto: https"
)
USE_X_FORWARDED_HOST = env_bool("USE_X_FORWARDED_HOST", not DEBUG)
# How many proxies append to X-Forwarded-For: the client's address is the entry that many
# from the end (0: REMOTE_ADDR). Login lockouts and API throttling both count by it.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0 if DEBUG else 1, minimum=0)

# Content-Security-Policy (Django's own middleware): only this site's scripts, styles and
# images; no inline script or style anywhere, so templates keep their JS in static/js/.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

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
    "drf_spectacular_sidecar",
    "simple_history",
    "axes",
    "gpuplatform",
    "tenants",
    "quotas",
    "jobs",
    "console",
    "notifications",
    "accounts",
]

MIDDLEWARE = [
    # /healthz, /readyz and /metrics for kubelet and Prometheus, before host checks and the
    # HTTPS redirect (gpuplatform/health.py says why).
    "gpuplatform.health.HealthMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files from STATIC_ROOT (collected into the image), compressed and cached.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Sessions end after SESSION_IDLE_TIMEOUT_MINUTES idle or SESSION_MAX_AGE_HOURS in all,
    # and SSO sessions are re-checked at the IdP every OIDC_SESSION_RECHECK_MINUTES.
    "accounts.sessions.SessionLifetimeMiddleware",
    "accounts.sessions.SsoSessionRefresh",
    # Records who made each change in the audit trail (django-simple-history).
    "simple_history.middleware.HistoryRequestMiddleware",
    # Answers a locked-out login with the lockout page (django-axes); keep it last.
    "axes.middleware.AxesMiddleware",
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
# Keep each thread's connection between requests (a new PostgreSQL connection costs more
# than a whole API request), checked before reuse after an error or a server restart.
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# PostgreSQL plans a statement every time it is sent as text; most of the platform's
# statements are the same few dozen with other values. With server-side binding, psycopg
# prepares a statement a connection sends for the fifth time, and PostgreSQL plans it once
# for good (planning was three quarters of its time in `make bench-e2e`). Off behind a
# pooler that cannot keep prepared statements (PgBouncer before 1.21 in transaction mode).
DATABASE_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_PREPARED_STATEMENTS:
    # Django leaves psycopg's automatic preparation off (prepare_threshold None) unless asked.
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# Single sign-on (docs/sso.md): the OIDC_*, LOCAL_LOGIN_ENABLED and CLUSTER_OIDC_* settings.
from .sso_settings import *  # noqa: E402,F401,F403
from .sso_settings import SSO_AUTHENTICATION_BACKENDS, SSO_FORM_ACTION  # noqa: E402

SECURE_CSP["form-action"] = [*SECURE_CSP["form-action"], *SSO_FORM_ACTION]  # logout at the IdP

# --- Login lockout (django-axes, accounts.lockout) ----------------------------------------
# Password logins (/login/ and /admin/login/) go through AxesStandaloneBackend first: after
# LOGIN_FAILURE_LIMIT failures from one address (any user names), that address is refused
# (even the right password) until LOGIN_LOCKOUT_MINUTES pass without another try; after
# LOGIN_USERNAME_FAILURE_LIMIT failures for one user name from all addresses together, the
# name is locked too, and the right password with a one-time code from
# `manage.py login_unlock_code NAME` clears it. So nobody locks an account (the break-glass
# superuser included) from their own address. Attempts are rows in the database, so every
# web process sees them; an admin also unlocks with "Access attempts" in the admin or
# `manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS`. API tokens do not log in
# and are not counted.
# LocalBackend is Django's ModelBackend that, with LOCAL_LOGIN_ENABLED off, takes only
# superusers' passwords (the break-glass path); the OIDC backend when OIDC_ISSUER is set.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "accounts.backends.LocalBackend",
    *SSO_AUTHENTICATION_BACKENDS,
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
LOGIN_USERNAME_FAILURE_LIMIT = env_int("LOGIN_USERNAME_FAILURE_LIMIT", 50, minimum=1)
LOGIN_UNLOCK_CODE_MINUTES = env_int("LOGIN_UNLOCK_CODE_MINUTES", 15, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_HANDLER = "accounts.lockout.LockoutHandler"
# What a successful login resets: its address's attempts and its user name's.
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "gpuplatform.client_ip.client_ip"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env_path("STATIC_ROOT", str(VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise serves from it (empty until collectstatic)
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic also writes gzip and brotli copies, which whitenoise serves; names are not
# hashed, so pages render the same whether or not collectstatic ran (tests, make demo).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Email, under Django's own setting names (EMAIL_HOST, ...) read from the environment and
# handed to the one mailer; host, port and credentials matter only to the SMTP backend.
EMAIL_BACKEND_PATH = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
_SMTP_OPTIONS = {
    "host": env_str("EMAIL_HOST", "localhost"),
    "port": env_int("EMAIL_PORT", 25, minimum=1),
    "username": env_str("EMAIL_HOST_USER"),
    "password": env_str("EMAIL_HOST_PASSWORD"),
    "use_tls": env_bool("EMAIL_USE_TLS", False),
    "timeout": env_int("EMAIL_TIMEOUT", 20, minimum=1),
}
MAILERS = {"default": {
    "BACKEND": EMAIL_BACKEND_PATH,
    "OPTIONS": _SMTP_OPTIONS if EMAIL_BACKEND_PATH.endswith("smtp.EmailBackend") else {},
}}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpuplatform@localhost")
# Where people reach the platform: the absolute links in emails and webhook bodies.
PUBLIC_URL = env_url("PUBLIC_URL", "http://localhost:8000", schemes=("http", "https")).rstrip("/")
# Notifications (notifications/): a job waiting longer than this is worth a word; after
# one email, further ones within the digest window are sent together as one digest.
NOTIFY_WAITING_AFTER_MINUTES = env_int("NOTIFY_WAITING_AFTER_MINUTES", 60, minimum=1)
NOTIFY_DIGEST_SECONDS = env_int("NOTIFY_DIGEST_SECONDS", 60, minimum=1)
# Team webhooks never reach loopback, link-local, private or other non-public addresses
# unless listed here (CIDRs, comma-separated), checked when saved and again at each send.
WEBHOOK_ALLOWED_NETWORKS = env_list("WEBHOOK_ALLOWED_NETWORKS", [])
# One attempt, from resolving the host to the answer's last byte, is cut at this deadline
# (a receiver trickling its answer included).
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
# Attempts per minute, per webhook and per team (more wait for the next minute), and test
# events and resends by hand per hour, per webhook and per team (more are refused).
WEBHOOK_SENDS_PER_MINUTE = env_int("WEBHOOK_SENDS_PER_MINUTE", 60, minimum=1)
WEBHOOK_TEAM_SENDS_PER_MINUTE = env_int("WEBHOOK_TEAM_SENDS_PER_MINUTE", 120, minimum=1)
WEBHOOK_PINGS_PER_HOUR = env_int("WEBHOOK_PINGS_PER_HOUR", 10, minimum=1)
WEBHOOK_TEAM_PINGS_PER_HOUR = env_int("WEBHOOK_TEAM_PINGS_PER_HOUR", 30, minimum=1)
# A webhook's secret rotated "keeping the old one" signs beside the new one this long.
WEBHOOK_SECRET_GRACE_HOURS = env_int("WEBHOOK_SECRET_GRACE_HOURS", 24, minimum=1)
# Four eyes: a quota manager who was in a team (any role) this many days before a request
# was filed, or since, does not decide it; nor grants it GPUs or sets its quota in the admin
# if she was in it within this many days. Read from the memberships' audit trail.
FOUR_EYES_LOOKBACK_DAYS = env_int("FOUR_EYES_LOOKBACK_DAYS", 30, minimum=0)
# Team owners get one email this many days before a quota grant ends.
GRANT_EXPIRY_WARNING_DAYS = env_int("GRANT_EXPIRY_WARNING_DAYS", 7, minimum=1)
# The unit flavor prices (cost_per_gpu_hour) are in, written after every cost: EUR, USD, credits.
COST_CURRENCY = env_str("COST_CURRENCY", "EUR")

# --- What one tenant may hold (issue 29, finding 12) -------------------------------------
# Live (unrevoked, unexpired) API tokens per person, live (not finished) jobs per team, and
# webhooks per team; one more is refused with an error, in the pages and the API alike.
MAX_API_TOKENS_PER_USER = env_int("MAX_API_TOKENS_PER_USER", 50, minimum=1)
MAX_LIVE_JOBS_PER_TEAM = env_int("MAX_LIVE_JOBS_PER_TEAM", 1000, minimum=1)
MAX_WEBHOOKS_PER_TEAM = env_int("MAX_WEBHOOKS_PER_TEAM", 20, minimum=1)
# The preemption contract (docs/preemption.md): the checkpoint grace of a training job
# without a priority class (every Volcano job); a class sets its own.
CHECKPOINT_GRACE_SECONDS = env_int("CHECKPOINT_GRACE_SECONDS", 30, minimum=0)

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
# A reconcile spends its time waiting on the API server (and the admission webhooks behind
# it), not computing: threads keep CELERY_WORKER_CONCURRENCY of them in flight in one
# process, over one client and one watch cache. "prefork" gives each a process (and a cache).
CELERY_WORKER_POOL = env_choice("CELERY_WORKER_POOL", "threads", ("threads", "prefork", "solo"))
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Webhook sends wait on receivers a team owner chose: they have a queue and a worker of
# their own (the chart's ...-webhooks Deployment, a second worker in make demo), so a slow
# receiver never holds up a reconcile. Everything else is on the default queue, "celery".
WEBHOOK_QUEUE = "webhooks"
CELERY_TASK_ROUTES = {"notifications.tasks.deliver_webhook": {"queue": WEBHOOK_QUEUE}}
# Celery's Django fixup closes every database connection before and after each task unless
# this is set: a new PostgreSQL backend for every reconcile, and its prepared statements
# thrown away. With it (never reached), gpuplatform.celery keeps connections as a web
# request does: reused across tasks, closed when older than CONN_MAX_AGE or broken.
CELERY_DB_REUSE_MAX = 2**62
# A message taken by a worker that dies (even by SIGKILL) goes back to the queue after this
# long; it must exceed the longest retry countdown (retry_backoff_max, 300 s).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 900, minimum=1)}
# The drift-correcting sweep (Celery beat); see gpuplatform/tasks.py. As low as 2 s so the
# soak (make soak) can compress a day of five-minute sweeps into minutes.
SWEEP_INTERVAL_SECONDS = env_int("SWEEP_INTERVAL_SECONDS", 300, minimum=2)
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "gpuplatform.tasks.sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    # IdP memberships not renewed by a sign-in within OIDC_MEMBERSHIP_TTL_HOURS end (docs/sso.md).
    "expire-idp-access": {"task": "tenants.tasks.expire_idp_access", "schedule": 60},
}
# Used and idle GPU-hours (jobs/use/gpu_use.py): how often the GPUs of jobs holding them are
# sampled from Prometheus (each sample looks back twice this long); without PROMETHEUS_URL
# the task returns at once.
GPU_USE_SAMPLE_SECONDS = env_int("GPU_USE_SAMPLE_SECONDS", 60, minimum=2)
CELERY_BEAT_SCHEDULE["gpu-use"] = {"task": "jobs.tasks.record_gpu_use", "schedule": GPU_USE_SAMPLE_SECONDS}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded fallback for machines without Redis: a spool folder under var/, with
    # kombu's exchange tables (control_folder, else ./control) inside it too.
    _spool = VAR_DIR / "celery-spool"
    _spool.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        data_folder_in=str(_spool), data_folder_out=str(_spool), control_folder=str(_spool / "control")
    )

# --- Cache ---------------------------------------------------------------------------------
# Shared by every process (the API throttle counts here): Redis when REDIS_URL is set, else
# files under var/cache, which the processes of one machine (make demo) share.
if env_str("REDIS_URL"):
    CACHES = {"default": {"BACKEND": "core.redis_cache.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")}}

# --- Kubernetes --------------------------------------------------------------------------
KUBECONFIG = env_path("KUBECONFIG")
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
KUBE_FIELD_MANAGER = env_str("KUBE_FIELD_MANAGER", "gpuplatform")
# Reconciles read what we own from a watch cache in the worker (cluster/cache.py).
KUBE_WATCH_CACHE = env_bool("KUBE_WATCH_CACHE", True)
TEAM_NAMESPACE_PREFIX = env_str("TEAM_NAMESPACE_PREFIX", "team-")
PLATFORM_NAMESPACE = env_str("PLATFORM_NAMESPACE", "gpuplatform-system")
# The web pods' own ServiceAccount in PLATFORM_NAMESPACE (the chart sets it): each team
# namespace gets a Role and RoleBinding letting it read pods, logs and Deployments there,
# and nothing else. Empty: none (the web uses the platform's identity, as on a laptop).
WEB_SERVICE_ACCOUNT = env_str("WEB_SERVICE_ACCOUNT", "")
# Pod Security Admission level enforced on team namespaces.
POD_SECURITY_LEVEL = env_choice(
    "POD_SECURITY_LEVEL", "restricted", ("restricted", "baseline", "privileged")
)
# The status watcher: with leader election (the Helm chart runs two), only the holder of
# the Lease PLATFORM_NAMESPACE/gpuplatform-watcher watches; a crashed holder's Lease runs out
# after WATCHER_LEASE_SECONDS, a stopped one hands it over at once.
WATCHER_LEADER_ELECTION = env_bool("WATCHER_LEADER_ELECTION", False)
WATCHER_LEASE_SECONDS = env_int("WATCHER_LEASE_SECONDS", 15, minimum=3)

# --- Health and metrics (gpuplatform/health.py, gpuplatform/metrics.py) --------------------
# /healthz and /readyz are open (they say nothing but "ok" and what is unreachable).
# /metrics answers only a request with "Authorization: Bearer $METRICS_TOKEN" (404 while
# unset); the worker and the watcher serve theirs on METRICS_PORT (0: off), a port the
# Helm chart's NetworkPolicy opens to the monitoring namespace only.
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_PORT = env_int("METRICS_PORT", 0, minimum=0)

# --- Idle-GPU reclaim (jobs/use/idle.py, jobs/use/reclaim.py, docs/idle.md) --------------------------
# The default policy (a flavor's, a team's may change it): a running job whose GPUs all stay
# below the threshold for IDLE_GPU_AFTER_SECONDS is warned, and reclaimed IDLE_GPU_GRACE_SECONDS
# later unless busy again. All three unset: off. Windows of IDLE_GPU_WINDOW_SECONDS (longer
# than the scrape interval); the sweep runs every IDLE_GPU_SWEEP_SECONDS.
def _optional_int(name: str, minimum: int) -> int | None:
    return env_int(name, 0, minimum=minimum) if env_str(name) else None


IDLE_GPU_THRESHOLD_PERCENT = _optional_int("IDLE_GPU_THRESHOLD_PERCENT", 1)
IDLE_GPU_AFTER_SECONDS = _optional_int("IDLE_GPU_AFTER_SECONDS", 10)
IDLE_GPU_GRACE_SECONDS = _optional_int("IDLE_GPU_GRACE_SECONDS", 0)
if len({v is None for v in (IDLE_GPU_THRESHOLD_PERCENT, IDLE_GPU_AFTER_SECONDS, IDLE_GPU_GRACE_SECONDS)}) > 1:
    raise ImproperlyConfigured(
        "Set IDLE_GPU_THRESHOLD_PERCENT, IDLE_GPU_AFTER_SECONDS and IDLE_GPU_GRACE_SECONDS together, or none.")
if IDLE_GPU_THRESHOLD_PERCENT is not None and IDLE_GPU_THRESHOLD_PERCENT > 100:
    raise ImproperlyConfigured(f"IDLE_GPU_THRESHOLD_PERCENT={IDLE_GPU_THRESHOLD_PERCENT} is above 100.")
IDLE_GPU_OWNERS_MAY_EXEMPT = env_bool("IDLE_GPU_OWNERS_MAY_EXEMPT", True)
IDLE_GPU_WINDOW_SECONDS = env_int("IDLE_GPU_WINDOW_SECONDS", 30, minimum=5)
IDLE_GPU_SWEEP_SECONDS = env_int("IDLE_GPU_SWEEP_SECONDS", IDLE_GPU_WINDOW_SECONDS, minimum=2)
CELERY_BEAT_SCHEDULE["idle-gpus"] = {"task": "jobs.use.reclaim.sweep_idle", "schedule": IDLE_GPU_SWEEP_SECONDS}

# --- GPU metrics (cluster/prometheus.py, docs/telemetry.md) --------------------------------
# The Prometheus that scrapes the GPUs (NVIDIA's dcgm-exporter); unset: no GPU telemetry,
# and pages say so. A bearer token, or a username and password (basic auth), or neither;
# a CA bundle for an https server with a private CA. Every query waits at most the timeout.
PROMETHEUS_URL = env_url("PROMETHEUS_URL", "", schemes=("http", "https")) if env_str("PROMETHEUS_URL") else ""
PROMETHEUS_TOKEN = env_str("PROMETHEUS_TOKEN")
PROMETHEUS_USERNAME = env_str("PROMETHEUS_USERNAME")
PROMETHEUS_PASSWORD = env_str("PROMETHEUS_PASSWORD")
PROMETHEUS_CA_FILE = env_path("PROMETHEUS_CA_FILE")
PROMETHEUS_TIMEOUT_SECONDS = env_int("PROMETHEUS_TIMEOUT_SECONDS", 2, minimum=1)
if PROMETHEUS_TOKEN and PROMETHEUS_USERNAME:
    raise ImproperlyConfigured("Set PROMETHEUS_TOKEN or PROMETHEUS_USERNAME/PROMETHEUS_PASSWORD, not both.")
if bool(PROMETHEUS_USERNAME) != bool(PROMETHEUS_PASSWORD):
    raise ImproperlyConfigured("PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD go together (basic auth).")

# --- Inference autoscaling on GPU utilization (KEDA; jobs/autoscaling.py, docs/telemetry.md) --
# The Prometheus KEDA's operator asks, as it reaches it (an in-cluster Service address);
# empty: PROMETHEUS_URL. With credentials, the name of a ClusterTriggerAuthentication the
# cluster's operators made for it and the authModes it serves (bearer, basic, tls...): the
# platform never holds KEDA's secrets. How often KEDA asks, and how long the HPA it makes
# waits before scaling down.
KEDA_PROMETHEUS_URL = (env_url("KEDA_PROMETHEUS_URL", "", schemes=("http", "https"))
                       if env_str("KEDA_PROMETHEUS_URL") else "")
KEDA_PROMETHEUS_AUTHENTICATION = env_str("KEDA_PROMETHEUS_AUTHENTICATION")
KEDA_PROMETHEUS_AUTH_MODES = env_str("KEDA_PROMETHEUS_AUTH_MODES", "bearer")
KEDA_POLLING_INTERVAL_SECONDS = env_int("KEDA_POLLING_INTERVAL_SECONDS", 30, minimum=1)
KEDA_SCALE_DOWN_WINDOW_SECONDS = env_int("KEDA_SCALE_DOWN_WINDOW_SECONDS", 300, minimum=0)

# --- TrainJobs (docs/trainjobs.md) ------------------------------------------------------------------
# The Kubeflow Trainer ClusterTrainingRuntimes seeded as runtimes every team may use, after each
# `migrate` (the chart's `trainingRuntimes`); quota managers change them in the admin afterwards.
TRAINING_RUNTIMES = env_list("TRAINING_RUNTIMES", ["torch-distributed"])

# --- Notebooks (docs/notebooks.md) ----------------------------------------------------------------
# An Ingress per notebook, its host from this pattern ({job}: the notebook's object name, {team}:
# the team's slug), e.g. "{job}-{team}.notebooks.example.org"; empty: no Ingress (port-forward
# only). The Ingress class to use; empty: the cluster's default class.
NOTEBOOK_INGRESS_HOST = env_str("NOTEBOOK_INGRESS_HOST")
NOTEBOOK_INGRESS_CLASS = env_str("NOTEBOOK_INGRESS_CLASS")
try:
    _host = NOTEBOOK_INGRESS_HOST.format(job="job-1", team="team")
except (KeyError, IndexError, ValueError) as _err:
    raise ImproperlyConfigured(f"NOTEBOOK_INGRESS_HOST={NOTEBOOK_INGRESS_HOST!r}: only {{job}} and {{team}} may "
                               f"be filled in ({_err}).") from None
if NOTEBOOK_INGRESS_HOST and not all(is_dns1123_label(part) for part in _host.split(".")):
    raise ImproperlyConfigured(f"NOTEBOOK_INGRESS_HOST={NOTEBOOK_INGRESS_HOST!r} does not make a DNS name "
                               "(lowercase letters, digits, '-' and '.').")
if NOTEBOOK_INGRESS_CLASS and not is_dns1123_label(NOTEBOOK_INGRESS_CLASS):
    raise ImproperlyConfigured(f"NOTEBOOK_INGRESS_CLASS={NOTEBOOK_INGRESS_CLASS!r} is not a DNS-1123 name.")

if TEAM_NAMESPACE_PREFIX and not is_dns1123_label(TEAM_NAMESPACE_PREFIX + "x"):
    raise ImproperlyConfigured(
        f"TEAM_NAMESPACE_PREFIX={TEAM_NAMESPACE_PREFIX!r} must be lowercase letters, digits "
        "and '-', starting with a letter."
    )
if not is_dns1123_label(PLATFORM_NAMESPACE):
    raise ImproperlyConfigured(f"PLATFORM_NAMESPACE={PLATFORM_NAMESPACE!r} is not a DNS-1123 label.")
if WEB_SERVICE_ACCOUNT and not is_dns1123_label(WEB_SERVICE_ACCOUNT):
    raise ImproperlyConfigured(f"WEB_SERVICE_ACCOUNT={WEB_SERVICE_ACCOUNT!r} is not a DNS-1123 label.")

# --- REST framework ----------------------------------------------------------------------
# A web process reuses a token it found for this long at most (tenants/recent_tokens.py):
# revoking it, or changing its user, reaches every process at once through the cache;
# this bounds only changes made behind Django's back. 0 looks every request's token up.
API_TOKEN_CACHE_SECONDS = env_int("API_TOKEN_CACHE_SECONDS", 60, minimum=0)
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "core.api_schema.AutoSchema",  # drf-spectacular's, saying what the code answers
    "DEFAULT_FILTER_BACKENDS": ["core.api_filters.FilterBackend"],
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
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "DEFAULT_PAGINATION_CLASS": "core.api_input.CursorPagination",
    # JSON only, accepted and advertised (the schema lists application/json bodies alone,
    # so generated clients send JSON, which carries `env`); DRF's JSON parser with a
    # body-size and JSON-depth limit (413/400 in the error shape). Anything else is 415.
    "DEFAULT_PARSER_CLASSES": ["core.api_input.JSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
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
    # Choice sets that share a field name ("kind", "status") with newer ones keep the names
    # clients already know.
    "ENUM_NAME_OVERRIDES": {"JobState": "jobs.lifecycle.State", "KindEnum": "jobs.models.Job.Kind",
                            "StatusEnum": "tenants.models.Team.Status"},
    # Swagger UI from the vendored copy (drf-spectacular-sidecar), never from a CDN; no
    # validator badge (it would send the schema's address to swagger.io).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    # The MCP SDK tells each request's start and end at INFO (/mcp is stateless: every request).
    "loggers": {"mcp": {"level": "WARNING"}},
}
