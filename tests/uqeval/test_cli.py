"""``uqeval serve`` as a subprocess: it starts Redis, a worker and the API (one process, or
several with ``--api-workers``), serves a client, and stops on SIGTERM with no process left
behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import typer.main

from tests.stack import ROOT
from uqeval.cli import app, main

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ADMIN = "cli-test-admin-key"


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def read_banner(proc: subprocess.Popen[str], timeout_s: float = 90.0) -> dict[str, str]:
    """The lines ``uqeval serve`` prints once everything is up."""
    assert proc.stdout is not None
    banner: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise AssertionError(f"uqeval serve exited with {proc.returncode}")
            continue
        if m := re.match(r"uq-eval is running at (\S+)", line):
            banner["url"] = m.group(1)
        elif m := re.match(r"API docs:\s+(\S+)", line):
            banner["docs"] = m.group(1)
        elif m := re.match(r"Admin key:\s+(\S+)", line):
            banner["admin"] = m.group(1)
        elif line.startswith("Press Ctrl-C"):
            return banner
    raise AssertionError(f"no banner within {timeout_s} s: {banner}")


@pytest.mark.slow
def test_serve_runs_a_job_and_stops_cleanly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.pop("REDIS_URL", None)
    env.update(
        UQEVAL_ADMIN_KEY=ADMIN,
        UQEVAL_HEARTBEAT_INTERVAL_S="0.5",
        UQEVAL_BACKEND="numpy",
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "uqeval", "serve", "--port", "0", "--data-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    children: set[int] = set()
    try:
        banner = read_banner(proc)
        assert banner["docs"] == banner["url"] + "/docs"
        assert banner["admin"] == ADMIN
        children = descendants(proc.pid)
        assert len(children) >= 3  # redis-server, a worker, uvicorn
        headers = {"Authorization": f"Bearer {ADMIN}"}
        with httpx.Client(base_url=banner["url"], timeout=30.0) as client:
            deadline = time.monotonic() + 60
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "never ready"
                time.sleep(0.2)
            rng = np.random.default_rng(0)
            mean, std = rng.normal(size=32), rng.uniform(0.5, 1.5, size=32)
            body = {
                "model_name": "cli",
                "prediction": {"kind": "gaussian", "mean": mean.tolist(), "std": std.tolist()},
                "y": (mean + std * rng.normal(size=32)).tolist(),
                "analyses": {"metrics": ["mae", "crps"]},
            }
            r = client.post("/v1/submissions", json=body, headers=headers)
            assert r.status_code == 202, r.text
            sub_id = r.json()["id"]
            deadline = time.monotonic() + 60
            while True:
                got = client.get(f"/v1/submissions/{sub_id}", headers=headers).json()
                if got["status"] in ("succeeded", "failed", "cancelled"):
                    break
                assert time.monotonic() < deadline, got
                time.sleep(0.1)
            assert got["status"] == "succeeded", got
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            left = [p for p in children | descendants(proc.pid) if alive(p)]
            for p in left:  # clean up before failing
                os.kill(p, signal.SIGKILL)
    assert proc.returncode == 0
    assert left == []
    assert (tmp_path / "redis" / "appendonlydir").exists() or any(
        (tmp_path / "redis").glob("*.aof*")
    )


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


ROUTE = "/v1/submissions/{sub_id}"


def route_count(text: str) -> float:
    """Successful reads of ``ROUTE`` in a Prometheus exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "uqeval_http_requests_total" and sample.labels == {
                "method": "GET",
                "route": ROUTE,
                "status": "200",
            }:
                total += sample.value
    return total


