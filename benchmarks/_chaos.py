"""A stack on loopback whose parts can be killed and restarted: the harness of the reliability
measurements (``benchmarks/reliability.py``) and of their short forms in CI
(``tests/reliability/test_chaos.py``).

:class:`ChaosStack` starts, as separate processes each in its own process group, a managed
Redis (:class:`service.redis_server.ManagedRedis`: AOF ``everysec``, or persistence off for a
control run), ``python -m uqeval worker --concurrency C`` workers (prefork: a master and C
children) and the API (uvicorn) on free 127.0.0.1 ports, all with one set of ``UQEVAL_*``
settings and an admin key. It kills (SIGKILL or SIGTERM) a worker's pool child, a whole worker,
the API or Redis, and restarts them on the same port and data directory itself: nothing here
relies on a supervisor. Every process it ever started is recorded; :meth:`ChaosStack.stop`
ends them all and reports any that survived.

It also watches every write of a result document through Redis keyspace notifications
(:class:`ResultWrites`), which tells per submission how many times its result was written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import redis

from service import keys
from service.redis_server import ManagedRedis, free_port

ROOT = Path(__file__).resolve().parents[1]
ADMIN_KEY = "chaos-admin-key-" + "0" * 16
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

#: Settings of every process of the stack: heartbeats short enough that a vanished worker's
#: jobs are re-queued within seconds, no per-key rate limit (the admin key is not limited
#: anyway), the numpy backend. Each can be overridden per stack.
BASE_SETTINGS: dict[str, str] = {
    "heartbeat_interval_s": "0.5",
    "heartbeat_ttl_s": "4",
    "unclaimed_requeue_s": "10",
    "max_attempts": "5",
    "rate_limit": "0",
    "backend": "numpy",
    "worker_concurrency": "2",
}


# ------------------------------------------------------------------------------------------
# processes (Linux /proc)
# ------------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Pids whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Process(Protocol):
    """What the harness uses of a started child (:class:`subprocess.Popen` has it)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def popen(args: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> Process:
    """``args`` as a subprocess in a new session, stdin from ``/dev/null``, stdout and stderr
    appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


#: How every child of a stack starts: a fresh interpreter (:func:`popen`) for the
#: measurements; the tests' short forms fork theirs from a pre-warmed one (``tests.zygote``).
spawn: Callable[..., Process] = popen


class Child:
    """One subprocess of the stack in its own process group, with its log file (appended to
    across restarts, so that the log tells every incarnation)."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.log = log
        self.proc: Process | None = None
        self.starts = 0
        #: True while the harness itself has it down (a kill, a SIGTERM): the watchdog
        #: restarts only a child that exited on its own.
        self.held = False

    def start(self) -> None:
        self.proc = spawn(self.args, cwd=ROOT, env=self.env, log=self.log)
        self.starts += 1

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def wait(self, timeout_s: float) -> bool:
        """Wait for the leader to exit; True when it did."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the whole group and reap the leader."""
        self.signal_group(signal.SIGKILL)
        self.wait(10.0)

    def stop(self, timeout_s: float) -> None:
        """SIGTERM the group, SIGKILL it after ``timeout_s``; nothing of the group survives."""
        if self.running:
            self.signal_group(signal.SIGTERM)
            if not self.wait(timeout_s):
                self.kill()
        self.signal_group(signal.SIGKILL)
        self.wait(5.0)

    def tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-chars:]
        return ""


# ------------------------------------------------------------------------------------------
# result writes, seen by Redis itself
# ------------------------------------------------------------------------------------------


