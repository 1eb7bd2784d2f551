"""Bootstrap confidence intervals: uqcore.stability side by side with the straightforward approach.

The straightforward approach is what users do today: for each of B resamples, re-index the
arrays and recompute each metric with numpy/scipy (MAE with numpy, NLL with
``scipy.stats.norm.logpdf``, Spearman with ``scipy.stats.spearmanr``). uqcore draws the same
kind of resamples as count vectors and evaluates them through the one engine (shared sorts,
one matrix product per block for mean-type metrics).

Run from the repository root:

    python benchmarks/stability.py            # N = 10^4 and 10^5, B = 1000
    python benchmarks/stability.py --full     # also N = 10^6 (all metrics; several minutes)

Writes the "Stability (bootstrap)" section of ``benchmarks/RESULTS.md``. Peak memory is the
``tracemalloc`` peak of new allocations during the call (numpy reports its buffers to it).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import write_section
from uqcore import predictions as P
from uqcore import registry
from uqcore.stability import bootstrap


def batch(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    return mu, sd, mu + sd * rng.normal(size=n)


def straightforward(mu: np.ndarray, sd: np.ndarray, y: np.ndarray, b: int) -> None:
    """Re-index and recompute MAE, NLL and Spearman for every resample."""
    rng = np.random.default_rng(0)
    n = y.shape[0]
    out = np.empty((b, 3))
    for i in range(b):
        idx = rng.integers(0, n, size=n)
        e = np.abs(y[idx] - mu[idx])
        out[i, 0] = e.mean()
        out[i, 1] = -scipy.stats.norm.logpdf(y[idx], mu[idx], sd[idx]).mean()
        out[i, 2] = scipy.stats.spearmanr(sd[idx], e).statistic
    np.quantile(out, [0.025, 0.975], axis=0)


def measure(fn: Callable[[], Any]) -> tuple[float, float]:
    """Seconds and peak MiB of new allocations."""
    tracemalloc.start()
    t0 = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    sizes = [10**4, 10**5] + ([10**6] if args.full else [])
    b = args.resamples
    trio = [m for m in ("mae", "nll", "spearman") if m in registry.names()]
    rows = []
    for n in sizes:
        mu, sd, y = batch(n)
        pred = P.Gaussian(mu, sd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_ref, m_ref = (
                measure(lambda a=(mu, sd, y): straightforward(*a, b))
                if n <= 10**5
                else (None, None)
            )
            t_trio, m_trio = measure(lambda p=pred, t=y: bootstrap(p, t, trio, n_resamples=b))
            t_all, m_all = measure(lambda p=pred, t=y: bootstrap(p, t, "all", n_resamples=b))
        rows.append((n, t_ref, m_ref, t_trio, m_trio, t_all, m_all))
        print(rows[-1], flush=True)
    n_all = len(
        [s for s in registry.specs("regression") if s.why_not(P.Gaussian([0.0], [1.0])) is None]
    )
    lines = [
        f"B = {b} bootstrap resamples of a Gaussian batch; {platform.processor() or 'cpu'}, "
        f"Python {platform.python_version()}, numpy {np.__version__}.",
        f"Straightforward: re-index + numpy/scipy MAE, NLL, Spearman per resample. uqcore "
        f"'trio': bootstrap() of {', '.join(trio)} (the registered ones of the three); 'all': "
        f"all {n_all} regression metrics that apply to a Gaussian.",
        "",
        "| N | straightforward (3 metrics) s | MiB | uqcore trio s | MiB | speed-up "
        "| uqcore all s | MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, t_ref, m_ref, t_trio, m_trio, t_all, m_all in rows:
        speed = f"{t_ref / t_trio:.1f}×" if t_ref else "—"
        ref = f"{t_ref:.2f} | {m_ref:.0f}" if t_ref else "— | —"
        lines.append(
            f"| {n:.0e} | {ref} | {t_trio:.2f} | {m_trio:.0f} | {speed} | {t_all:.2f} "
            f"| {m_all:.0f} |"
        )
    write_section("Stability (bootstrap)", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
