"""Loupe settings, all from the environment (README "Configuration" lists every variable).

With DATABASE_URL / REDIS_URL unset, an embedded PostgreSQL and Redis are started under `.data/`
(see webapp/embedded.py). There is no SQLite or in-memory fallback anywhere.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import dj_database_url
from redis import exceptions as _redis_exceptions
from redis.asyncio.retry import Retry as _RedisRetry
from redis.backoff import ExponentialBackoff as _RedisBackoff

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("LOUPE_DATA_DIR", BASE_DIR / ".data"))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    if key := os.environ.get("LOUPE_SECRET_KEY"):
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


PRODUCTION = env_bool("LOUPE_PRODUCTION")
DEBUG = env_bool("LOUPE_DEBUG", default=False)
SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("LOUPE_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("LOUPE_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "django_celery_beat",
    "core",
    "webapp",
    "flywheel",  # its migrations only: the history of the tables the lifecycle apps below took over
    "projects",
    "rollouts",
    "snapshots",
    "training",
    "cycles",
    "annotation",
    "envservice",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.middleware.ContentSecurityPolicyMiddleware",  # above WhiteNoise: its files get the header too
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.middleware.ApiJsonErrorMiddleware",
    "webapp.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"
WSGI_APPLICATION = None

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
            ]
        },
    }
]


# --- PostgreSQL -------------------------------------------------------------------------------
def _database_url() -> str:
    if url := os.environ.get("DATABASE_URL"):
        return url
    from webapp import embedded  # only for the embedded setup: it starts a server, which a configured host never needs

    url = embedded.postgres_url()
    os.environ["DATABASE_URL"] = url  # child processes (workers, tests' servers) share it
    return url


def _database_config(url: str) -> dict:
    config = dj_database_url.parse(url, conn_max_age=int(os.environ.get("LOUPE_DB_CONN_MAX_AGE", "0")))
    host = parse_qs(urlparse(url).query).get("host")
    if host:  # a unix-socket directory, as pgserver gives
        config["HOST"] = host[0]
    config["ENGINE"] = "django.db.backends.postgresql"
    config.setdefault("OPTIONS", {})["connect_timeout"] = 5
    config["TEST"] = {"NAME": os.environ.get("LOUPE_TEST_DB_NAME") or None}
    return config


DATABASES = {"default": _database_config(_database_url())}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


# --- Redis: channel layer, Celery broker, cache -----------------------------------------------
def _redis_url() -> str:
    if url := os.environ.get("REDIS_URL"):
        return url
    from webapp import embedded  # as in _database_url

    url = embedded.redis_url()
    os.environ["REDIS_URL"] = url
    return url


REDIS_URL = _redis_url()
# The pub/sub layer: a broadcast is one PUBLISH, and one subscription per episode a daphne watches fans it out to
# that daphne's sockets in process. The list-based core layer made a Redis round trip per socket and filled a core
# at 300 sockets (README, sizing). Pub/sub keeps nothing for a subscriber that is away (a Redis restart): the
# consumers sweep the stored log for what they missed (annotation/consumers.py, LOUPE_WS_RESYNC_SECONDS).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [{
                "address": REDIS_URL, "socket_timeout": 10, "socket_connect_timeout": 5,
                # after a Redis restart the pool's first connection is dead: try again on a fresh one
                "retry_on_error": [_redis_exceptions.ConnectionError, _redis_exceptions.TimeoutError],
                "retry": _RedisRetry(_RedisBackoff(cap=1.0, base=0.05), 3),
            }],
            "prefix": os.environ.get("LOUPE_CHANNEL_PREFIX", "loupe"),
        },
    }
}
# How often (seconds) each daphne compares the stored log with what its sockets were sent; a socket still missing an
# event stored a sweep ago is sent it from the log (a broadcast lost to a Redis outage, or never published).
LOUPE_WS_RESYNC_SECONDS = float(os.environ.get("LOUPE_WS_RESYNC_SECONDS", "1.0"))
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("LOUPE_CHANNEL_PREFIX", "loupe"),
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "global_keyprefix": os.environ.get("LOUPE_CHANNEL_PREFIX", "loupe") + ":"}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ROUTES = {
    "flywheel.tasks.episode_run": {"queue": "rollouts"},
    "annotation.tasks.*": {"queue": "audio"},
    "flywheel.tasks.training_run_execute": {"queue": "train"},
    "flywheel.tasks.cycle_evaluate": {"queue": "train"},
}
CELERY_BEAT_SCHEDULE = {
    "episodes-sweep-interrupted": {"task": "flywheel.tasks.episodes_sweep_interrupted", "schedule": 10.0},
    "cycles-resume": {"task": "flywheel.tasks.cycles_resume", "schedule": 10.0},
    "clips-sweep-stalled": {"task": "annotation.tasks.clips_sweep_stalled", "schedule": 15.0},
    "training-runs-sweep-stalled": {"task": "flywheel.tasks.training_runs_sweep_stalled", "schedule": 20.0},
    "rows-render-ahead": {"task": "snapshots.tasks.render_ahead_sweep", "schedule": 300.0},
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"


# --- auth, API ----------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
if env_bool("LOUPE_FAST_PASSWORD_HASHER"):  # tests only: PBKDF2's cost would dominate the suite
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/login"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("LOUPE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("LOUPE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

LOUPE_TOKEN_TTL_DAYS = int(os.environ.get("LOUPE_TOKEN_TTL_DAYS", "30"))
LOUPE_LOGIN_ATTEMPTS = int(os.environ.get("LOUPE_LOGIN_ATTEMPTS", "10"))  # per username+IP per 5 minutes

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "webapp.auth.BearerTokenAuthentication",
        "webapp.auth.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
        "rest_framework.parsers.FormParser",
    ],
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Loupe API",
    "DESCRIPTION": "Live GUI-agent annotation and the training flywheel.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # the split as a model field (labelled) and as a task input (bare values): one name each; and a name for each
    # set of choices that several fields of one name hold (status, state, backend, verdict, role)
    "ENUM_NAME_OVERRIDES": {
        "SplitEnum": "projects.models.Split", "TaskSplitEnum": [("train", "train"), ("eval", "eval")],
        "EpisodeStatusEnum": "rollouts.models.EpisodeStatus.values",
        "RunStatusEnum": "training.models.RunStatus.values",
        "SnapshotStatusEnum": "snapshots.models.SnapshotStatus.values", "HealthStatusEnum": ["ok", "degraded"],
        "CycleStateEnum": "cycles.models.CycleState.values", "QueueStateEnum": "annotation.models.QueueState.values",
        "QueueItemStateEnum": "annotation.models.ItemState.values",
        "CycleBackendEnum": ["local", "openai"], "DeploymentBackendEnum": "rollouts.models.Backend.values",
        "JudgeBackendEnum": "annotation.judge.BACKENDS", "PolishBackendEnum": "annotation.polish.BACKENDS",
        "VerdictEnum": "annotation.models.Verdict.values", "JudgeVerdictEnum": "rollouts.models.JudgeVerdict.values",
        "RoleEnum": "projects.models.Role", "EvaluationRoleEnum": ["candidate", "deployed"],
    },
}

# --- files ----------------------------------------------------------------------------------------
MEDIA_ROOT = Path(os.environ.get("LOUPE_MEDIA_ROOT", DATA_DIR / "media"))
MEDIA_URL = "/media/"  # never served directly: every file goes through a permission-checked view
STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("LOUPE_STATIC_ROOT", DATA_DIR / "static"))  # collectstatic writes the admin's here
FRONTEND_DIST = BASE_DIR / "frontend" / "dist"
WHITENOISE_ROOT = FRONTEND_DIST if FRONTEND_DIST.exists() else None
WHITENOISE_INDEX_FILE = False

_s3_bucket = os.environ.get("LOUPE_S3_BUCKET")
STORAGES = {
    "default": (
        {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": _s3_bucket,
                "endpoint_url": os.environ.get("LOUPE_S3_ENDPOINT_URL"),
                "default_acl": "private",
                "querystring_auth": True,
            },
        }
        if _s3_bucket
        else {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    ),
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
LOUPE_AUDIO_MAX_BYTES = int(os.environ.get("LOUPE_AUDIO_MAX_BYTES", str(2 * 1024 * 1024)))
# A clip whose newest chunk is this old and still not (finally) transcribed has its transcription sent again.
LOUPE_AUDIO_STALLED_SECONDS = float(os.environ.get("LOUPE_AUDIO_STALLED_SECONDS", "30"))
# A running training run whose worker has not heartbeated for this long is started again (beat sweep).
LOUPE_TRAIN_STALLED_SECONDS = float(os.environ.get("LOUPE_TRAIN_STALLED_SECONDS", "60"))
# Training a vision-language checkpoint (sft, dpo, rl) runs in this many processes on the train worker's machine, one
# a GPU, under torchrun or accelerate launch (with an accelerate config: trainer/launch/ddp.yaml, fsdp.yaml, zero3.yaml)
LOUPE_TRAIN_PROCESSES = int(os.environ.get("LOUPE_TRAIN_PROCESSES", "1"))
LOUPE_SNAPSHOT_PROCESSES = int(os.environ.get("LOUPE_SNAPSHOT_PROCESSES", "2"))  # a snapshot build split over processes (snapshots/build.py)
# Rows rendered ahead of a freeze (snapshots/render_ahead.py): of these kinds ('' renders none ahead), this many seconds
# after an episode finishes, at most this many seconds a job (the beat's sweep every 5 minutes goes on where it stopped)
LOUPE_RENDER_AHEAD_KINDS = os.environ.get("LOUPE_RENDER_AHEAD_KINDS", "sft,dpo")
LOUPE_RENDER_AHEAD_DELAY = float(os.environ.get("LOUPE_RENDER_AHEAD_DELAY", "60"))
LOUPE_RENDER_AHEAD_SECONDS = float(os.environ.get("LOUPE_RENDER_AHEAD_SECONDS", "120"))
LOUPE_TRAIN_LAUNCHER = os.environ.get("LOUPE_TRAIN_LAUNCHER", "torchrun")  # torchrun | accelerate
LOUPE_TRAIN_LAUNCH_CONFIG = os.environ.get("LOUPE_TRAIN_LAUNCH_CONFIG", "")  # relative to the repo root, or absolute
# The Unix socket of a warm trainer on this host (python -m trainer warm --socket PATH; trainer/warm.py): trainer commands
# run in its forked children, torch, transformers and TRL already imported. Empty, or no warm trainer answering there:
# each command starts its own interpreter.
LOUPE_TRAINER_WARM = os.environ.get("LOUPE_TRAINER_WARM", "")

# --- the agent and the flywheel ---------------------------------------------------------------
LOUPE_POLICY_BACKEND = os.environ.get("LOUPE_POLICY_BACKEND", "local")  # local | openai
LOUPE_OPENAI_BASE_URL = os.environ.get("LOUPE_OPENAI_BASE_URL", "http://127.0.0.1:8100")
# which server answers there: "vllm" loads LoRA adapters at run time only (a cycle's export "full" is refused), "loupe"
# (python -m trainer serve) loads adapters and whole checkpoints
LOUPE_OPENAI_SERVER = os.environ.get("LOUPE_OPENAI_SERVER", "vllm")
# torch threads of a worker process's local policy. Workers run several policies at once in their own processes, and
# with torch's default of a thread a core each OpenMP thread waits on one another process holds (README, Sizing:
# evaluation threads). 0 keeps torch's default.
LOUPE_POLICY_THREADS = int(os.environ.get("LOUPE_POLICY_THREADS", "1"))
# `python -m trainer eval` processes a cycle runs at once to measure one checkpoint, each on whole tasks of the plan
# (cycles/evaluation.py). 0: a core's worth of LOUPE_POLICY_THREADS each, at most 4 (one for a checkpoint that reads
# screenshots: a vision model's copies would share one GPU's memory).
LOUPE_EVAL_PROCESSES = int(os.environ.get("LOUPE_EVAL_PROCESSES", "0"))
# The host's policy server (python -m trainer serve, which make run starts): the local backend's workers ask it instead
# of each loading the model (agent/policies/served.py). Empty: each worker process loads its own.
LOUPE_POLICY_SERVER_URL = os.environ.get("LOUPE_POLICY_SERVER_URL", "")
LOUPE_OPENAI_API_KEY = os.environ.get("LOUPE_OPENAI_API_KEY", "")
# one policy request's time limit, and how many more tries a timed-out or failed (5xx) request gets
LOUPE_OPENAI_TIMEOUT_SECONDS = float(os.environ.get("LOUPE_OPENAI_TIMEOUT_SECONDS", "30"))
LOUPE_OPENAI_RETRIES = int(os.environ.get("LOUPE_OPENAI_RETRIES", "3"))
LOUPE_CHECKPOINT_DIR = Path(os.environ.get("LOUPE_CHECKPOINT_DIR", DATA_DIR / "checkpoints"))
LOUPE_WHISPER_MODEL = os.environ.get("LOUPE_WHISPER_MODEL", "")
LOUPE_HEARTBEAT_SECONDS = float(os.environ.get("LOUPE_HEARTBEAT_SECONDS", "5"))
LOUPE_INTERRUPTED_AFTER_SECONDS = float(os.environ.get("LOUPE_INTERRUPTED_AFTER_SECONDS", "20"))
LOUPE_SUPERVISED_IDLE_SECONDS = float(os.environ.get("LOUPE_SUPERVISED_IDLE_SECONDS", "600"))
# The live view (annotation/live_view.py): frames a second at most while a person decides or acts, bytes a frame at most
LOUPE_LIVE_FPS = float(os.environ.get("LOUPE_LIVE_FPS", "3"))
LOUPE_LIVE_MAX_FRAME_BYTES = int(os.environ.get("LOUPE_LIVE_MAX_FRAME_BYTES", "100000"))
# How long a reviewer holds a review-queue item they asked for before it is offered to someone else.
LOUPE_REVIEW_HOLD_SECONDS = int(os.environ.get("LOUPE_REVIEW_HOLD_SECONDS", "900"))
# Desktops a rollout worker process keeps warm (started, a fresh session waiting) beside the one in use, so a
# desktop episode does not wait for a display and a session; 0 starts each episode's session when it begins.
LOUPE_DESKTOP_POOL = int(os.environ.get("LOUPE_DESKTOP_POOL", "1"))
LOUPE_SUPERVISOR_FACTORY = "annotation.supervision.supervisor_for"
# The environment service (python manage.py envservice) an online rl stage plays its episodes through; empty: such
# stages are refused. The stage's API token comes from LOUPE_RUN_TOKEN (minted for the run, revoked when it ends).
LOUPE_ENV_SERVICE_URL = os.environ.get("LOUPE_ENV_SERVICE_URL", "")
LOUPE_RUN_TOKEN = "webapp.run_tokens.run_token"
LOUPE_WS_MAX_FRAME_BYTES = int(os.environ.get("LOUPE_WS_MAX_FRAME_BYTES", "65536"))
# Per socket: a token bucket of LOUPE_WS_FRAME_BURST frames refilled at this rate; beyond it the socket closes 4029.
# The burst covers a browser re-sending its unacknowledged commands after a reconnect.
LOUPE_WS_MAX_FRAMES_PER_SECOND = float(os.environ.get("LOUPE_WS_MAX_FRAMES_PER_SECOND", "20"))
LOUPE_WS_FRAME_BURST = int(os.environ.get("LOUPE_WS_FRAME_BURST", "100"))
# Per daphne: threads (each keeping one PostgreSQL connection) that store the sockets' commands and replay their
# events (annotation/live_db.py). Count them into max_connections with the workers.
LOUPE_LIVE_DB_THREADS = int(os.environ.get("LOUPE_LIVE_DB_THREADS", "4"))

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"health_probe": {"()": "core.errors.HealthProbeFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOUPE_LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}, "daphne": {"level": "WARNING"},
                "django.request": {"filters": ["health_probe"]}},
}
