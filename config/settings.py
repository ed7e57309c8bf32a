"""Settings for flowpilot, read from the environment (django-environ).

The embedded default needs nothing: SQLite in the project folder and Celery in
eager mode. Set ``DATABASE_URL`` for PostgreSQL and ``CELERY_BROKER_URL`` for a
real broker (Redis) to scale out.
"""

from datetime import timedelta
from pathlib import Path

import environ
from celery.schedules import crontab

from config.llm_endpoints import read_llm_endpoints, read_prices
from config.logs import read_log_format
from config.telemetry import (
    check_otlp_protocol,
    read_metric_exporters,
    read_trace_exporters,
    read_trace_ratio,
)
from tools.llm.endpoints import PUBLIC_BASE_URL

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(str(BASE_DIR / ".env"))

SECRET_KEY = env("DJANGO_SECRET_KEY", default="insecure-dev-key-change-me-in-production")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "config.admin.FlowpilotAdminConfig",  # the admin modules load on first use
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "tools",
    "workflows",
    "runs",
    "schedules",
    "notifications",
    "triggers",
    "review",
    "api",
    "health",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
# Under /api/ every error is JSON in the API's shape (api/handlers.py).
CSRF_FAILURE_VIEW = "api.handlers.csrf_failure"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    # Keep connections between requests and Celery tasks (a reconnect per step task
    # costs more than the step's own queries); checked for health before reuse. In a
    # worker this holds only with CELERY_DB_REUSE_MAX below: config/celery_app.py
    # applies both around every task as Django does around every request.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault(
        "prepare_threshold", env.int("DATABASE_PREPARE_THRESHOLD", default=5) or None
    )
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers (admin) look at a run while the executor writes checkpoints.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault("timeout", 30)
    DATABASES["default"]["OPTIONS"].setdefault(
        "init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Set DJANGO_STATIC_ROOT where `collectstatic` writes (the web container does);
# without it WhiteNoise serves files straight from the apps (no collectstatic needed).
STATIC_ROOT = env("DJANGO_STATIC_ROOT", default=None)
WHITENOISE_USE_FINDERS = STATIC_ROOT is None

# --- The REST API (api/, docs/api.md) ---------------------------------------
# Token auth for programs, session auth (with CSRF) for the browsable API; every
# endpoint needs an authenticated user (webhooks authenticate by signature).
# No CORS package: browsers on other origins get no Access-Control-* headers.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.ModelPermissions"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env("FLOWPILOT_API_THROTTLE_ANON", default="60/minute"),
        "user": env("FLOWPILOT_API_THROTTLE_USER", default="1200/minute"),
        "webhook": env("FLOWPILOT_API_THROTTLE_WEBHOOK", default="120/minute"),
    },
    "URL_FORMAT_OVERRIDE": None,
    "DEFAULT_PARSER_CLASSES": ["api.parsers.StorableJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "flowpilot API",
    "DESCRIPTION": "Plan, review, approve and run workflows. Guide: docs/api.md.",
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its Swagger UI / Redoc pages need a signed-in user too.
    "SERVE_PERMISSIONS": ["api.permissions.SignedIn"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runs.models.RunStatus",
        "StepStatusEnum": "runs.models.StepStatus",
        "WorkflowStatusEnum": "workflows.models.WorkflowStatus",
        "ToolKindEnum": "tools.models.ToolKind",
        "PlanKindEnum": "review.models.PlanKind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_error_responses",
    ],
}
# The longest a client may hold `GET /api/v1/runs/{id}/wait/` open, in seconds.
FLOWPILOT_API_MAX_WAIT = env.float("FLOWPILOT_API_MAX_WAIT", default=60.0)
# Webhook signatures older or newer than this many seconds are refused (replay window).
FLOWPILOT_WEBHOOK_WINDOW = env.int("FLOWPILOT_WEBHOOK_WINDOW", default=300)
# After a webhook is rotated, its old URL and secret still work for this many seconds
# (0: refused at once), so a sender can switch without a gap.
FLOWPILOT_WEBHOOK_ROTATION_OVERLAP = env.int("FLOWPILOT_WEBHOOK_ROTATION_OVERLAP", default=300)
# Directories `POST /api/v1/tools/load/` may read tool files from (nothing outside).
FLOWPILOT_API_TOOL_DIRS = [
    Path(p)
    for p in env.list("FLOWPILOT_API_TOOL_DIRS", default=[str(BASE_DIR / "examples" / "tools")])
]

