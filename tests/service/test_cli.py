"""``uqeval serve`` as a subprocess: it starts Redis, a worker and the API, serves a client,
and stops on SIGTERM with no process left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.cli import build_parser, main
from tests.service.conftest import ROOT

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
        [sys.executable, "-m", "service.cli", "serve", "--port", "0", "--data-dir", str(tmp_path)],
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


def test_cli_parser_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(
        ["serve", "--host", "0.0.0.0", "--port", "9000", "--data-dir", "d", "--workers", "2"]
    )
    assert (args.host, args.port, args.data_dir, args.workers) == ("0.0.0.0", 9000, "d", 2)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "0.1.0"
    with pytest.raises(SystemExit):
        main(["serve", "--workers", "0"])


def test_worker_without_redis_url_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.pop("REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, "-m", "service.cli", "worker"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "set REDIS_URL" in out.stderr
