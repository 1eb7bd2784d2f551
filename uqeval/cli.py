"""The ``uqeval`` command line: ``serve`` (everything on localhost), ``worker`` and ``api``.

``uqeval serve`` is the embedded default: it starts a Redis server it manages itself (unless
``REDIS_URL`` is set), ``--workers`` Celery worker processes and the API (uvicorn, in
``--api-workers`` processes), prints the URL, the docs URL and the admin key, and on Ctrl-C or
SIGTERM stops the API, then the workers (warm shutdown: a running job finishes or is
re-queued), then Redis — leaving no process behind. Each child runs in its own process group
(so a terminal's Ctrl-C reaches only this supervisor, which stops them in order) and, on
Linux, is also sent SIGTERM should the supervisor itself be killed.

With several API processes (``--api-workers`` / ``UQEVAL_API_WORKERS`` above 1, for ``serve``
and ``api``) uvicorn runs that many worker processes on the one port, and the command gives
them a fresh ``PROMETHEUS_MULTIPROC_DIR`` (removed when it stops) so that ``GET /metrics``
sums the request metrics of all of them (:mod:`service.api.observability`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import FrameType
from typing import Any

import uqcore
from service.redis_server import ManagedRedis, die_with_parent, free_port
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


def _spawn(args: list[str], env: dict[str, str], log: Path | None) -> subprocess.Popen[bytes]:
    out: Any = subprocess.DEVNULL if log is None else log.open("ab")
    try:
        return subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out if log is not None else None,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    finally:
        if log is not None:
            out.close()


def _stop(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``timeout_s``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything the child left in its group


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


def _wait_http(url: str, procs: list[subprocess.Popen[bytes]], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            return False
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


class _Stop(Exception):
    pass


def serve(args: argparse.Namespace) -> int:
    """Run Redis (managed unless REDIS_URL), the workers and the API until Ctrl-C/SIGTERM."""
    overrides: dict[str, Any] = {}
    if args.host is not None:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    if args.data_dir is not None:
        overrides["data_dir"] = Path(args.data_dir)
    if args.api_workers is not None:
        overrides["api_workers"] = args.api_workers
    settings = Settings(**overrides)
    if settings.port == 0:
        settings = settings.model_copy(update={"port": free_port(settings.host)})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.data_dir / "logs"
    logs.mkdir(exist_ok=True)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    redis_server: ManagedRedis | None = None
    workers: list[subprocess.Popen[bytes]] = []
    api: subprocess.Popen[bytes] | None = None
    code = 0
    stack = contextlib.ExitStack()
    try:
        if settings.redis_url:
            redis_url = settings.redis_url
        else:
            redis_server = ManagedRedis(settings.data_dir / "redis").start()
            redis_url = redis_server.url
        env = _child_env(settings, redis_url)
        admin = _admin_key(settings, redis_url)
        for i in range(args.workers):
            workers.append(
                _spawn(
                    [sys.executable, "-m", "uqeval", "worker", "--name", f"w{i + 1}"],
                    env,
                    logs / f"worker-{i + 1}.log",
                )
            )
        api_env = dict(env)
        stack.enter_context(_metrics_dir(settings.api_workers, api_env))
        api_cmd = [
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
            api_cmd += ["--workers", str(settings.api_workers)]
        api = _spawn(api_cmd, api_env, logs / "api.log")
        base = f"http://{settings.host}:{settings.port}"
        if not _wait_http(f"{base}/healthz", [api, *workers], 60.0):
            print(f"uqeval: the API did not start; see {logs}", file=sys.stderr)
            return 1
        # Ready = Redis reachable and a worker announced: jobs submitted now run at once.
        if not _wait_http(f"{base}/readyz", [api, *workers], 60.0):
            print(f"uqeval: no worker is ready yet; see {logs}", file=sys.stderr, flush=True)
        print(f"uq-eval is running at {base}", flush=True)
        print(f"API docs:   {base}/docs", flush=True)
        print(f"Admin key:  {admin}", flush=True)
        print(f"Redis:      {redis_url}{'  (managed)' if redis_server else ''}", flush=True)
        print(f"Logs:       {logs}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        while True:
            for proc in [api, *workers]:
                if proc.poll() is not None:
                    print(
                        f"uqeval: a child process exited (code {proc.returncode}); stopping. "
                        f"See {logs}",
                        file=sys.stderr,
                    )
                    code = 1
                    raise _Stop
            time.sleep(0.5)
    except _Stop:
        pass
    finally:
        # Ignore further signals while stopping in order: API, workers, Redis.
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        print("uqeval: stopping ...", file=sys.stderr, flush=True)
        if api is not None:
            _stop(api, 10.0)
        stack.close()  # the API's metrics directory, once no API process writes to it
        for proc in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in workers:
            _stop(proc, 30.0)
        if redis_server is not None:
            redis_server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
        print("uqeval: stopped.", file=sys.stderr, flush=True)
    return code


def run_worker(args: argparse.Namespace) -> int:
    """A Celery worker; queues ``cpu`` (+ ``gpu`` when the backend found a GPU)."""
    from service.settings import get_settings
    from worker.backend import select_backend

    settings = get_settings()
    if not settings.redis_url:
        print("uqeval worker: set REDIS_URL", file=sys.stderr)
        return 2
    backend = select_backend(settings.backend)
    queues = args.queues or ("cpu,gpu" if backend.gpu else "cpu")
    concurrency = args.concurrency or settings.worker_concurrency
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
        args.loglevel,
    ]
    if args.name:
        argv += ["-n", f"{args.name}@%h"]
    app.worker_main(argv)
    return 0


def run_api(args: argparse.Namespace) -> int:
    """The API alone (uvicorn), for deployments where Redis and workers run elsewhere."""
    import uvicorn

    from service.settings import get_settings

    settings = get_settings()
    workers = args.api_workers if args.api_workers is not None else settings.api_workers
    # uvicorn's worker processes inherit this process's environment.
    with _metrics_dir(workers, os.environ):
        uvicorn.run(
            "service.api.app:create_app",
            factory=True,
            host=args.host or settings.host,
            port=args.port if args.port is not None else settings.port,
            proxy_headers=True,
            workers=workers,
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="uqeval", description="uq-eval command line.")
    parser.add_argument("--version", action="store_true", help="print the uqcore version")
    sub = parser.add_subparsers(dest="command")

    p = sub.add_parser(
        "serve",
        help="run Redis (managed), workers and the API on this machine",
        description="Start everything on localhost; Ctrl-C or SIGTERM stops all of it.",
    )
    p.add_argument("--host", help="API host (default UQEVAL_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="API port (default UQEVAL_PORT or 8000; 0 = free)")
    p.add_argument("--data-dir", help="Redis data and logs (default UQEVAL_DATA_DIR or .uqeval)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--api-workers",
        type=int,
        help="API processes (default UQEVAL_API_WORKERS or 1); each uses one core at most",
    )
    p.set_defaults(func=serve)

    w = sub.add_parser("worker", help="run one Celery worker (needs REDIS_URL)")
    w.add_argument("--queues", help="comma-separated queues (default: cpu, plus gpu on a GPU)")
    w.add_argument("--concurrency", type=int, help="processes (default UQEVAL_WORKER_CONCURRENCY)")
    w.add_argument("--name", help="worker name (default: celery's)")
    w.add_argument("--loglevel", default="INFO")
    w.set_defaults(func=run_worker)

    a = sub.add_parser("api", help="run the API only (needs REDIS_URL)")
    a.add_argument("--host")
    a.add_argument("--port", type=int)
    a.add_argument(
        "--api-workers", type=int, help="API processes (default UQEVAL_API_WORKERS or 1)"
    )
    a.set_defaults(func=run_api)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(uqcore.__version__)
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    if getattr(args, "workers", 1) < 1:
        parser.error("--workers must be >= 1")
    if getattr(args, "api_workers", None) is not None and args.api_workers < 1:
        parser.error("--api-workers must be >= 1")
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
