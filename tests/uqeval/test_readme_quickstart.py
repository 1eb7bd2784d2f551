"""The README's command-line and client examples, run as written against a live server.

A new user follows only the README: these tests run its ``cli``, ``cli-benchmark`` and ``client``
blocks (``tests/readme.py``) against the API under uvicorn with a real Redis and a real Celery
worker, with the live server's address in place of the README's and a submitter key in ``KEY``
(or ``key``). The values they produce are checked against formulas computed here, never against
numbers taken from the service.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from tests.readme import README_URL, ROOT, readme_block
from uqeval import Client

pytestmark = pytest.mark.slow


def _crps(mean: np.ndarray, std: np.ndarray, y: np.ndarray) -> float:
    # Gneiting & Raftery (2007), eq. 21: the CRPS of N(mean, std²) in closed form.
    z = (y - mean) / std
    return float(
        np.mean(
            std * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
        )
    )


def _run_bash(block: str, url: str, cwd: Path, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """Run a README bash block with the project's environment on PATH (where `pip install -e .`
    put the ``uqeval`` command), as its reader would."""
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    assert shutil.which("uqeval", path=path), (
        "the uqeval command is not installed beside this Python (pip install -e .)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.update(PATH=path, PYTHONPATH=str(ROOT), UQEVAL_CONFIG=os.devnull, COLUMNS="200")
    env.update(env_vars)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace(README_URL, url)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_readme_cli_block(live_server: Any, tmp_path: Path) -> None:
    """Five lines: set the server and key, write an NPZ, submit and wait (progress and table),
    submit for a script (the result document as JSON), list."""
    key = live_server.new_key("readme-cli")
    block = readme_block("cli")
    assert README_URL in block
    proc = _run_bash(block, live_server.url, tmp_path, KEY=key)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert key not in proc.stdout + proc.stderr  # the key is never printed
    with np.load(tmp_path / "pred.npz") as npz:
        mean, std, y = npz["mean"], npz["std"], npz["y"]
    # the table of --wait, then the listing
    for word in ("mae", "crps", "nll", "succeeded"):
        assert word in proc.stdout, proc.stdout
    doc = json.loads((tmp_path / "result.json").read_text())
    metrics = doc["result"]["metrics"] if "result" in doc else doc["metrics"]
    assert metrics["crps"]["value"] == pytest.approx(_crps(mean, std, y), rel=1e-9)
    with Client(live_server.url, key) as client:
        page = client.submissions()
    assert page.total == 2  # the two submits, nothing twice
    for sub in page.items:
        assert sub.status == "succeeded"


def test_readme_cli_benchmark_block(live_server: Any, tmp_path: Path) -> None:
    """On a benchmark: two submissions by id, their results, the leaderboard with the team's
    name, and the paired comparison."""
    rng = np.random.default_rng(7)
    n = 300
    y = rng.normal(size=n)
    mean = y + 0.5 * rng.normal(size=n)
    np.savez(tmp_path / "a.npz", mean=mean, std=np.full(n, 0.5))
    np.savez(tmp_path / "b.npz", mean=mean, std=np.full(n, 0.1))  # the same means, over-confident
    with Client(live_server.url, live_server.admin_key) as admin:
        bench = admin.create_benchmark(
            "readme-bench",
            y=y,
            primary_metric="crps",
            metrics=["crps", "mae"],
            bootstrap={"n_resamples": 200},
        )
        team = admin.create_team("README team")
        key = admin.create_key("readme", team_id=team.team_id).key
    assert key is not None
    proc = _run_bash(
        readme_block("cli-benchmark"),
        live_server.url,
        tmp_path,
        UQEVAL_URL=live_server.url,
        UQEVAL_KEY=key,
        BENCH=bench.id,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for word in ("calibrated", "overconfident", "README team", "crps", "mae"):
        assert word in out, out
    # the comparison names the models: both appear on one row of its table
    assert any("calibrated" in line and "overconfident" in line for line in out.splitlines()), out
    with Client(live_server.url, key) as client:
        board = client.leaderboard(bench.id, metric="crps")
    # one entry per team: the better (calibrated) of its two submissions, by the formula
    assert [e.model_name for e in board.entries] == ["calibrated"]
    assert board.entries[0].team_name == "README team"
    assert board.entries[0].value == pytest.approx(_crps(mean, np.full(n, 0.5), y), rel=1e-9)
    assert _crps(mean, np.full(n, 0.5), y) < _crps(mean, np.full(n, 0.1), y)


def test_readme_client_block(live_server: Any) -> None:
    """Five lines of Python: submit a uqcore prediction, wait with progress, read a value and its
    interval, read a leaderboard."""
    rng = np.random.default_rng(3)
    n = 400
    y = rng.normal(size=n)
    mu = y + 0.3 * rng.normal(size=n)
    sd = np.full(n, 0.3)
    key = live_server.new_key("readme-client")
    with Client(live_server.url, live_server.admin_key) as admin:
        bench = admin.create_benchmark("readme-client", y=y, primary_metric="crps")
    shown: list[str] = []
    namespace: dict[str, Any] = {
        "key": key,
        "mu": mu,
        "sd": sd,
        "y": y,
        "bench_id": bench.id,
        "print": lambda *a: shown.append(" ".join(map(str, a))),
    }
    exec(readme_block("client").replace(README_URL, live_server.url), namespace)
    sub = namespace["sub"]
    assert sub.status == "succeeded"
    assert sub.result.value("crps") == pytest.approx(_crps(mu, sd, y), rel=1e-9)
    assert sub.result.value("mae") == pytest.approx(float(np.mean(np.abs(y - mu))), rel=1e-12)
    interval = sub.result.metrics["crps"].interval
    assert interval is not None and interval.low < sub.result.value("crps") < interval.high
    assert shown and shown[-2].startswith("succeeded 100%"), shown  # the progress line
    assert namespace["board"].metric == "crps"
    assert key not in " ".join(shown)
