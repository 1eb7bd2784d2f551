"""No job compiles: the kernels that ``uqcore._compiled.kernels()`` warms at a worker's start
cover every argument type that ``evaluate`` and ``bootstrap`` pass them, inputs that are
read-only memory maps included (a worker passes the stored arrays on as they are). A compile
during a job would run under its memory limit and cost it seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    from uqcore import _compiled, evaluate, predictions as P
    from uqcore.curves import curves
    from uqcore.stability import bootstrap

    jit = _compiled.kernels()
    assert jit is not None
    names = [k for k in dir(jit) if hasattr(getattr(jit, k), "signatures")]
    warmed = {k: set(map(str, getattr(jit, k).signatures)) for k in names}

    rng = np.random.default_rng(0)
    n = 70_000  # above the radix select's and the radix sort's thresholds
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    warnings.simplefilter("ignore")
    for frozen in (False, True):
        mu, sd, y = rng.normal(size=n), rng.uniform(0.5, 2.0, n), rng.normal(size=n)
        q = np.sort(rng.normal(size=(n, levels.shape[0])), axis=1)
        q32 = q.astype(np.float32)
        arrays = (mu, sd, y, q, q32)
        for a in arrays:
            a.setflags(write=not frozen)
        predictions = [
            P.Gaussian(mu, sd),
            P.Laplace(mu, sd),
            P.StudentT(mu, sd, df=5.0),
            P.Quantiles(levels, q),
            P.Quantiles(levels, q32),
        ]
        for pred in predictions:
            for w in (None, rng.integers(1, 3, n).astype(np.float64)):
                evaluate(pred, y, "all", sample_weight=w)
                # and the curves a job keeps for its plots (the Murphy diagram's pass, ...)
                curves(pred, y, "all", sample_weight=w)
        bootstrap(P.Gaussian(mu[:5000], sd[:5000]), y[:5000], "all", n_resamples=8)
    new = {
        k: sorted(set(map(str, getattr(jit, k).signatures)) - warmed[k])
        for k in names
    }
    print(json.dumps({k: v for k, v in new.items() if v}))
    """
)


@pytest.mark.slow
def test_no_kernel_compiles_after_the_warm_up() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("UQCORE_JIT", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    compiled_in_a_job = json.loads(done.stdout.strip().splitlines()[-1])
    assert compiled_in_a_job == {}