# --- Celery ---------------------------------------------------------------
# With no broker configured, tasks run eagerly in-process (the embedded default).
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="")
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=CELERY_BROKER_URL or None)
# Celery's Django fixup closes every database connection before and after each task
# unless this is set, so CONN_MAX_AGE would never apply in a worker and every step task
# would open a new connection (~5 ms on PostgreSQL). With it, the fixup closes them only
# every this many tasks; in between, config/celery_app.py closes a connection that is
# older than CONN_MAX_AGE or unusable, and CONN_HEALTH_CHECKS checks it before reuse.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=not CELERY_BROKER_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_TASK_DEFAULT_QUEUE", default="celery")
CELERY_RESULT_EXPIRES = env.int("CELERY_RESULT_EXPIRES", default=24 * 3600)
# An unacknowledged message (its worker died) goes back to the queue after this many
# seconds; keep it above the longest retry countdown (RetryPolicy.max_delay <= 3600).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3900),
}
# The sweeper re-queues steps lost with their worker (runs/engine/celery/sweep.py).
FLOWPILOT_SWEEP_INTERVAL = env.int("FLOWPILOT_SWEEP_INTERVAL", default=30)
# Retention runs itself once a day (schedules/retention.py), at this UTC hour.
FLOWPILOT_RETENTION_HOUR = env.int("FLOWPILOT_RETENTION_HOUR", default=3)
CELERY_BEAT_SCHEDULE = {
    "flowpilot-sweep-steps": {
        "task": "runs.sweep_steps",
        "schedule": timedelta(seconds=FLOWPILOT_SWEEP_INTERVAL),
        "options": {"expires": FLOWPILOT_SWEEP_INTERVAL},
    },
    # Starts queued runs (concurrency limits) whose start message was lost (runs/concurrency.py).
    # Decides the approval requests whose time is up (runs/approvals.py).
    "flowpilot-expire-approvals": {
        "task": "runs.expire_approvals",
        "schedule": timedelta(seconds=FLOWPILOT_SWEEP_INTERVAL),
        "options": {"expires": FLOWPILOT_SWEEP_INTERVAL},
    },
    "flowpilot-sweep-queued-runs": {
        "task": "runs.sweep_queued_runs",
        "schedule": timedelta(seconds=FLOWPILOT_SWEEP_INTERVAL),
        "options": {"expires": FLOWPILOT_SWEEP_INTERVAL},
    },
    "flowpilot-retention": {
        "task": "schedules.retention_sweep",
        "schedule": crontab(minute=0, hour=FLOWPILOT_RETENTION_HOUR),
    },
}
# Tool sources (MCP server files, OpenAPI documents: docs/tools.md "Sources") are read
# again every FLOWPILOT_SOURCE_REFRESH_HOURS; beat looks for the due ones this often.
# One not read for FLOWPILOT_SOURCE_STALE_HOURS is stale (health, review page, planflow).
FLOWPILOT_SOURCE_REFRESH_HOURS = env.float("FLOWPILOT_SOURCE_REFRESH_HOURS", default=12.0)
FLOWPILOT_SOURCE_STALE_HOURS = env.float("FLOWPILOT_SOURCE_STALE_HOURS", default=24.0)
FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES = env.int(
    "FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES", default=15
)
# Takes the trigger events the run-finished hook missed (triggers/events.py).
# How often beat looks for poll triggers whose time has come (triggers/polls.py).
FLOWPILOT_TRIGGER_POLL_TICK = env.int("FLOWPILOT_TRIGGER_POLL_TICK", default=5)
CELERY_BEAT_SCHEDULE["flowpilot-poll-triggers"] = {
    "task": "triggers.polls_due",
    "schedule": timedelta(seconds=FLOWPILOT_TRIGGER_POLL_TICK),
    "options": {"expires": FLOWPILOT_TRIGGER_POLL_TICK},
}
CELERY_BEAT_SCHEDULE["flowpilot-sweep-trigger-events"] = {
    "task": "triggers.sweep",
    "schedule": timedelta(seconds=FLOWPILOT_SWEEP_INTERVAL),
    "options": {"expires": FLOWPILOT_SWEEP_INTERVAL},
}
CELERY_BEAT_SCHEDULE["flowpilot-refresh-sources"] = {
    "task": "tools.refresh_sources",
    "schedule": timedelta(minutes=FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES),
    "options": {"expires": FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES * 60},
}
# Beat records each task it sends right away (django-celery-beat's last_run_at, one
# row write per tick), so `manage.py health` reads beat's last tick from the database.
CELERY_BEAT_SYNC_EVERY = env.int("CELERY_BEAT_SYNC_EVERY", default=1)
# The workflow schedules are rows of django-celery-beat's PeriodicTask, one per
# schedules.Schedule; beat reads them from the database (CELERY_BEAT_SCHEDULER).
# Celery runs: a running step's claim lasts this many seconds unless its worker's
# heartbeat (every third of it) renews it; then the sweeper takes it back.
FLOWPILOT_STEP_LEASE = env.float("FLOWPILOT_STEP_LEASE", default=60.0)
# Celery runs: a queued step whose task has not started this many seconds after it
# was due is published again (its message was lost); duplicates lose the claim.
FLOWPILOT_QUEUED_LEASE = env.float("FLOWPILOT_QUEUED_LEASE", default=600.0)
# How many times a step's outcome write is tried through transient database errors
# (reconnecting between tries, with backoff) before the task gives up.
FLOWPILOT_OUTCOME_WRITE_TRIES = env.int("FLOWPILOT_OUTCOME_WRITE_TRIES", default=8)
# Celery runs: a step whose worker died this many times is failed (a poison step).
FLOWPILOT_MAX_LOST_ATTEMPTS = env.int("FLOWPILOT_MAX_LOST_ATTEMPTS", default=3)