class ResultWrites(threading.Thread):
    """Counts the writes of every ``sub:{id}:result`` key (keyspace notifications), so that a
    result written twice is seen even if both writes hold the same document. Reconnects
    (bounded waits) when Redis goes away; :meth:`ChaosStack.configure_redis` turns the
    notifications on after every (re)start of the server."""

    def __init__(self, url: str) -> None:
        super().__init__(name="result-writes", daemon=True)
        self.url = url
        self.counts: Counter[str] = Counter()
        self.stopped = threading.Event()
        self.subscribed = threading.Event()
        self._prefix = f"__keyspace@0__:{keys.PREFIX}sub:"

    def run(self) -> None:
        while not self.stopped.is_set():
            client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
            try:
                pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
                pubsub.psubscribe(self._prefix + "*:result")
                self.subscribed.set()
                while not self.stopped.is_set():
                    msg = pubsub.get_message(timeout=0.2)
                    if msg is None or msg.get("data") != b"set":
                        continue
                    channel = msg["channel"].decode()
                    self.counts[channel[len(self._prefix) : -len(":result")]] += 1
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self.subscribed.clear()
                self.stopped.wait(0.2)
            finally:
                client.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


# ------------------------------------------------------------------------------------------
# the stack
# ------------------------------------------------------------------------------------------


