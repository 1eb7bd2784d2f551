"""The README's curl NPZ example, run as written against the API under uvicorn.

The code block after the ``<!-- readme-example: curl-npz -->`` marker is run by bash in an
empty directory, with the server's address put in place of ``http://127.0.0.1:8000`` and a
submitter key in ``KEY``; its answer must be a 202 whose job gives the values of the example's
data (computed here from the formulas, not from the service).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from scipy import stats

from tests.readme import README_URL, readme_block
from tests.service._api import LiveServer, new_key, wait_terminal

pytest_plugins = ["tests.service._api"]

MARKER = "curl-npz"


def _gaussian_crps(mean: np.ndarray, std: np.ndarray, y: np.ndarray) -> float:
    # Gneiting & Raftery (2007), eq. 21: closed form of the CRPS of N(mean, std²).
    z = (y - mean) / std
    crps = std * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
    return float(np.mean(crps))


def test_readme_curl_npz_example(live_server: LiveServer, worker, tmp_path: Path):
    curl = shutil.which("curl")
    assert curl, "curl is not installed (Debian: apt-get install curl; `bash scripts/test` does it)"
    block = readme_block(MARKER)
    assert README_URL in block
    with httpx.Client(base_url=live_server.url, timeout=30) as http:
        key = new_key(http, "readme")["Authorization"].removeprefix("Bearer ")
        env = {
            **os.environ,
            "KEY": key,
            # `python` as the README's reader has it: the environment the project is installed in
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        }
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.replace(README_URL, live_server.url)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        accepted = json.loads(proc.stdout)
        assert accepted.get("status") == "queued", accepted
        doc = wait_terminal(http, {"Authorization": f"Bearer {key}"}, accepted["id"])

    assert doc["status"] == "succeeded", doc
    assert (doc["model_name"], doc["kind"], doc["n"]) == ("demo", "gaussian", 3)
    with np.load(tmp_path / "pred.npz") as npz:  # the arrays the example wrote
        mean, std, y = npz["mean"], npz["std"], npz["y"]
    np.testing.assert_array_equal(y, [0.0, 1.0, -1.0])
    metrics = doc["result"]["metrics"]
    assert set(metrics) == {"mae", "crps"}
    assert metrics["mae"]["value"] == pytest.approx(float(np.mean(np.abs(y - mean))), rel=1e-12)
    assert metrics["crps"]["value"] == pytest.approx(_gaussian_crps(mean, std, y), rel=1e-9)