# --- flowpilot --------------------------------------------------------------
# MCP client deadlines (docs/mcp.md, "Deadlines"): starting a server and its
# initialize handshake, listing its tools (loadtools), and closing a session (a stdio
# server's process is then stopped). A call's own deadline is the tool's timeout.
FLOWPILOT_MCP_START_TIMEOUT = env.float("FLOWPILOT_MCP_START_TIMEOUT", default=30.0)
FLOWPILOT_MCP_LIST_TIMEOUT = env.float("FLOWPILOT_MCP_LIST_TIMEOUT", default=60.0)
FLOWPILOT_MCP_SHUTDOWN_TIMEOUT = env.float("FLOWPILOT_MCP_SHUTDOWN_TIMEOUT", default=10.0)
# Built-in tool providers, named explicitly (no import-time registries).
FLOWPILOT_BUILTIN_PROVIDERS = env.list(
    "FLOWPILOT_BUILTIN_PROVIDERS",
    default=["tools.builtin.data.DataToolsProvider"],
)
# Where built-in tools may write files (reports, exports). Paths outside are refused.
FLOWPILOT_OUTPUT_DIR = Path(env("FLOWPILOT_OUTPUT_DIR", default=str(BASE_DIR / "out")))
# Where built-in tools may read files from (besides the output dir).
FLOWPILOT_DATA_DIRS = [
    Path(p) for p in env.list("FLOWPILOT_DATA_DIRS", default=[str(BASE_DIR / "examples")])
]
# An HTTP response body larger than this is cut off and flagged (memory stays bounded).
FLOWPILOT_MAX_RESPONSE_BYTES = env.int("FLOWPILOT_MAX_RESPONSE_BYTES", default=10 * 1024 * 1024)
# Run inputs over this size (as JSON) are refused with a clear error.
FLOWPILOT_MAX_RUN_INPUT_BYTES = env.int("FLOWPILOT_MAX_RUN_INPUT_BYTES", default=1024 * 1024)
# A step output or inputs record larger than this (as JSON) is stored truncated and flagged.
FLOWPILOT_MAX_STORED_OUTPUT_BYTES = env.int(
    "FLOWPILOT_MAX_STORED_OUTPUT_BYTES", default=1024 * 1024
)
# What one step may build in memory (its output, arguments, response, rendered template,
# transform result, foreach items), as JSON bytes; over it the step fails with
# `output_too_large` before the value is handed on. A step's `max_output_bytes` may set
# its own cap, up to FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT (docs/security.md).
FLOWPILOT_MAX_STEP_OUTPUT_BYTES = env.int(
    "FLOWPILOT_MAX_STEP_OUTPUT_BYTES", default=4 * 1024 * 1024
)
FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT = env.int(
    "FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT", default=64 * 1024 * 1024
)
# How many steps of one run execute at once in the in-process engine.
# Env variables a workflow may read with ``$env.NAME`` besides those its tools declare
# (comma-separated names or globs such as ``REPORT_*``); see docs/security.md.
FLOWPILOT_ENV_ALLOW = env.list("FLOWPILOT_ENV_ALLOW", default=[])
# Keys that encrypt stored credentials (docs/credentials.md): comma-separated Fernet
# keys, the first encrypts, every one decrypts (`rotatecredentialkeys` re-encrypts with
# the first). Empty: no credential value can be saved.
FLOWPILOT_CREDENTIAL_KEYS = env.list("FLOWPILOT_CREDENTIAL_KEYS", default=[])
# HashiCorp Vault (KV v2) for credentials kept there (docs/credentials.md#vault): its
# address, a token (or a file holding one, read at each Vault read), an optional
# namespace, the timeout of one read, and how long a value read is kept in the process.
FLOWPILOT_VAULT_ADDR = env.str("FLOWPILOT_VAULT_ADDR", default="")
FLOWPILOT_VAULT_TOKEN = env.str("FLOWPILOT_VAULT_TOKEN", default="")
FLOWPILOT_VAULT_TOKEN_FILE = env.str("FLOWPILOT_VAULT_TOKEN_FILE", default="")
FLOWPILOT_VAULT_NAMESPACE = env.str("FLOWPILOT_VAULT_NAMESPACE", default="")
FLOWPILOT_VAULT_TIMEOUT = env.float("FLOWPILOT_VAULT_TIMEOUT", default=5.0)
FLOWPILOT_VAULT_CACHE_SECONDS = env.float("FLOWPILOT_VAULT_CACHE_SECONDS", default=60.0)
FLOWPILOT_MAX_PARALLEL_STEPS = env.int("FLOWPILOT_MAX_PARALLEL_STEPS", default=8)
# How many levels of `workflow` steps (sub-workflows) may nest; deeper is a validation error.
FLOWPILOT_MAX_WORKFLOW_DEPTH = env.int("FLOWPILOT_MAX_WORKFLOW_DEPTH", default=5)
# Runs in a row each started by the one before through `on_workflow` triggers
# (docs/triggers.md): the chain ends there, so two workflows triggering each other stop.
FLOWPILOT_TRIGGER_MAX_CHAIN = env.int("FLOWPILOT_TRIGGER_MAX_CHAIN", default=10)
# How long a process trusts what it read of the workflows triggers wait for (a finished
# run of another workflow costs no query), and how far back the sweep looks for events
# the run-finished hook missed (triggers/events.py).
FLOWPILOT_TRIGGER_SOURCES_SECONDS = env.float("FLOWPILOT_TRIGGER_SOURCES_SECONDS", default=10.0)
FLOWPILOT_TRIGGER_SWEEP_MINUTES = env.int("FLOWPILOT_TRIGGER_SWEEP_MINUTES", default=60)
# The most iterations a `loop` step may declare (`max_iterations`); more is a validation error.
FLOWPILOT_MAX_LOOP_ITERATIONS = env.int("FLOWPILOT_MAX_LOOP_ITERATIONS", default=50)
# Runs older than this many days may be removed by `purgeruns` (0 keeps them forever).
FLOWPILOT_RUN_RETENTION_DAYS = env.int("FLOWPILOT_RUN_RETENTION_DAYS", default=90)
# The daily retention task deletes at most this many runs per transaction.
FLOWPILOT_RETENTION_BATCH = env.int("FLOWPILOT_RETENTION_BATCH", default=500)