def process_count(metrics_dir: Path, pid: int, tmp: Path) -> float:
    """The reads of ``ROUTE`` that process ``pid`` counted (its own file of the directory,
    read by the collector that sums them)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    alone = tmp / f"pid-{pid}"
    alone.mkdir(exist_ok=True)
    source = metrics_dir / f"counter_{pid}.db"
    if source.exists():
        shutil.copy(source, alone / source.name)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(alone))
    return route_count(generate_latest(registry).decode())


@pytest.mark.slow
def test_serve_with_two_api_processes(tmp_path: Path) -> None:
    """``--api-workers 2``: two uvicorn processes serve the port (each answers reads, the
    same bytes), ``GET /metrics`` — whichever answers it — counts the requests of both, and
    SIGTERM leaves no process and removes their metrics directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.pop("REDIS_URL", None)
    env.update(UQEVAL_ADMIN_KEY=ADMIN, UQEVAL_BACKEND="numpy", PYTHONPATH=str(ROOT))
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uqeval",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(data),
            "--api-workers",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    children: set[int] = set()
    metrics_dir: Path | None = None
    try:
        banner = read_banner(proc)
        children = descendants(proc.pid)
        uvicorn = [p for p in children if "uvicorn" in cmdline(p)]
        assert len(uvicorn) == 1, [cmdline(p) for p in children]
        deadline = time.monotonic() + 30
        # uvicorn's worker processes (multiprocessing's spawn; beside them its resource tracker)
        while len(api := {p for p in descendants(uvicorn[0]) if "spawn_main" in cmdline(p)}) < 2:
            assert time.monotonic() < deadline, "the API processes did not start"
            time.sleep(0.2)
        assert len(api) == 2, [cmdline(p) for p in api]
        dirs = {environ(p).get("PROMETHEUS_MULTIPROC_DIR") for p in api}
        assert len(dirs) == 1 and None not in dirs, dirs
        metrics_dir = Path(str(dirs.pop()))
        assert metrics_dir.is_dir()

        admin = {"Authorization": f"Bearer {ADMIN}"}
        reads = 0
        with httpx.Client(base_url=banner["url"], timeout=30.0) as client:
            r = client.post("/v1/admin/keys", json={"name": "reader"}, headers=admin)
            assert r.status_code == 201, r.text
            key = {"Authorization": f"Bearer {r.json()['key']}"}
            rng = np.random.default_rng(1)
            mean = rng.normal(size=16)
            body = {
                "model_name": "two",
                "prediction": {"kind": "gaussian", "mean": mean.tolist(), "std": [1.0] * 16},
                "y": (mean + rng.normal(size=16)).tolist(),
                "analyses": {"metrics": ["mae"]},
            }
            r = client.post("/v1/submissions", json=body, headers=key)
            assert r.status_code == 202, r.text
            url = f"/v1/submissions/{r.json()['id']}"
            deadline = time.monotonic() + 60
            while (got := client.get(url, headers=key)).json()["status"] != "succeeded":
                reads += 1
                assert time.monotonic() < deadline, got.json()
                time.sleep(0.1)
            reads += 1
            expected = got.content

        def read(_: int) -> bytes:
            # A connection each: uvicorn's processes share the listening socket and take
            # turns at accepting.
            r = httpx.get(banner["url"] + url, headers=key, timeout=30.0)
            assert r.status_code == 200, r.text
            return r.content

        per_process: dict[int, float] = {}
        with ThreadPoolExecutor(max_workers=16) as pool:
            for _ in range(40):
                assert set(pool.map(read, range(32))) == {expected}
                reads += 32
                per_process = {p: process_count(metrics_dir, p, tmp_path) for p in api}
                if all(per_process.values()):
                    break
        assert all(per_process.values()), per_process  # both processes served reads

        # A count is added once its response is sent: wait for the last ones.
        deadline = time.monotonic() + 10
        while (scraped := route_count(httpx.get(banner["url"] + "/metrics").text)) < reads:
            assert time.monotonic() < deadline, (scraped, reads)
            time.sleep(0.1)
        assert scraped == reads
        per_process = {p: process_count(metrics_dir, p, tmp_path) for p in api}
        assert sum(per_process.values()) == reads and all(per_process.values()), per_process
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            left = [p for p in children | descendants(proc.pid) if alive(p)]
            for p in left:  # clean up before failing
                os.kill(p, signal.SIGKILL)
    assert proc.returncode == 0
    assert left == []
    assert metrics_dir is not None and not metrics_dir.exists()


def test_cli_server_options_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    """The server commands' options as they were: ``--workers``, ``--api-workers`` of at
    least 1 (else a usage error, exit 2), and ``--version``."""
    for args in (
        ["serve", "--workers", "0"],
        ["serve", "--api-workers", "0"],
        ["api", "--api-workers", "0"],
    ):
        assert main(args) == 2
        assert "Invalid value" in capsys.readouterr().err
    for name, flags in (
        ("serve", ["--host", "--port", "--data-dir", "--workers", "--api-workers"]),
        ("worker", ["--queues", "--concurrency", "--name", "--loglevel"]),
        ("api", ["--host", "--port", "--api-workers"]),
    ):
        command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
        assert sorted(o for p in command.params for o in p.opts if o != "--help") == sorted(flags)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "0.1.0"


def test_worker_without_redis_url_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.pop("REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, "-m", "uqeval", "worker"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "set REDIS_URL" in out.stderr
