"""Supervision of the children of ``uqeval serve``: a child that dies is restarted, with backoff.

The children are the managed Redis, each worker and the API. One loop in the main thread
polls them (:meth:`Supervisor.tick`); a child that exited is logged with its exit code or
signal and started again after a delay that doubles from :data:`BACKOFF_FIRST_S` up to
:data:`BACKOFF_MAX_S` with each death in a row, and starts again from the first once the child
had stayed up :data:`BACKOFF_RESET_S` (a child that dies at once is not restarted in a tight
loop; one that dies once a day always comes back after a second). Until a restarted child is
ready again (Redis answers PING, the worker announced itself in Redis with its new pid, the API
answers ``/healthz``) it counts as *restarting*: the state file
(:mod:`service.supervision`) says so, and ``GET /readyz`` reports it.

Every death and restart is written to stderr and to ``<data_dir>/logs/supervisor.log``.
:meth:`Supervisor.stop` stops the API, then the workers, then Redis, whatever state they are
in (a child waiting for its restart has nothing left to stop but what it left in its
process group). Signal handlers only ask for the stop (:meth:`Supervisor.request_stop`), so a
Ctrl-C never lands between starting a process and recording it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.supervision import ChildState, Role, write_state

if TYPE_CHECKING:
    from service.redis_server import ManagedRedis
    from service.store import Store

#: The first restart delay (s); it doubles with each death in a row ...
BACKOFF_FIRST_S = 1.0
#: ... up to this (s) ...
BACKOFF_MAX_S = 30.0
#: ... and is back to the first once the child had stayed up this long (s).
BACKOFF_RESET_S = 60.0

#: How often the supervisor looks at its children (s).
POLL_S = 0.25


class Backoff:
    """Restart delays of one child: ``first``, doubling per death in a row, at most
    ``maximum``; a child that stayed up ``reset_after`` seconds starts again from ``first``."""

    def __init__(
        self,
        first: float = BACKOFF_FIRST_S,
        maximum: float = BACKOFF_MAX_S,
        reset_after: float = BACKOFF_RESET_S,
    ) -> None:
        self.first = first
        self.maximum = maximum
        self.reset_after = reset_after
        self.failures = 0

    def next_delay(self, uptime_s: float) -> float:
        """The delay before restarting a child that died after ``uptime_s`` seconds up."""
        if uptime_s >= self.reset_after:
            self.failures = 0
        delay = min(self.first * 2.0**self.failures, self.maximum)
        self.failures += 1
        return delay


def describe_exit(returncode: int) -> str:
    """``exit code 3`` or ``killed by signal 9 (SIGKILL)`` (Popen's negative codes)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "?"
        return f"killed by signal {-returncode} ({name})"
    return f"exit code {returncode}"


class SupervisorLog:
    """Events of the supervisor: on stderr and, with a time stamp, in a log file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def event(self, message: str) -> None:
        print(f"uqeval: {message}", file=sys.stderr, flush=True)
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        with contextlib.suppress(OSError), self.path.open("a") as fh:
            fh.write(f"{stamp} {message}\n")


def _child_preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
    from service.redis_server import die_with_parent

    die_with_parent()


def spawn(args: list[str], env: dict[str, str], log: Path | None) -> subprocess.Popen[bytes]:
    """Start a child in its own process group (a terminal's Ctrl-C reaches only the
    supervisor, which stops the children in order), SIGTERMed on Linux should the supervisor
    die; its output goes to ``log``."""
    out: Any = subprocess.DEVNULL if log is None else log.open("ab")
    try:
        return subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out if log is not None else None,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
            preexec_fn=_child_preexec,
        )
    finally:
        if log is not None:
            out.close()


def kill_group(pid: int) -> None:
    """SIGKILL what is left in the process group that ``pid`` led (e.g. the pool processes
    of a worker whose main process was killed)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``timeout_s``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait(timeout=5)
    kill_group(proc.pid)  # anything the child left in its group


class Child:
    """A supervised child: how to start it, whether it runs, whether it is ready, how to
    stop it."""

    role: Role

    def __init__(self, name: str, stop_timeout_s: float) -> None:
        self.name = name
        self.stop_timeout_s = stop_timeout_s

    @property
    def pid(self) -> int | None:
        raise NotImplementedError

    def launch(self) -> None:
        raise NotImplementedError

    def returncode(self) -> int | None:
        """None while it runs (or before it was started), else its exit status (reaped)."""
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def cleanup(self) -> None:
        """After it died: kill what it left behind."""

    def terminate(self) -> None:
        """Ask it to stop (without waiting)."""

    def stop(self) -> None:
        """Stop it and wait (SIGKILL after ``stop_timeout_s``)."""
        raise NotImplementedError


class ProcessChild(Child):
    """A worker or the API: a command in its own process group."""

    def __init__(
        self,
        name: str,
        role: Role,
        args: list[str],
        env: dict[str, str],
        log: Path,
        probe: Callable[[int], bool],
        stop_timeout_s: float,
    ) -> None:
        super().__init__(name, stop_timeout_s)
        self.role = role
        self.args = args
        self.env = env
        self.log = log
        self.probe = probe
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def launch(self) -> None:
        self.proc = spawn(self.args, self.env, self.log)

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def ready(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.probe(self.proc.pid)

    def cleanup(self) -> None:
        if self.proc is not None:
            kill_group(self.proc.pid)

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, self.stop_timeout_s)


class RedisChild(Child):
    """The managed Redis: restarted on the same port with the same data directory."""

    role: Role = "redis"

    def __init__(self, server: ManagedRedis) -> None:
        super().__init__("redis", 10.0)
        self.server = server

    @property
    def pid(self) -> int | None:
        return None if self.server.process is None else self.server.process.pid

    def launch(self) -> None:
        self.server.launch()

    def returncode(self) -> int | None:
        proc = self.server.process
        return None if proc is None else proc.poll()

    def ready(self) -> bool:
        return self.server.running and self.server.answers(0.5)

    def stop(self) -> None:
        self.server.stop(self.stop_timeout_s)


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def worker_announced(store: Store) -> Callable[[int], bool]:
    """A probe: has the worker process ``pid`` announced itself in Redis (it takes jobs)?"""
    from service.store import StoreUnavailable

    def probe(pid: int) -> bool:
        try:
            for name in store.live_workers():
                info = store.worker_info(name)
                if info is not None and info.get("pid") == pid:
                    return True
        except StoreUnavailable:
            pass
        return False

    return probe


class _Tracked:
    """The supervisor's book-keeping of one child."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.state: str = "stopped"  # stopped | starting | up | waiting | restarting
        self.started_at = 0.0
        self.restart_at = 0.0
        self.restarts = 0
        self.last_exit: str | None = None
        self.backoff = Backoff()

    def as_state(self) -> ChildState:
        shown = {"waiting": "restarting", "stopped": "starting"}.get(self.state, self.state)
        return ChildState(
            name=self.child.name,
            role=self.child.role,
            state=shown,  # type: ignore[arg-type]
            pid=self.child.pid if self.state != "waiting" else None,
            restarts=self.restarts,
            last_exit=self.last_exit,
        )


class Supervisor:
    """Keeps ``children`` running: started in order, restarted with backoff when they die,
    stopped API first, workers next (all asked at once), Redis last."""

    def __init__(
        self,
        children: Sequence[Child],
        log: SupervisorLog,
        state_path: Path,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tracked = [_Tracked(c) for c in children]
        self.log = log
        self.state_path = state_path
        self.clock = clock
        self.stopping = False

    # --- what the API reads ---------------------------------------------------------------

    def write_state(self) -> None:
        with contextlib.suppress(OSError):
            write_state(self.state_path, [t.as_state() for t in self.tracked])

    @property
    def restarting(self) -> list[str]:
        return [t.child.name for t in self.tracked if t.state in ("waiting", "restarting")]

    # --- starting and restarting ----------------------------------------------------------

    def request_stop(self) -> None:
        """Ask :meth:`run` (and :meth:`wait_until`) to return; safe in a signal handler."""
        self.stopping = True

    def start(self, child: Child) -> None:
        """The first start of ``child`` (not waiting until it is ready)."""
        t = self._find(child)
        t.child.launch()
        t.state, t.started_at = "starting", self.clock()
        self.write_state()

    def has_died(self, child: Child) -> bool:
        """True once ``child`` has died (since this supervisor started it)."""
        t = self._find(child)
        return t.state == "waiting" or t.restarts > 0

    def _find(self, child: Child) -> _Tracked:
        return next(t for t in self.tracked if t.child is child)

    def tick(self) -> None:
        """One look at every child: record deaths, restart those whose delay is over, and
        mark the started ones that are ready as up."""
        changed = False
        now = self.clock()
        for t in self.tracked:
            if t.state in ("starting", "up", "restarting"):
                code = t.child.returncode()
                if code is not None:
                    self._died(t, code, now)
                    changed = True
                    continue
            if t.state == "waiting" and now >= t.restart_at and not self.stopping:
                t.child.launch()
                t.state, t.started_at = "restarting", self.clock()
                t.restarts += 1
                self.log.event(f"{t.child.name} restarted (pid {t.child.pid})")
                changed = True
            elif t.state in ("starting", "restarting") and t.child.ready():
                if t.state == "restarting":
                    self.log.event(f"{t.child.name} is back (pid {t.child.pid})")
                t.state = "up"
                changed = True
        if changed:
            self.write_state()

    def _died(self, t: _Tracked, code: int, now: float) -> None:
        t.child.cleanup()
        uptime = now - t.started_at
        delay = t.backoff.next_delay(uptime)
        t.last_exit = describe_exit(code)
        t.state, t.restart_at = "waiting", now + delay
        self.log.event(
            f"{t.child.name} (pid {t.child.pid}) died: {t.last_exit}, after {uptime:.1f} s; "
            f"restarting in {delay:g} s"
        )

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Supervise until ``done()`` (True), the timeout or a stop request (False)."""
        deadline = time.monotonic() + timeout_s
        while not self.stopping and time.monotonic() < deadline:
            self.tick()
            if done():
                return True
            time.sleep(POLL_S)
        return False

    def run(self) -> None:
        """Supervise until a stop is requested."""
        while not self.stopping:
            self.tick()
            time.sleep(POLL_S)

    # --- stopping ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every child: the API, then the workers (warm shutdown: a running job finishes
        or is re-queued), then Redis; removes the state file."""
        self.stopping = True
        by_role = {
            role: [t.child for t in self.tracked if t.child.role == role]
            for role in ("api", "worker", "redis")
        }
        for child in by_role["api"]:
            child.stop()
        for child in by_role["worker"]:
            child.terminate()
        for child in by_role["worker"]:
            child.stop()
        for child in by_role["redis"]:
            child.stop()
        for t in self.tracked:
            t.state = "stopped"
        with contextlib.suppress(OSError):
            self.state_path.unlink()