# Hooks: lower layers announce events by these dotted names, never by importing an
# upper layer (tools/hooks.py). Each hook only queues a Celery task.
FLOWPILOT_RUN_FINISHED_HOOKS = [
    "runs.hooks.run_finished",  # a child run of a parked `workflow` step wakes its parent
    "schedules.hooks.run_finished",
    "notifications.hooks.run_finished",
    "review.hooks.run_finished",  # settles the approval of a validation run
    "triggers.hooks.run_finished",  # starts the runs other workflows' triggers wait for
]
FLOWPILOT_WORKFLOW_ACTIVATED_HOOKS = [
    "schedules.hooks.workflow_activated",
    "triggers.hooks.workflow_activated",
]
# A version was stored: its test scenarios (tests:) run offline (runs/scenarios.py).
FLOWPILOT_VERSION_STORED_HOOKS = ["runs.scenarios.version_stored"]
# Links an upper layer adds to the run page (runs/links.py): its approval, its validation run.
FLOWPILOT_RUN_LINK_PROVIDERS = ["review.links.run_links", "triggers.links.run_links"]
# Ids an upper layer adds to a run's root span (runs/engine/finish.py): its approval's.
FLOWPILOT_RUN_SPAN_PROVIDERS = ["review.links.span_attributes"]