class ChaosStack:
    """Redis, ``workers`` Celery workers and the API on loopback, each killable.

    ``appendonly=False`` is the control: no AOF and no RDB snapshots, so a killed Redis
    comes back empty. ``settings`` are ``UQEVAL_*`` values (lower-case names) over
    :data:`BASE_SETTINGS`.
    """

    def __init__(
        self,
        tmp: Path,
        *,
        workers: int = 2,
        appendonly: bool = True,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.tmp = Path(tmp)
        if (self.tmp / "redis").exists():
            raise ValueError(f"{self.tmp} holds a stack's data already: give an empty directory")
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.n_workers = workers
        self.appendonly = appendonly
        self.settings = {**BASE_SETTINGS, **(settings or {})}
        self.redis = ManagedRedis(self.tmp / "redis", appendonly=appendonly)
        self.workers: list[Child] = []
        self.api: Child | None = None
        self.port = 0
        self.base = ""
        self.writes: ResultWrites | None = None
        self.redis_pids: list[int] = []
        self._client: Any = None
        #: Workers that exited on their own and were restarted: (name, the log's reason).
        self.self_exits: list[tuple[str, str]] = []
        self.lock = threading.RLock()
        self._watching = threading.Event()
        self._watchdog: threading.Thread | None = None

    # -- environment ------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
        env.pop("REDIS_URL", None)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        env["REDIS_URL"] = self.redis.url
        env["UQEVAL_ADMIN_KEY"] = ADMIN_KEY
        env["UQEVAL_DATA_DIR"] = str(self.tmp)
        env["UQEVAL_GC_FREEZE"] = "false"
        for name, value in self.settings.items():
            env[f"UQEVAL_{name.upper()}"] = value
        env["PYTHONPATH"] = str(ROOT)
        return env

    @property
    def client(self) -> Any:
        """A Redis client of the harness (reads the store directly, not through the API)."""
        if self._client is None:
            self._client = redis.Redis.from_url(
                self.redis.url, socket_timeout=5.0, socket_connect_timeout=1.0
            )
        return self._client

    # -- Redis ----------------------------------------------------------------------------

    def configure_redis(self) -> None:
        """After each start: keyspace notifications of string writes (:class:`ResultWrites`)
        and, for the control, no RDB snapshots either."""
        self.client.config_set("notify-keyspace-events", "K$")
        if not self.appendonly:
            self.client.config_set("save", "")
        if self.writes is not None:
            deadline = time.monotonic() + 5.0
            while not self.writes.subscribed.is_set() and time.monotonic() < deadline:
                time.sleep(0.05)

    def start_redis(self) -> None:
        self.redis.start()
        assert self.redis.process is not None
        self.redis_pids.append(self.redis.process.pid)
        self.configure_redis()

    def kill_redis(self) -> None:
        """SIGKILL the Redis server (no AOF fsync, no snapshot)."""
        proc = self.redis.process
        assert proc is not None
        proc.kill()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
        self.redis.process = None

    def restart_redis(self) -> None:
        """Start Redis again on the same port with the same data directory (AOF replayed);
        the admin key is registered again should the data be gone (as an API does at start)."""
        self.start_redis()
        from service.settings import Settings
        from service.store import Store

        store = Store.from_url(self.redis.url, Settings(redis_url=self.redis.url))
        try:
            store.ensure_admin_key(ADMIN_KEY)
        finally:
            store.close()

    # -- workers ----------------------------------------------------------------------------

    def _worker(self, i: int) -> Child:
        name = f"w{i + 1}"
        args = [sys.executable, "-m", "uqeval", "worker", "--name", name]
        args += ["--concurrency", self.settings["worker_concurrency"], "--loglevel", "INFO"]
        return Child(name, args, self.env(), self.tmp / f"worker-{name}.log")

    def live_workers(self) -> set[str]:
        """Names of the workers announced in the store."""
        now = time.time()
        ttl = 3 * float(self.settings["heartbeat_interval_s"]) + 2.0
        got = self.client.zrangebyscore(keys.workers(), now - ttl, "+inf")
        return {w.decode().split("@", 1)[0] for w in got}

    def wait_worker(self, w: Child, timeout_s: float = 120.0) -> None:
        """Wait until ``w`` runs its pool children and consumes (it announced itself)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not w.running:
                raise RuntimeError(f"worker {w.name} exited: {w.tail()}")
            if w.name in self.live_workers() and len(self.pool(w)) >= self.pool_size:
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker {w.name} did not start: {w.tail()}")

    def job_holders(self) -> dict[str, int]:
        """Running jobs per worker name, as the store records who claimed them."""
        ids = self.client.zrange(keys.running(), 0, -1)
        pipe = self.client.pipeline(transaction=False)
        for sub_id in ids:
            pipe.hget(keys.submission(sub_id.decode()), "worker")
        out: dict[str, int] = {}
        for holder in pipe.execute():
            if holder:
                name = holder.decode().split("@", 1)[0]
                out[name] = out.get(name, 0) + 1
        return out

    @property
    def pool_size(self) -> int:
        """Pool children per worker: none with concurrency 1 (the solo pool)."""
        concurrency = int(self.settings["worker_concurrency"])
        return 0 if concurrency == 1 else concurrency

    def pool(self, w: Child) -> list[int]:
        """The live pool children of worker ``w`` (prefork)."""
        return [p for p in children(w.pid) if alive(p)] if w.running else []

    def kill_pool_child(self, w: Child, pick: int) -> int | None:
        """SIGKILL one pool child of ``w`` (``pick`` chooses which); its pid, or None."""
        pool = sorted(self.pool(w))
        if not pool:
            return None
        pid = pool[pick % len(pool)]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return pid

    def hold(self, w: Child) -> None:
        """Take ``w`` out of the watchdog's care (the caller kills and restarts it)."""
        with self.lock:
            w.held = True

    def _watch(self) -> None:
        """Restart a worker that exited on its own (as a supervisor would), noting why."""
        while not self._watching.wait(0.5):
            for w in self.workers:
                with self.lock:
                    if w.held or w.running or w.proc is None:
                        continue
                    w.held = True
                # The reason is logged before the traceback of the error it names.
                reason = next(
                    (
                        line.strip()[-200:]
                        for line in reversed(w.tail(1_000_000).splitlines())
                        if "Unrecoverable error" in line or "CRITICAL" in line
                    ),
                    f"exit code {w.proc.returncode}",
                )
                self.self_exits.append((w.name, reason))
                try:
                    self.restart_worker(w, wait=False)
                except Exception as exc:  # Redis down: the next pass tries again
                    self.self_exits.append((w.name, f"restart failed: {exc}"))
                    w.held = False

    def restart_worker(self, w: Child, wait: bool = True) -> None:
        """Start ``w`` again (what is left of its group is reaped first); it is in the
        watchdog's care again afterwards."""
        try:
            self._restart_worker(w, wait)
        finally:
            w.held = False

    def _restart_worker(self, w: Child, wait: bool) -> None:
        w.stop(5.0)  # reap whatever is left of the group
        # An announcement of the dead incarnation must not count as the new one's.
        stale = [
            m
            for m in self.client.zrange(keys.workers(), 0, -1)
            if m.decode().startswith(w.name + "@")
        ]
        if stale:
            self.client.zrem(keys.workers(), *stale)
        w.start()
        if wait:
            self.wait_worker(w)

    # -- API --------------------------------------------------------------------------------

    def _api(self) -> Child:
        args = [sys.executable, "-m", "uvicorn", "service.api.app:create_app", "--factory"]
        args += ["--host", "127.0.0.1", "--port", str(self.port), "--no-access-log"]
        return Child("api", args, self.env(), self.tmp / "api.log")

    def wait_api(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        assert self.api is not None
        with httpx.Client(base_url=self.base, timeout=2.0) as http:
            while time.monotonic() < deadline:
                if not self.api.running:
                    raise RuntimeError(f"the API exited: {self.api.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get("/healthz").status_code == 200:
                        return
                time.sleep(0.1)
        raise RuntimeError(f"the API did not start: {self.api.tail()}")

    def restart_api(self) -> None:
        assert self.api is not None
        self.api.stop(5.0)
        self.api.start()
        self.wait_api()

    # -- whole stack ------------------------------------------------------------------------

    def start(self) -> ChaosStack:
        self.start_redis()
        self.writes = ResultWrites(self.redis.url)
        self.writes.start()
        self.configure_redis()
        self.workers = [self._worker(i) for i in range(self.n_workers)]
        for w in self.workers:
            w.start()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.api = self._api()
        self.api.start()
        for w in self.workers:
            self.wait_worker(w)
        self.wait_api()
        with httpx.Client(base_url=self.base, timeout=10.0) as http:
            deadline = time.monotonic() + 60.0
            while http.get("/readyz").status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError("the stack never became ready")
                time.sleep(0.1)
        self._watchdog = threading.Thread(target=self._watch, name="watchdog", daemon=True)
        self._watchdog.start()
        return self

    def submitter(self, name: str = "chaos") -> dict[str, str]:
        """A new submitter key's headers."""
        with httpx.Client(base_url=self.base, timeout=10.0) as http:
            r = http.post("/v1/admin/keys", json={"name": name}, headers=ADMIN)
            r.raise_for_status()
            return {"Authorization": f"Bearer {r.json()['key']}"}

    def processes(self) -> dict[str, list[int]]:
        """Live pids by role: ``api``, ``workers`` (masters and pool children), ``redis``."""
        out: dict[str, list[int]] = {"api": [], "workers": [], "redis": []}
        if self.api is not None and self.api.running:
            out["api"] = [self.api.pid, *children(self.api.pid)]
        for w in self.workers:
            if w.running:
                out["workers"] += [w.pid, *self.pool(w)]
        if self.redis.process is not None and self.redis.running:
            out["redis"] = [self.redis.process.pid]
        return out

    def stop(self) -> list[str]:
        """Stop everything (API, workers, Redis); the processes that had to be killed after
        their grace period or that survived, as ``"pid name"`` (empty: a clean stop)."""
        left: list[str] = []
        self._watching.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=180)
        groups = [c for c in [self.api, *self.workers] if c is not None]
        pids = {c.pid: c.name for c in groups if c.proc is not None}
        for c in groups:
            c.stop(20.0)
        if self.writes is not None:
            self.writes.stop()
        if self._client is not None:
            self._client.close()
            self._client = None
        self.redis.stop()
        deadline = time.monotonic() + 5.0
        survivors = [p for p in [*pids, *self.redis_pids] if alive(p)]
        while survivors and time.monotonic() < deadline:
            time.sleep(0.1)
            survivors = [p for p in survivors if alive(p)]
        for p in survivors:
            left.append(f"{p} {pids.get(p, 'redis')}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        return left

    def __enter__(self) -> ChaosStack:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def stack(tmp: Path, **kwargs: Any) -> Iterator[ChaosStack]:
    """A started :class:`ChaosStack`, stopped (every process reaped) on exit."""
    s = ChaosStack(tmp, **kwargs)
    with s:
        yield s
