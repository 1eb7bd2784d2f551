"""The running stack for tests: a real Redis server and a real Celery worker (never eager mode).

Loaded for every test directory as a plugin of the root ``tests/conftest.py`` (the service,
worker, reliability and command-line tests share it). Session-scoped per pytest process, so every pytest-xdist worker runs its own server (free port,
own data directory) and its own Celery worker subprocess: nothing is shared between them.
Workers start as ``python -m celery ...`` forked from the pre-warmed interpreter of
:mod:`tests.zygote` (a fresh interpreter where that could change what the worker does).
``store`` removes every ``uqeval:`` key after each test (Celery's own keys stay, so the
session worker keeps its queues).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service import keys
from service.redis_server import ManagedRedis, free_port
from service.settings import Settings
from service.store import Store
from tests import zygote

ROOT = Path(__file__).resolve().parents[1]

#: Short heartbeats so that orphaned jobs are detected within seconds in the tests.
TEST_SETTINGS: dict[str, Any] = {
    "admin_key": "test-admin-key",
    "heartbeat_interval_s": 0.2,
    "heartbeat_ttl_s": 2.0,
    "max_attempts": 3,
    "raw_retention_s": 600,
    "backend": "numpy",
    # test processes start many apps; one test covers the default (on)
    "gc_freeze": False,
    # webhook receivers of the tests listen on loopback; their retries come quickly
    "callback_allowed_hosts": ["127.0.0.1"],
    "callback_backoff_s": 0.2,
}


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a subprocess (worker, CLI) the same ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.pop("REDIS_URL", None)
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if name == "redis_url":
            env["REDIS_URL"] = str(value)
        elif isinstance(value, list | dict):  # pydantic-settings reads these as JSON
            env[f"UQEVAL_{name.upper()}"] = json.dumps(value)
        else:
            env[f"UQEVAL_{name.upper()}"] = str(value)
    env["PYTHONPATH"] = str(ROOT)
    return env


@enum.unique
class Db(enum.IntEnum):
    """The databases of each test process's Redis server, one user each (``enum.unique``
    refuses a number given twice at import).

    A session's or module's stack keeps its worker on its database for the rest of the
    process: a test that shared that database had its jobs taken by that worker (the UI
    site's worker once ran the memory-budget test's job, without the budget, to success).
    Tests of one module on one database run one after another in their process."""

    #: The session's Celery worker and API servers (``settings``, ``api``).
    SESSION = 0
    #: ``test_compose``: the workers' health check, with a heartbeat written by hand.
    COMPOSE = 1
    #: The blob store's tests (``tests/blobs``' ``bstore``): no worker sweeps their manifests.
    BLOBS = 2
    #: ``test_worker``: the killed worker whose job another worker re-queues.
    RESCUE = 3
    #: ``test_worker``: the announced GPU worker, alone on its database.
    GPU_ROUTE = 4
    #: ``test_worker``: a job run in the test process itself.
    IN_PROCESS = 5
    #: ``test_worker``: the heartbeat's finalizer, with no worker.
    HEARTBEAT = 6
    #: The UI tests' site: its worker and API for the whole session.
    UI = 7
    #: ``test_worker``: the prefork pool's killed child.
    PREFORK = 8
    #: The idle apps (``idle_settings``): jobs stay queued, no worker consumes them.
    IDLE = 9
    #: ``test_store``: a store without any worker (none sweeps its orphans).
    STORE = 10
    #: The schemathesis module's live API (no worker).
    SCHEMATHESIS = 11
    #: The worker's memory budget tests: their own workers with a small budget.
    MEMORY_BUDGET = 12
    #: The split bootstrap's workers.
    SPLIT = 13
    #: The large batches' workers.
    LARGE = 14
    #: /readyz's supervision state, with no worker.
    READYZ = 15


def db_url(url: str, db: int) -> str:
    """``url`` (``redis://host:port[/n]``) on database ``db`` of the same server."""
    base = url.rsplit("/", 1)[0] if url.count("/") > 2 else url
    return f"{base}/{db}"


def clear_store(store: Store, *, admin: bool = True) -> None:
    """Delete every ``uqeval:`` key except the live-worker registry; with ``admin``, register
    the test admin key again (``admin=False``: an empty store, for tests of the keys)."""
    keep = {keys.workers().encode()}
    worker_prefix = keys.worker("").encode()
    batch = [
        k
        for k in store.client.scan_iter(match=keys.PREFIX + "*", count=1000)
        if k not in keep and not k.startswith(worker_prefix)
    ]
    for i in range(0, len(batch), 500):
        store.client.delete(*batch[i : i + 500])
    # The session's API servers registered the test admin key once, at their start: register
    # it again, else a later test (any order under xdist) finds it unknown.
    if admin:
        store.ensure_admin_key(str(TEST_SETTINGS["admin_key"]))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ManagedRedis on a free port in a temporary directory; yields its URL."""
    server = ManagedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def session_settings(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    # The arrays of this process' tests (and of its worker and API subprocesses) in one
    # temporary directory, never under the repository.
    data = tmp_path_factory.mktemp("data")
    return Settings(
        redis_url=redis_server,
        blob_url=str(data / "blobs"),
        scratch_dir=data / "scratch",
        **TEST_SETTINGS,
    )


#: Credentials of the test S3 server (it accepts any); the region boto3 needs.
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "uqeval-test",
    "AWS_SECRET_ACCESS_KEY": "uqeval-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
S3_BUCKET = "uqeval-test"


class S3Server:
    """moto's S3-compatible server as a subprocess on a loopback port, in its own process
    group (:mod:`tests.s3server`: a server stopped and started again, an outage, still holds
    what was written before)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.recording = workdir / "recording.jsonl"
        self.log_path = workdir / "moto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _get(self, path: str) -> int:
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return int(resp.status)

    def start(self, timeout_s: float = 60.0) -> S3Server:
        log = self.log_path.open("ab")
        env = {
            **os.environ,
            **S3_ENV,
            "MOTO_ENABLE_RECORDING": "1",
            "MOTO_RECORDER_FILEPATH": str(self.recording),
        }
        env["PYTHONPATH"] = str(ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.s3server", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto exited: {self.log_path.read_text()[-3000:]}")
            try:
                self._get("/moto-api/data.json")
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    tail = self.log_path.read_text()[-3000:]
                    raise RuntimeError(f"moto did not start: {tail}") from exc
                time.sleep(0.1)
        return self

    def stop(self) -> None:
        """Kill the server (an outage: connections are refused until :meth:`start`)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server process on loopback, with the bucket ``S3_BUCKET``; the
    test process (and the subprocesses it starts) get its credentials."""
    for name, value in S3_ENV.items():
        os.environ[name] = value
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    from service.blobs.s3 import S3BlobStore

    S3BlobStore(S3_BUCKET, endpoint_url=server.url).create_bucket()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def settings(session_settings: Settings) -> Settings:
    """Settings on the test Redis, with the test admin key and short heartbeats."""
    return session_settings.model_copy()


@pytest.fixture
def store(session_settings: Settings) -> Iterator[Store]:
    """A Store on the test Redis; the ``uqeval:`` data is removed after each test."""
    assert session_settings.redis_url is not None
    s = Store.from_url(session_settings.redis_url, session_settings)
    try:
        yield s
    finally:
        clear_store(s)
        s.close()


class WorkerProcess:
    """A ``celery -A worker.celery_app worker`` subprocess in its own process group."""

    def __init__(
        self,
        settings: Settings,
        name: str,
        log_path: Path,
        pool: str = "solo",
        *,
        module: str = "celery",
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.name = name
        self.log_path = log_path
        self.pool = pool
        #: ``python -m <module>`` runs the worker (a wrapper of celery's command line)
        self.module = module
        #: variables added to the environment of ``settings``
        self.env = dict(env or {})
        #: forked from the pre-warmed interpreter (:mod:`tests.zygote`) where it can be
        self.proc: subprocess.Popen[bytes] | zygote.ForkedProcess | None = None

    def start(self, store: Store, timeout_s: float = 30.0) -> WorkerProcess:
        self.proc = zygote.popen(
            [
                sys.executable,
                "-m",
                self.module,
                "-A",
                "worker.celery_app",
                "worker",
                "-Q",
                "cpu,gpu",
                "--pool",
                self.pool,
                "--concurrency",
                "1",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
                "-n",
                f"{self.name}@%h",
            ],
            cwd=ROOT,
            env={**settings_env(self.settings), **self.env},
            log=self.log_path,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()[-3000:]}")
            if any(w.startswith(self.name + "@") for w in store.live_workers()):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"worker did not register: {self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group (the worker vanishes mid-job)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 15.0) -> None:
        """Warm shutdown (SIGTERM), SIGKILL of the group after ``timeout_s``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        # Nothing of the group may survive the leader.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def worker(
    session_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    """A real Celery worker subprocess (solo pool) consuming ``cpu`` and ``gpu``."""
    assert session_settings.redis_url is not None
    store = Store.from_url(session_settings.redis_url, session_settings)
    xdist = os.environ.get("PYTEST_XDIST_WORKER", "main")
    proc = WorkerProcess(
        session_settings,
        f"test-{xdist}-{os.getpid()}",
        tmp_path_factory.mktemp("worker") / "worker.log",
    )
    proc.start(store)
    try:
        yield proc
    finally:
        proc.stop()
        store.close()