# --- Notifications (docs/notifications.md) ----------------------------------
# Email goes through Django's email backend: EMAIL_URL such as
# smtp+tls://user:password@smtp.example.com:587 (django-environ); the default prints
# to the console.
_EMAIL = env.email_url("EMAIL_URL", default="consolemail://")
EMAIL_BACKEND = _EMAIL["EMAIL_BACKEND"]
EMAIL_HOST = _EMAIL.get("EMAIL_HOST") or "localhost"
EMAIL_PORT = _EMAIL.get("EMAIL_PORT") or 25
EMAIL_HOST_USER = _EMAIL.get("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = _EMAIL.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = bool(_EMAIL.get("EMAIL_USE_TLS"))
EMAIL_USE_SSL = bool(_EMAIL.get("EMAIL_USE_SSL"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="flowpilot@localhost")
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=30)
# The HMAC-SHA256 key of webhook signatures, unless a workflow names its own variable.
FLOWPILOT_WEBHOOK_SECRET = env("FLOWPILOT_WEBHOOK_SECRET", default="")
# Webhook deliveries: tries per report and the first backoff (doubled each retry, seconds).
FLOWPILOT_WEBHOOK_ATTEMPTS = env.int("FLOWPILOT_WEBHOOK_ATTEMPTS", default=5)
FLOWPILOT_WEBHOOK_BACKOFF = env.float("FLOWPILOT_WEBHOOK_BACKOFF", default=2.0)
FLOWPILOT_WEBHOOK_TIMEOUT = env.float("FLOWPILOT_WEBHOOK_TIMEOUT", default=10.0)
# A failed run's report replays its version offline against the version's validation
# run and includes what differs (runs/replay/; nothing is sent, no file is written).
FLOWPILOT_REPORT_REPLAY = env.bool("FLOWPILOT_REPORT_REPLAY", default=True)
# The site's public address (https://flowpilot.example.com): reports link the run, its
# failing steps and the workflow under it. Unset, a report says so and links nothing.
FLOWPILOT_PUBLIC_URL = env("FLOWPILOT_PUBLIC_URL", default="")
# How long a signed approval link works at most (runs/approval_links.py); never past the
# approval step's own timeout.
FLOWPILOT_APPROVAL_LINK_HOURS = env.int("FLOWPILOT_APPROVAL_LINK_HOURS", default=72)
# Told when an approval step starts to wait (its `notify`): each queues one task.
FLOWPILOT_APPROVAL_REQUESTED_HOOKS = ["notifications.hooks.approval_requested"]

# Circuit breaker per external host (tools/breaker/): shared by every worker, in Redis
# when the broker is Redis, else in the database. auto | redis | database | off.
FLOWPILOT_BREAKER_BACKEND = env("FLOWPILOT_BREAKER_BACKEND", default="auto")
FLOWPILOT_BREAKER_REDIS_URL = env(
    "FLOWPILOT_BREAKER_REDIS_URL",
    default=CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "",
)
# Stored OAuth2 credentials (tools/credentials/tokens.py): one token refresh at a time
# across every worker, under a Redis lock when this is set (by default the broker's URL
# when the broker is Redis), else a lock on the credential's database row. A process
# waits at most FLOWPILOT_TOKEN_REFRESH_WAIT seconds for another's refresh.
FLOWPILOT_TOKEN_LOCK_REDIS_URL = env(
    "FLOWPILOT_TOKEN_LOCK_REDIS_URL",
    default=CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "",
)
FLOWPILOT_TOKEN_REFRESH_WAIT = env.float("FLOWPILOT_TOKEN_REFRESH_WAIT", default=30.0)
# Consecutive retryable failures (each within the window of the previous) that open it.
FLOWPILOT_BREAKER_FAILURES = env.int("FLOWPILOT_BREAKER_FAILURES", default=5)
# Seconds an open breaker refuses calls before one half-open trial call.
FLOWPILOT_BREAKER_COOLDOWN = env.float("FLOWPILOT_BREAKER_COOLDOWN", default=30.0)
FLOWPILOT_BREAKER_WINDOW = env.float("FLOWPILOT_BREAKER_WINDOW", default=300.0)

# Rate limits (a tool's `rate_limit:`) and adaptive pacing from an API's rate headers
# (tools/ratelimit/): shared by every worker, in Redis when the broker is Redis, else in
# the database. auto | redis | database | off.
FLOWPILOT_RATE_LIMIT_BACKEND = env("FLOWPILOT_RATE_LIMIT_BACKEND", default="auto")
FLOWPILOT_RATE_LIMIT_REDIS_URL = env(
    "FLOWPILOT_RATE_LIMIT_REDIS_URL",
    default=CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "",
)
# A call waits in place for its slot up to this many seconds; a longer wait re-queues the
# step with that countdown (on Celery no worker slot is held while it waits).
FLOWPILOT_RATE_LIMIT_MAX_SLEEP = env.float("FLOWPILOT_RATE_LIMIT_MAX_SLEEP", default=5.0)
# The longest pause an API's Retry-After or rate headers may impose on a key.
FLOWPILOT_PACING_MAX_PAUSE = env.float("FLOWPILOT_PACING_MAX_PAUSE", default=3600.0)
# How often a process re-reads which keys are paused (a pause another worker recorded is
# seen within this many seconds by calls of a tool without a rate_limit).
FLOWPILOT_PACING_REFRESH = env.float("FLOWPILOT_PACING_REFRESH", default=1.0)

# Approval policy (review/policy.py): distinct approvers a version needs before its
# validation run starts, and whether the plan's author counts as one. A workflow's
# own policy (admin: Review → Approval policies) overrides both.
FLOWPILOT_APPROVALS_REQUIRED = env.int("FLOWPILOT_APPROVALS_REQUIRED", default=1)
FLOWPILOT_AUTHOR_MAY_APPROVE = env.bool("FLOWPILOT_AUTHOR_MAY_APPROVE", default=True)

# Health checks (health/checks.py): seconds each network check may take; how old beat's
# last tick may be (0: three sweeper intervals, at least 90 s); whether a missing LLM
# key is a failure.
FLOWPILOT_HEALTH_TIMEOUT = env.float("FLOWPILOT_HEALTH_TIMEOUT", default=2.0)
FLOWPILOT_HEALTH_BEAT_MAX_AGE = env.float("FLOWPILOT_HEALTH_BEAT_MAX_AGE", default=0.0)
FLOWPILOT_HEALTH_REQUIRE_LLM = env.bool("FLOWPILOT_HEALTH_REQUIRE_LLM", default=False)

# LLM (planner and llm steps): any OpenAI-compatible endpoint, OpenRouter by default.
OPENAI_BASE_URL = env("OPENAI_BASE_URL", default=PUBLIC_BASE_URL)
OPENAI_API_KEY = env("OPENAI_API_KEY", default="")
PLANNER_MODEL = env("PLANNER_MODEL", default="openai/gpt-4o-mini")
# More OpenAI-compatible endpoints by name (docs/planner.md): FLOWPILOT_LLM_ENDPOINTS=local,hosted
# and FLOWPILOT_LLM_<NAME>_BASE_URL / _API_KEY / _MODEL each. `default` is the one above.
FLOWPILOT_LLM_ENDPOINTS = read_llm_endpoints(env)
# Prices of models (US dollars per million tokens, input and output) over the shipped
# ones, for every endpoint (docs/observability.md): '{"my-model": [0.5, 1.5]}'.
FLOWPILOT_LLM_PRICES = read_prices(env, "FLOWPILOT_LLM_PRICES")
# Output tokens a call is assumed to produce, for the estimate a budget in money checks
# before the call, when the step sets no max_output_tokens.
FLOWPILOT_LLM_ESTIMATE_OUTPUT_TOKENS = env.int("FLOWPILOT_LLM_ESTIMATE_OUTPUT_TOKENS", default=1000)
# The endpoint the planner (planflow, the admin, the API, evalplanner) uses; empty: default.
FLOWPILOT_PLANNER_ENDPOINT = env("FLOWPILOT_PLANNER_ENDPOINT", default="")
# Characters of conversation an llm step sends per model call when it declares no
# context_budget_chars; older tool results are truncated, then dropped, to fit.
FLOWPILOT_LLM_CONTEXT_BUDGET_CHARS = env.int("FLOWPILOT_LLM_CONTEXT_BUDGET_CHARS", default=200_000)
# Question rounds a goal may take before the planner must plan (0: it never asks).
FLOWPILOT_PLANNER_QUESTION_ROUNDS = env.int("FLOWPILOT_PLANNER_QUESTION_ROUNDS", default=2)
# Approved workflows shown to the planner as templates (0: none).
FLOWPILOT_PLANNER_TEMPLATES = env.int("FLOWPILOT_PLANNER_TEMPLATES", default=3)
# Earlier plans for similar goals that were rejected or failed validation, shown to the
# planner as warnings (0: none); where the failed validations come from (an upper layer).
FLOWPILOT_PLANNER_LESSONS = env.int("FLOWPILOT_PLANNER_LESSONS", default=3)
FLOWPILOT_PLANNER_LESSON_PROVIDERS = ["review.lessons.failed_validations"]

# Traces (docs/observability.md): on when the standard OpenTelemetry variables ask for
# an exporter (OTEL_TRACES_EXPORTER=otlp|console, or an OTLP endpoint), off by default;
# the OTLP exporter reads OTEL_EXPORTER_OTLP_* itself. FLOWPILOT_TRACE_URL links a run's
# page to its trace: http://jaeger:16686/trace/{trace_id}.
FLOWPILOT_TRACE_EXPORTERS = read_trace_exporters(env)
FLOWPILOT_TRACING = bool(FLOWPILOT_TRACE_EXPORTERS)
FLOWPILOT_TRACE_URL = env("FLOWPILOT_TRACE_URL", default="")
FLOWPILOT_TRACE_RATIO = read_trace_ratio(env)  # OTEL_TRACES_SAMPLER (and _ARG)
check_otlp_protocol(env)  # OTLP over HTTP only
# Metrics (docs/observability.md): /metrics for Prometheus when FLOWPILOT_METRICS is true
# (staff users, or `Authorization: Bearer FLOWPILOT_METRICS_TOKEN`; PROMETHEUS_MULTIPROC_DIR
# for several processes), and over OTLP when the OTEL_* variables ask for it.
FLOWPILOT_METRICS = env.bool("FLOWPILOT_METRICS", default=False)
FLOWPILOT_METRICS_TOKEN = env("FLOWPILOT_METRICS_TOKEN", default="")
FLOWPILOT_METRIC_EXPORTERS = read_metric_exporters(env)

# Logs (docs/observability.md): `text` lines, or `json`, one object per line with the
# ids of the run, step and try it is about (tools/logformat.py); another value stops start-up.
FLOWPILOT_LOG_FORMAT = read_log_format(env)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "tools.logformat.JsonFormatter"},
    },
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "json" if FLOWPILOT_LOG_FORMAT == "json" else "plain",
            "stream": "ext://sys.stderr",
        },
    },
    "root": {"handlers": ["stderr"], "level": env("LOG_LEVEL", default="WARNING")},
    "loggers": {
        "flowpilot": {"level": env("FLOWPILOT_LOG_LEVEL", default="WARNING"), "propagate": True},
        # httpx logs full URLs (query-string credentials) at INFO: keep it quiet.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# Hosts an OpenAPI document may be fetched from by URL (importopenapi); else files only.
FLOWPILOT_OPENAPI_HOSTS = env.list("FLOWPILOT_OPENAPI_HOSTS", default=[])
# The largest OpenAPI document read: by importopenapi (a file or a URL), and by the admin's
# import page (an upload or a URL, kept in the session until the import), in bytes.
FLOWPILOT_OPENAPI_MAX_BYTES = env.int("FLOWPILOT_OPENAPI_MAX_BYTES", default=64 * 1024 * 1024)
FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES = env.int(
    "FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES", default=5 * 1024 * 1024
)
# Where the admin's OpenAPI import page writes tool files (one directory per prefix).
FLOWPILOT_OPENAPI_IMPORT_DIR = Path(
    env("FLOWPILOT_OPENAPI_IMPORT_DIR", default=str(BASE_DIR / "imported_tools"))
)
