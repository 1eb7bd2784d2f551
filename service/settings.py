"""Every setting of the service and its workers, read from environment variables.

Variables are prefixed ``UQEVAL_`` (``UQEVAL_MAX_BODY_BYTES``), except ``REDIS_URL``, which is
also read without the prefix. README documents each one with its default.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Service and worker settings (one class; both processes read it)."""

    model_config = SettingsConfigDict(env_prefix="UQEVAL_", extra="ignore")

    # --- Redis -------------------------------------------------------------------------------
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "UQEVAL_REDIS_URL"),
        description="Redis to use; unset: `uqeval serve` starts and manages its own server.",
    )
    data_dir: Path = Field(
        default=Path(".uqeval"),
        description="Directory of the managed Redis server's data (AOF/RDB) and logs.",
    )
    supervisor_state_file: Path | None = Field(
        default=None,
        description="State file of the `uqeval serve` supervisor (set by it for its children): "
        "/readyz names the children being restarted (service.supervision).",
    )
    redis_socket_timeout_s: float = Field(
        default=3.0, gt=0, description="Socket connect/read timeout for Redis calls (s)."
    )

    # --- blob store (raw arrays) -----------------------------------------------------------
    blob_url: str | None = Field(
        default=None,
        description="Where raw arrays are stored: unset: the directory <data_dir>/blobs; "
        "'file:///dir' or a plain path: that directory; 's3://bucket/prefix': an S3 bucket "
        "(credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION).",
    )
    blob_endpoint_url: str | None = Field(
        default=None,
        description="Endpoint of an S3-compatible server (e.g. http://minio:9000); unset: AWS.",
    )
    scratch_dir: Path | None = Field(
        default=None,
        description="Local files of downloaded arrays and spooled uploads (removed after use); "
        "unset: <data_dir>/scratch.",
    )
    blob_sweep_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="How often one of the workers deletes the blobs whose arrays expired or "
        "were deleted (s).",
    )
    blob_grace_s: int = Field(
        default=3600,
        gt=0,
        description="Blobs written for a submission or benchmark that Redis never recorded are "
        "deleted this long after their write began; arrays kept without expiry are looked at "
        "again at this interval (s).",
    )

    # --- API ---------------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    # One uvicorn process runs one event loop on one core: with many concurrent readers the
    # requests queue behind it. More processes use more cores (each holds its own Redis
    # connections and memory); only useful where the cores are not needed by the workers.
    api_workers: int = Field(
        default=1,
        ge=1,
        description="API (uvicorn) processes of `uqeval serve` and `uqeval api`; each uses one "
        "core at most. Above 1 their Prometheus request metrics are summed across processes.",
    )
    # The hot reads do one Redis round trip and a little CPU under the GIL each: a few
    # threads keep one event loop busy; dozens only contend for the GIL.
    read_threads: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Threads of each API process for the polling hot paths (a submission's "
        "status and result, a leaderboard page), apart from the pool of the other routes "
        "(uploads are parsed there): the reads neither queue behind uploads nor crowd the GIL.",
    )
    # A full collection of Python's garbage collector walks every object of the process: in
    # an API process (FastAPI, pydantic, numpy, scipy) over 10^5 of them, tens of ms during
    # which no request moves. Frozen at startup, they are left out of every later collection.
    gc_freeze: bool = Field(
        default=True,
        description="After startup each API process moves the objects it holds then (the "
        "imported code and the app) to the garbage collector's permanent generation "
        "(`gc.freeze`), so that collections while it serves do not walk them: shorter pauses "
        "in the requests' tail latency. Undone at shutdown.",
    )
    admin_key: str | None = Field(
        default=None,
        description="Admin API key; unset: one is generated at first start and printed once.",
    )
    # The limits hold together: max_elements = 2 × max_points (a prediction of two values a
    # row), and the body limits leave room for a float32 Gaussian of max_points rows (mean,
    # std, y: 12 bytes a row, 2.4 GB at 2·10^8) with the archive's overhead.
    max_body_bytes: int = Field(
        default=1 << 32,
        gt=0,
        description="Largest request body accepted, after gzip decoding (bytes); spooled to "
        "scratch_dir as it arrives, never held in memory. Keep it >= 12 × max_points (a "
        "float32 Gaussian of max_points rows: mean, std, y) plus the archive's overhead.",
    )
    max_json_body_bytes: int = Field(
        default=64 << 20,
        gt=0,
        description="Largest JSON request body (bytes); JSON bodies are parsed in memory.",
    )
    max_points: int = Field(
        default=200_000_000,
        gt=0,
        description="Largest N (number of targets) per submission or benchmark.",
    )
    max_elements: int = Field(
        default=400_000_000,
        gt=0,
        description="Largest number of prediction values per submission (N×K, N×S or N×Q); "
        "keep it >= 2 × max_points.",
    )
    max_upload_bytes: int = Field(
        default=1 << 32,
        gt=0,
        description="Largest resumable upload (`POST /v1/uploads`, bytes after gzip decoding "
        "at completion as for a body); as max_body_bytes.",
    )
    upload_part_bytes: int = Field(
        default=64 << 20,
        ge=1 << 10,
        le=1 << 30,
        description="Size of each part of a resumable upload (the last may be shorter, bytes); "
        "a part is spooled to scratch_dir and stored in the blob store.",
    )
    upload_ttl_s: int = Field(
        default=86_400,
        gt=0,
        description="A resumable upload not completed within this many seconds of its "
        "creation expires and its parts are removed.",
    )
    # On by default: one runaway client (a polling loop without a pause, a retry storm) must
    # not starve the other teams. 1200 per minute (20/s on average) leaves a client polling
    # several jobs at once, or a leaderboard front end, far below it; 0 turns it off.
    rate_limit: int = Field(
        default=1200,
        ge=0,
        description="Requests per submitter key per rate-limit window (0: no limit); over it, "
        "429 with Retry-After (the seconds until the window ends). Counted in Redis, so the "
        "limit holds across API processes. Admin keys are not limited.",
    )
    rate_limit_window_s: int = Field(
        default=60, gt=0, description="Length of the fixed rate-limit window (s)."
    )
    leaderboard_rank_limit: int = Field(
        default=100,
        ge=2,
        description="Rank intervals and flags are computed for the first this many teams of a "
        "leaderboard (each needs its prediction in memory); the rest show null.",
    )
    enqueue_timeout_s: float = Field(
        default=3.0, gt=0, description="Budget for storing and enqueueing a submission (s)."
    )

    # --- jobs --------------------------------------------------------------------------------
    job_soft_time_limit_s: int = Field(default=3300, gt=0)
    job_hard_time_limit_s: int = Field(default=3600, gt=0)
    visibility_timeout_s: int = Field(
        default=4000,
        gt=0,
        description="Celery Redis visibility timeout; must exceed the hard time limit.",
    )
    max_attempts: int = Field(
        default=3, ge=1, description="Attempts per job before it is failed (worker lost, etc.)."
    )
    heartbeat_interval_s: float = Field(default=2.0, gt=0)
    heartbeat_ttl_s: float = Field(
        default=10.0, gt=0, description="A running job whose heartbeat is older is orphaned."
    )
    unclaimed_requeue_s: float = Field(
        default=60.0,
        gt=0,
        description="A job queued this long while its queue's broker list is empty lost its "
        "task message (with a consumer, or with Redis); the reaper publishes it again.",
    )
    raw_retention_s: int = Field(
        default=7 * 24 * 3600,
        ge=0,
        description="How long raw prediction arrays are kept after a job ends (results stay).",
    )
    backend: Literal["auto", "numpy", "torch", "cupy"] = Field(
        default="auto", description="Worker array backend; auto: CuPy/torch on CUDA, else numpy."
    )
    gpu_min_points: int = Field(
        default=1_000_000, gt=0, description="Batches at least this large go to the gpu queue."
    )
    worker_concurrency: int = Field(default=1, ge=1)
    split_bootstrap_min_work: int = Field(
        default=200_000_000,
        ge=1,
        description="A job whose bootstrap has N * B at least this large splits its resamples "
        "into parts that idle workers compute with it (bit-identical to one worker).",
    )
    split_bootstrap_min_idle_cores: float = Field(
        default=1.0,
        ge=0.0,
        description="A worker takes a part of another job's split bootstrap only while at least "
        "this many cores of its machine are free for it (idle, or used by the worker itself, "
        "over the last 0.1 s or since its last part): a bootstrap already runs on about 1.5 "
        "cores through its helper threads, so a second worker on the same small machine would "
        "slow it down. 0: take parts whatever the machine's load.",
    )
    job_memory_budget_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Memory one job may use (bytes). The API refuses with 422 a submission "
        "whose estimated memory exceeds it (and a benchmark whose analyses cannot fit at its "
        "N); the worker checks the estimate again and runs each job under this limit, failing "
        "a job that goes past it. Unset: derived by each process from its machine at start: "
        "half of the physical memory (or of the cgroup's memory.max when set and lower) "
        "divided by worker_concurrency, at least 256 MiB.",
    )

    # --- plots -------------------------------------------------------------------------------
    plot_timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=300,
        description="How long a plot route waits for a plot being rendered by a worker before "
        "it answers 503 with Retry-After (s).",
    )
    plot_cache_ttl_s: int = Field(
        default=7 * 24 * 3600,
        gt=0,
        description="How long rendered plots are kept in Redis (s); a plot is rendered again "
        "on the first request after that.",
    )
    plot_max_age_s: int = Field(
        default=300,
        ge=0,
        description="Cache-Control max-age of a plot answer (s); the ETag revalidates it.",
    )

    # --- notifications (webhooks, Server-Sent Events) -----------------------------------------
    # A callback URL makes the service connect where its user says: without these rules any
    # key could reach the metadata service (169.254.169.254) or the Redis next to it.
    callback_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Callback hosts allowed even where they resolve to a private, loopback, "
        "link-local, multicast or reserved address: host names, IP addresses or CIDR networks "
        '(JSON list, e.g. ["hooks.internal", "10.0.0.0/8"]); default: none.',
    )
    callback_allow_public: bool = Field(
        default=True,
        description="Callbacks to any public address are allowed; false: only the hosts of "
        "callback_allowed_hosts.",
    )
    callback_timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Timeout of one webhook delivery attempt (s)."
    )
    callback_retry_s: float = Field(
        default=3600.0,
        gt=0,
        description="A webhook delivery that has not succeeded is retried, with exponential "
        "backoff, until this long after it was first attempted (s); then it is given up.",
    )
    callback_backoff_s: float = Field(
        default=10.0,
        gt=0,
        description="Wait before the first retry of a failed webhook delivery (s); each later "
        "wait doubles, up to 15 minutes.",
    )
    events_max_duration_s: float = Field(
        default=600.0,
        gt=0,
        description="Longest life of one Server-Sent Events stream "
        "(`GET /v1/submissions/{id}/events`, s); the client reconnects to follow on.",
    )
    events_keepalive_s: float = Field(
        default=15.0,
        gt=0,
        description="A Server-Sent Events stream sends a comment line after this long without "
        "an event (s), so that proxies keep the connection open.",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()
