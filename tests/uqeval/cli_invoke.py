"""Running the ``uqeval`` command line in tests: in-process (the framework's test runner, with its own
environment) or as a real subprocess of ``python -m uqeval``; and the data files it reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner, Result

from tests.stack import ROOT
from uqeval.cli import app

#: Environment variables the command line reads; each call sets them explicitly.
CLI_VARS = ("UQEVAL_URL", "UQEVAL_KEY", "UQEVAL_CONFIG")


def cli(
    *args: str,
    url: str | None = None,
    key: str | None = None,
    config: Path | None = None,
    input: str | None = None,
) -> Result:
    """``uqeval ARGS`` in this process, with ``UQEVAL_URL``/``UQEVAL_KEY`` set to ``url`` and
    ``key`` (unset when None) and the config file at ``config`` (the empty /dev/null when
    None, so that no user's file is read)."""
    env = {
        "UQEVAL_URL": url,
        "UQEVAL_KEY": key,
        "UQEVAL_CONFIG": str(config or os.devnull),
        "COLUMNS": "200",
    }
    return CliRunner().invoke(app, list(args), env=env, input=input, catch_exceptions=False)


def cli_process(
    *args: str, url: str | None = None, key: str | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``python -m uqeval ARGS`` as a subprocess (the console entry point's code path)."""
    env = {k: v for k, v in os.environ.items() if k not in CLI_VARS}
    env.update(PYTHONPATH=str(ROOT), UQEVAL_CONFIG=os.devnull, COLUMNS="200")
    if url is not None:
        env["UQEVAL_URL"] = url
    if key is not None:
        env["UQEVAL_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "uqeval", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def loads(stdout: str) -> Any:
    """The JSON document a ``--json`` command printed (stdout must hold nothing else)."""
    return json.loads(stdout)


def gaussian_data(n: int = 40, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded Gaussian prediction with its targets."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 1.5, size=n)
    y = mean + std * rng.normal(size=n)
    return {"mean": mean, "std": std, "y": y}


def probs_data(n: int = 40, c: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded class probabilities (rows on the simplex) with their labels."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(c), size=n)
    labels = np.array([rng.choice(c, p=p) for p in probs])
    return {"probs": probs, "labels": labels}


def write_csv(path: Path, columns: dict[str, np.ndarray]) -> Path:
    """A CSV file with a header row; floats written with repr (they read back exactly)."""
    names = list(columns)
    rows = zip(*(columns[n].tolist() for n in names), strict=True)
    cell = lambda v: repr(v) if isinstance(v, float) else str(v)  # noqa: E731
    path.write_text(",".join(names) + "\n" + "".join(",".join(map(cell, r)) + "\n" for r in rows))
    return path
