"""A pre-warmed Python that starts the suite's workers and API servers by forking.

The service tests start real Celery workers and real uvicorn servers as separate processes, a
hundred or more times per run, and a fresh interpreter spends 3-5 s of CPU on each before it
serves anything: importing numpy, scipy, numba and uqcore's cached kernels, Celery, FastAPI.
This module keeps one interpreter per test process (started on first use) that has done those
imports once; it forks a child for each ``python -m <module> <args>`` the tests ask for, and the
child runs that module as its ``__main__`` exactly as ``python -m`` would, with the requested
environment, working directory and log file, in a session of its own. The child is the real
program (the Celery worker with its own pool, uvicorn serving the app): only the imports of
third-party packages and of uqcore are inherited rather than repeated. The project's own
``service``, ``worker`` and ``uqeval`` modules, which read their settings when imported, are
imported by the child.

:func:`popen` is the one entry: it returns a :class:`ForkedProcess` (``pid``, ``poll``,
``wait``, ``returncode``, ``send_signal``, ``terminate``, ``kill``, as
:class:`subprocess.Popen`) or, whenever forking could change what the child does, a plain
:class:`subprocess.Popen`: a command that is not ``python -m``, an environment that differs
from the pre-warmed interpreter's in anything read at import (only ``UQEVAL_*``, ``AWS_*``,
``PYTEST_*``, ``REDIS_URL`` and ``PATH`` may differ), or ``TESTS_PREWARMED=0``. The tests that
are about a process's start itself (``tests/service/test_start_imports.py``, ``uqeval serve``
and the command line) start fresh interpreters as before.

Run as ``python -m tests.zygote SOCKET``, this module is the pre-warmed interpreter: it
answers on the Unix socket ``SOCKET`` one JSON request per connection (``spawn``, ``status``),
reaps its children, and ends, killing the process groups of those still running, when the
test process that started it goes away or asks it to (``stop``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Imported (and uqcore's kernels loaded) once, before any fork: what a worker and the API import
#: at their start, without the project's modules that read settings when imported.
PRELOAD = (
    "numpy",
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
    "numba",
    "uqcore",
    "uqcore.plots",
    "redis",
    "kombu.transport.redis",
    "billiard",
    "celery",
    "celery.bin.celery",
    "celery.apps.worker",
    "celery.worker",
    "pydantic",
    "pydantic_settings",
    "httpx",
    "anyio",
    "starlette",
    "fastapi",
    "uvicorn",
    "uvicorn.main",
    "jinja2",
    "yaml",
    "typer",
    "rich",
)

#: Environment variables whose value may differ between the pre-warmed interpreter and a child:
#: nothing imported before the fork reads them.
#: (``KMP_DUPLICATE_LIB_OK`` and ``KMP_INIT_AT_FORK`` are set by ``import sklearn`` in the test
#: process; they are read by Intel's OpenMP runtime, which nothing here loads.)
FREE_PREFIXES = ("UQEVAL_", "AWS_", "PYTEST_")
FREE_KEYS = frozenset({"REDIS_URL", "PATH", "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK"})

#: ``TESTS_PREWARMED=0`` turns this off: every process starts as a fresh interpreter.
ENABLED = os.environ.get("TESTS_PREWARMED", "1") != "0"

#: The test process's environment when this module is imported (as the suite loads, before
#: any test can change it): the pre-warmed interpreter's, whichever test starts it.
BASE_ENV = dict(os.environ)


# ------------------------------------------------------------------------------------------
# the pre-warmed interpreter
# ------------------------------------------------------------------------------------------


def _read_line(conn: socket.socket) -> bytes:
    """One newline-terminated message (less if the peer closes first)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # What a worker loads before its pool forks (worker.runtime.warm_kernels), less the
    # timing of the value sorts, which reads the environment.
    with contextlib.suppress(Exception):
        from uqcore._binomial import _scipy_routines
        from uqcore._compiled import kernels
        from uqcore._kolmogorov import _scipy_kolmogn

        kernels()
        _scipy_routines()
        _scipy_kolmogn()


def _run_child(request: dict[str, Any]) -> int:
    """In the forked child: become ``python -m <module> <args>`` and return its exit code."""
    import runpy

    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    # A fresh interpreter's global numpy generator is seeded from the OS, not the parent's.
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed()  # noqa: NPY002 (the legacy global generator is what is reseeded)
    sys.path[0] = request["cwd"]
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    return code


def serve(path: str) -> None:
    """The pre-warmed interpreter's loop (``python -m tests.zygote SOCKET``)."""
    parent = os.getppid()
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # the socket appears once it accepts
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    #: pid -> exit code (None while running), as Popen's returncode
    children: dict[int, int | None] = {}

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children[pid] = os.waitstatus_to_exitcode(status)

    def handle(request: dict[str, Any], conn: socket.socket) -> dict[str, Any]:
        op = request.get("op")
        if op == "status":
            reap()
            pid = int(request["pid"])
            return {"known": pid in children, "returncode": children.get(pid)}
        if op == "spawn":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    conn.close()
                    listener.close()
                    code = _run_child(request)
                finally:
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
                        sys.stderr.flush()
                    os._exit(code)
            children[pid] = None
            return {"pid": pid}
        return {"error": f"unknown op {op!r}"}

    stopping = False
    try:
        while not stopping and os.getppid() == parent:
            readable, _, _ = select.select([listener.fileno(), wake_r], [], [], 1.0)
            if wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
            reap()
            if listener.fileno() not in readable:
                continue
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10.0)
                try:
                    data = _read_line(conn)
                except OSError:  # a client gone mid-request: the next one
                    continue
                if not data:
                    continue
                request = json.loads(data)
                if request.get("op") == "stop":
                    stopping = True
                    reply: dict[str, Any] = {"stopped": True}
                else:
                    try:
                        reply = handle(request, conn)
                    except Exception as exc:  # an error reaches the test, not a dead server
                        reply = {"error": f"{type(exc).__name__}: {exc}"}
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps(reply).encode() + b"\n")
    finally:
        # Nothing it started outlives it: the groups of the children still running are killed.
        reap()
        running = [pid for pid, code in children.items() if code is None]
        for pid in running:
            # Its group (what it started), and itself: a child that has not yet made its
            # session (just forked) has no group of its number.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in running:  # gone (reaped) before this process is
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)


