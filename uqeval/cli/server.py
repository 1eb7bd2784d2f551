"""The server commands of ``uqeval``: ``serve`` (everything on localhost), ``worker`` and ``api``.

``uqeval serve`` is the embedded default: it starts a Redis server it manages itself (unless
``REDIS_URL`` is set), ``--workers`` Celery worker processes and the API (uvicorn, in
``--api-workers`` processes), prints the URL, the docs URL and the admin key, and on Ctrl-C or
SIGTERM stops the API, then the workers (warm shutdown: a running job finishes or is
re-queued), then Redis — leaving no process behind. Each child runs in its own process group
(so a terminal's Ctrl-C reaches only this supervisor, which stops them in order) and, on
Linux, is also sent SIGTERM should the supervisor itself be killed. A child that dies meanwhile
is restarted with backoff, and ``/readyz`` names it until it is back
(:mod:`uqeval.cli.supervisor`).

With several API processes (``--api-workers`` / ``UQEVAL_API_WORKERS`` above 1, for ``serve``
and ``api``) uvicorn runs that many worker processes on the one port, and the command gives
them a fresh ``PROMETHEUS_MULTIPROC_DIR`` (removed when it stops) so that ``GET /metrics``
sums the request metrics of all of them (:mod:`service.api.observability`).

The service's modules (settings, Redis, Celery, uvicorn) are imported inside the commands, so
that the user commands of the same program never load them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from service.settings import Settings

ADMIN_KEY_FILE = "admin-key.txt"


def _child_env(settings: Settings, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["REDIS_URL"] = redis_url
    env.pop("UQEVAL_REDIS_URL", None)
    env["UQEVAL_HOST"] = settings.host
    env["UQEVAL_PORT"] = str(settings.port)
    env["UQEVAL_DATA_DIR"] = str(settings.data_dir)
    if settings.admin_key:
        env["UQEVAL_ADMIN_KEY"] = settings.admin_key
    return env


#: The variable that puts prometheus_client in multiprocess mode (and names its directory).
METRICS_DIR_VAR = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def _metrics_dir(api_workers: int, env: MutableMapping[str, str]) -> Iterator[None]:
    """Set ``PROMETHEUS_MULTIPROC_DIR`` in ``env`` for ``api_workers`` API processes: a fresh
    directory, removed on exit (counts of an earlier run must not add up with this one's);
    for one process, unset (each process its own registry)."""
    env.pop(METRICS_DIR_VAR, None)
    if api_workers <= 1:
        yield
        return
    path = tempfile.mkdtemp(prefix="uqeval-metrics-")
    env[METRICS_DIR_VAR] = path
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _admin_key(settings: Settings, redis_url: str) -> str:
    """The admin key to print: from the environment, generated now, or generated before."""
    from service.store import Store

    store = Store.from_url(redis_url, settings)
    try:
        generated = store.ensure_admin_key(settings.admin_key)
    finally:
        store.close()
    if settings.admin_key:
        return f"{settings.admin_key}  (from UQEVAL_ADMIN_KEY)"
    key_file = settings.data_dir / ADMIN_KEY_FILE
    if generated:
        key_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(generated + "\n")
        return f"{generated}  (generated; also saved to {key_file})"
    if key_file.is_file():
        return f"{key_file.read_text().strip()}  (generated at first start; {key_file})"
    return "generated at an earlier start and printed then (set UQEVAL_ADMIN_KEY to choose one)"


def _settings(
    host: str | None, port: int | None, data_dir: str | None, api_workers: int | None
) -> Settings:
    from service.redis_server import free_port
    from service.settings import Settings

    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if data_dir is not None:
        overrides["data_dir"] = Path(data_dir)
    if api_workers is not None:
        overrides["api_workers"] = api_workers
    settings = Settings(**overrides)
    if settings.port == 0:
        settings = settings.model_copy(update={"port": free_port(settings.host)})
    return settings


def _api_command(settings: Settings) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "service.api.app:create_app",
        "--factory",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--no-access-log",
    ]
    if settings.api_workers > 1:
        cmd += ["--workers", str(settings.api_workers)]
    return cmd


class _Stop(Exception):
    pass


def run_serve(
    host: str | None, port: int | None, data_dir: str | None, workers: int, api_workers: int | None
) -> int:
    """Run Redis (managed unless REDIS_URL), the workers and the API until Ctrl-C/SIGTERM,
    restarting any of them that dies (:mod:`uqeval.cli.supervisor`)."""
    from service.redis_server import ManagedRedis
    from service.store import Store
    from service.supervision import STATE_FILE_NAME
    from uqeval.cli.supervisor import (
        Child,
        ProcessChild,
        RedisChild,
        Supervisor,
        SupervisorLog,
        http_ok,
        worker_announced,
    )

    settings = _settings(host, port, data_dir, api_workers)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.data_dir / "logs"
    logs.mkdir(exist_ok=True)
    state_path = (settings.data_dir / STATE_FILE_NAME).resolve()
    base = f"http://{settings.host}:{settings.port}"

    redis_server: ManagedRedis | None = None
    probe_store: Store | None = None
    supervisor: Supervisor | None = None
    code = 0
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if supervisor is not None:
            supervisor.request_stop()
        else:  # still starting Redis: nothing to supervise yet
            raise _Stop

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    stack = contextlib.ExitStack()
    try:
        children: list[Child] = []
        if settings.redis_url:
            redis_url = settings.redis_url
        else:
            redis_server = ManagedRedis(settings.data_dir / "redis")
            children.append(RedisChild(redis_server))
            redis_server.start()
            redis_url = redis_server.url
        env = _child_env(settings, redis_url)
        env["UQEVAL_SUPERVISOR_STATE_FILE"] = str(state_path)
        # Short timeouts: a probe must not hold up the supervision of the other children.
        probe_store = Store.from_url(
            redis_url, settings.model_copy(update={"redis_socket_timeout_s": 0.5})
        )
        for i in range(workers):
            children.append(
                ProcessChild(
                    f"worker-{i + 1}",
                    "worker",
                    [sys.executable, "-m", "uqeval", "worker", "--name", f"w{i + 1}"],
                    env,
                    logs / f"worker-{i + 1}.log",
                    worker_announced(probe_store),
                    stop_timeout_s=30.0,
                )
            )
        api_env = dict(env)
        stack.enter_context(_metrics_dir(settings.api_workers, api_env))
        api = ProcessChild(
            "api",
            "api",
            _api_command(settings),
            api_env,
            logs / "api.log",
            lambda pid: http_ok(f"{base}/healthz", 0.5),
            stop_timeout_s=10.0,
        )
        children.append(api)
        supervisor = Supervisor(children, SupervisorLog(logs / "supervisor.log"), state_path)
        if stopping:
            raise _Stop
        supervisor.write_state()
        admin = _admin_key(settings, redis_url)
        for child in children:  # Redis runs already (its launch keeps it)
            supervisor.start(child)
        # An API that dies before it ever answered (a port in use, say) is not restarted.
        up = supervisor.wait_until(
            lambda: supervisor.has_died(api) or http_ok(f"{base}/healthz"), 60.0
        )
        if supervisor.stopping:
            raise _Stop
        if not up or supervisor.has_died(api):
            print(f"uqeval: the API did not start; see {logs}", file=sys.stderr)
            code = 1
            raise _Stop
        # Ready = Redis reachable and a worker announced: jobs submitted now run at once.
        if not supervisor.wait_until(lambda: http_ok(f"{base}/readyz"), 60.0):
            if supervisor.stopping:
                raise _Stop
            print(f"uqeval: no worker is ready yet; see {logs}", file=sys.stderr, flush=True)
        print(f"uq-eval is running at {base}", flush=True)
        print(f"API docs:   {base}/docs", flush=True)
        print(f"Admin key:  {admin}", flush=True)
        print(f"Redis:      {redis_url}{'  (managed)' if redis_server else ''}", flush=True)
        print(f"Logs:       {logs}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        supervisor.run()
    except _Stop:
        pass
    finally:
        print("uqeval: stopping ...", file=sys.stderr, flush=True)
        if supervisor is not None:
            supervisor.stop()  # the API, the workers, Redis
        elif redis_server is not None:
            redis_server.stop()
        stack.close()  # the API's metrics directory, once no API process writes to it
        if probe_store is not None:
            probe_store.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
        print("uqeval: stopped.", file=sys.stderr, flush=True)
    return code


def run_worker(queues: str | None, concurrency: int | None, name: str | None, loglevel: str) -> int:
    """A Celery worker; queues ``cpu`` (+ ``gpu`` when the backend found a GPU)."""
    from service.settings import get_settings
    from worker.backend import select_backend

    settings = get_settings()
    if not settings.redis_url:
        print("uqeval worker: set REDIS_URL", file=sys.stderr)
        return 2
    backend = select_backend(settings.backend)
    queues = queues or ("cpu,gpu" if backend.gpu else "cpu")
    concurrency = concurrency or settings.worker_concurrency
    from worker.celery_app import app

    argv = [
        "worker",
        "-Q",
        queues,
        "--concurrency",
        str(concurrency),
        "--pool",
        "solo" if concurrency == 1 else "prefork",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        loglevel,
    ]
    if name:
        argv += ["-n", f"{name}@%h"]
    app.worker_main(argv)
    return 0


def run_api(host: str | None, port: int | None, api_workers: int | None) -> int:
    """The API alone (uvicorn), for deployments where Redis and workers run elsewhere."""
    import uvicorn

    from service.settings import get_settings

    settings = get_settings()
    workers = api_workers if api_workers is not None else settings.api_workers
    # uvicorn's worker processes inherit this process's environment.
    with _metrics_dir(workers, os.environ):
        uvicorn.run(
            "service.api.app:create_app",
            factory=True,
            host=host or settings.host,
            port=port if port is not None else settings.port,
            proxy_headers=True,
            workers=workers,
        )
    return 0


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def serve(
    host: Annotated[
        str | None, typer.Option(help="API host (default UQEVAL_HOST or 127.0.0.1)")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="API port (default UQEVAL_PORT or 8000; 0 = free)")
    ] = None,
    data_dir: Annotated[
        str | None, typer.Option(help="Redis data and logs (default UQEVAL_DATA_DIR or .uqeval)")
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="worker processes")] = 1,
    api_workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="API processes (default UQEVAL_API_WORKERS or 1); each uses one core at most",
        ),
    ] = None,
) -> None:
    """Run Redis (managed), workers and the API on this machine; Ctrl-C or SIGTERM stops all
    of it."""
    _exit(run_serve(host, port, data_dir, workers, api_workers))


def worker(
    queues: Annotated[
        str | None, typer.Option(help="comma-separated queues (default: cpu, plus gpu on a GPU)")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="processes (default UQEVAL_WORKER_CONCURRENCY)")
    ] = None,
    name: Annotated[str | None, typer.Option(help="worker name (default: celery's)")] = None,
    loglevel: Annotated[str, typer.Option(help="log level")] = "INFO",
) -> None:
    """Run one Celery worker (needs REDIS_URL)."""
    _exit(run_worker(queues, concurrency, name, loglevel))


def api(
    host: Annotated[str | None, typer.Option(help="API host (default UQEVAL_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="API port (default UQEVAL_PORT)")] = None,
    api_workers: Annotated[
        int | None, typer.Option(min=1, help="API processes (default UQEVAL_API_WORKERS or 1)")
    ] = None,
) -> None:
    """Run the API only (needs REDIS_URL)."""
    _exit(run_api(host, port, api_workers))


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``worker`` and ``api`` to ``app``."""
    panel = "Run the service"
    app.command(rich_help_panel=panel)(serve)
    app.command(rich_help_panel=panel)(worker)
    app.command(rich_help_panel=panel)(api)