# ------------------------------------------------------------------------------------------
# the test process's side
# ------------------------------------------------------------------------------------------


class ZygoteError(RuntimeError):
    """The pre-warmed interpreter refused a request or is gone."""


class Zygote:
    """The pre-warmed interpreter of this test process (a child in a session of its own)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="uqeval-prewarmed-"))
        self.socket = str(self.dir / "socket")
        self.env = {**BASE_ENV, "PYTHONPATH": str(ROOT)}
        #: the variables that made a child start as a fresh interpreter, per refusal
        self.refused: list[list[str]] = []
        self.owner = os.getpid()
        log = (self.dir / "zygote.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote", self.socket],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 120.0
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise ZygoteError(f"the pre-warmed interpreter did not start: {self.log_tail()}")
            time.sleep(0.05)
        self.lock = threading.Lock()

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / "zygote.log").read_text(errors="replace")[-3000:]
        return ""

    def request(self, **request: Any) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30.0)
            try:
                conn.connect(self.socket)
                conn.sendall(json.dumps(request).encode() + b"\n")
                data = _read_line(conn)
            except OSError as exc:
                raise ZygoteError(f"the pre-warmed interpreter is gone: {exc}") from exc
        if not data:
            raise ZygoteError(f"the pre-warmed interpreter did not answer: {self.log_tail()}")
        reply: dict[str, Any] = json.loads(data)
        if "error" in reply:
            raise ZygoteError(reply["error"])
        return reply

    def accepts(self, env: dict[str, str]) -> bool:
        """Whether a child with ``env`` behaves as a fresh interpreter with ``env`` would."""
        changed = sorted(
            key
            for key in self.env.keys() | env.keys()
            if self.env.get(key) != env.get(key)
            and key not in FREE_KEYS
            and not key.startswith(FREE_PREFIXES)
        )
        if changed:
            self.refused.append(changed)
        return not changed

    def spawn(
        self, module: str, args: list[str], *, cwd: Path, env: dict[str, str], log: Path
    ) -> ForkedProcess:
        reply = self.request(
            op="spawn", module=module, args=args, cwd=str(cwd), env=env, log=str(log)
        )
        return ForkedProcess(self, int(reply["pid"]), [sys.executable, "-m", module, *args])

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ZygoteError, OSError):
                self.request(op="stop")
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class ForkedProcess:
    """A child of the pre-warmed interpreter, with the part of :class:`subprocess.Popen`'s
    interface the tests use; ``returncode`` is negative for a signal, as Popen's."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self.zygote = zygote
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        if state not in ("Z", "X", "gone"):
            return None
        # Exited: its exit code, once the pre-warmed interpreter has reaped it.
        deadline = time.monotonic() + 10.0
        while True:
            reply = self.zygote.request(op="status", pid=self.pid)
            if reply["returncode"] is not None:
                self.returncode = int(reply["returncode"])
                return self.returncode
            if time.monotonic() > deadline:
                raise ZygoteError(f"process {self.pid} exited but was never reaped")
            time.sleep(0.01)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_shared: Zygote | None = None
_shared_lock = threading.Lock()


def shared() -> Zygote | None:
    """This test process's pre-warmed interpreter, started at the first call (``None`` when
    turned off or when it cannot start: the callers then start fresh interpreters)."""
    global _shared, ENABLED
    if not ENABLED:
        return None
    with _shared_lock:
        if _shared is not None and (
            _shared.owner != os.getpid() or _shared.proc.poll() is not None
        ):
            _shared = None  # a forked test process, or a dead server: not this one's
        if _shared is None:
            try:
                _shared = Zygote()
            except ZygoteError as exc:
                warnings.warn(f"starting fresh interpreters: {exc}", stacklevel=2)
                ENABLED = False
                return None
            atexit.register(_shared.close)
        return _shared


def popen(
    args: list[str], *, cwd: Path, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes] | ForkedProcess:
    """``args`` run with ``env`` in ``cwd``, stdin from ``/dev/null``, stdout and stderr
    appended to ``log``, in a new session: forked from the pre-warmed interpreter when ``args``
    is ``[sys.executable, "-m", module, ...]`` and the environment allows it, else a
    :class:`subprocess.Popen`."""
    if len(args) >= 3 and args[0] == sys.executable and args[1] == "-m":
        zygote = shared()
        if zygote is not None and zygote.accepts(env):
            return zygote.spawn(args[2], list(args[3:]), cwd=cwd, env=env, log=log)
    from benchmarks._chaos import popen as fresh  # (not in the pre-warmed interpreter)

    proc = fresh(args, cwd=cwd, env=env, log=log)
    assert isinstance(proc, subprocess.Popen)
    return proc


if __name__ == "__main__":
    serve(sys.argv[1])
