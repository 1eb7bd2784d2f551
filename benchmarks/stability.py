"""Bootstrap confidence intervals: uqcore.stability side by side with the straightforward approach.

The straightforward approach is what users do today: for each of B resamples, re-index the
arrays and recompute each metric with numpy/scipy (MAE with numpy, NLL with
``scipy.stats.norm.logpdf``, Spearman with ``scipy.stats.spearmanr``). uqcore draws the same
kind of resamples as count vectors and evaluates them through the one engine (shared sorts,
one matrix product per block for mean-type metrics).

Run from the repository root:

    python benchmarks/stability.py            # N = 10^4 and 10^5, B = 1000
    python benchmarks/stability.py --full     # also N = 10^6 (about 25 minutes on 2 cores)
    python benchmarks/stability.py --paths    # block vs per-resample path per metric (prints)

Writes the "Stability (bootstrap)" section of ``benchmarks/RESULTS.md``: the three timings per
N from one run (so the ratios compare like with like on a shared machine), the load average
before and after, and the cost per resample of each metric alone at N = 10^5 (B = 50; the
order-based metrics with a block evaluator marked). Peak memory is the ``tracemalloc`` peak of
new allocations during the call (numpy reports its buffers to it).
"""

from __future__ import annotations

import argparse
import math
import os
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
from uqcore.batch import Batch
from uqcore.stability import bootstrap
from uqcore.stability._engine import Engine, Resample, default_block, select_metrics
from uqcore.stability.weights import Resampler


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


def per_metric(n: int, b: int) -> list[tuple[str, str, float]]:
    """(name, path, ms per resample) of each applicable metric alone, bootstrap of B resamples."""
    mu, sd, y = batch(n)
    pred = P.Gaussian(mu, sd)
    chosen, _ = select_metrics([pred], "all", None)
    out = []
    for c in chosen:
        engine = Engine(Batch(pred, y), [c])
        path = (
            "matrix product"
            if engine.is_mean_type(c)
            else "block"
            if c.name in engine._fast
            else "per resample"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bootstrap(pred, y, [c.name], n_resamples=2)
            t0 = time.perf_counter()
            bootstrap(pred, y, [c.name], n_resamples=b)
            out.append((c.name, path, (time.perf_counter() - t0) / b * 1e3))
        print(out[-1], flush=True)
    return out


def paths(n: int, b: int, reps: int = 4) -> str:
    """Engine time per resample of each metric with a block evaluator: the block path against
    the per-resample path on the same resamples, alternated, best of ``reps`` (a markdown
    table). Counts are drawn beforehand (not timed)."""
    mu, sd, y = batch(n)
    pred = P.Gaussian(mu, sd)
    size = default_block(n, b)
    blocks = [
        [Resample(r) for r in Resampler(n).block(0, list(range(s, min(s + size, b))))]
        for s in range(0, b, size)
    ]
    lines = [
        f"Engine time per resample at N = {n:.0e} (B = {b}, best of {reps} alternated runs):",
        "",
        "| metric | block path ms | per-resample path ms | speed-up |",
        "|---|---|---|---|",
    ]
    chosen_all, _ = select_metrics([pred], "all", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in chosen_all:
            if c.name not in Engine(Batch(pred, y), [c])._fast:
                continue
            best = {True: math.inf, False: math.inf}
            for _ in range(reps):
                for use in (True, False):
                    engine = Engine(Batch(pred, y), [c], use_blocks=use)
                    engine.values(blocks[0])
                    t0 = time.perf_counter()
                    for bl in blocks:
                        engine.values(bl)
                    best[use] = min(best[use], (time.perf_counter() - t0) / b * 1e3)
            lines.append(
                f"| {c.name} | {best[True]:.2f} | {best[False]:.2f} "
                f"| {best[False] / best[True]:.1f}× |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--paths", action="store_true", help="only print the block/per-resample table")
    args = ap.parse_args()
    if args.paths:
        print(paths(10**5, 40))
        return
    sizes = [10**4, 10**5] + ([10**6] if args.full else [])
    b = args.resamples
    trio = [m for m in ("mae", "nll", "spearman") if m in registry.names()]
    load_before = os.getloadavg()
    rows = []
    for n in sizes:
        mu, sd, y = batch(n)
        pred = P.Gaussian(mu, sd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_ref, m_ref = measure(lambda a=(mu, sd, y): straightforward(*a, b))
            t_trio, m_trio = measure(lambda p=pred, t=y: bootstrap(p, t, trio, n_resamples=b))
            t_all, m_all = measure(lambda p=pred, t=y: bootstrap(p, t, "all", n_resamples=b))
        rows.append((n, t_ref, m_ref, t_trio, m_trio, t_all, m_all))
        print(rows[-1], flush=True)
    load_after = os.getloadavg()
    costs = per_metric(10**5, 50)
    n_all = len(
        [s for s in registry.specs("regression") if s.why_not(P.Gaussian([0.0], [1.0])) is None]
    )
    lines = [
        f"B = {b} bootstrap resamples of a Gaussian batch; {platform.processor() or 'cpu'}, "
        f"{os.cpu_count()} cores shared with other jobs (load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after the timings), Python "
        f"{platform.python_version()}, numpy {np.__version__}. All timings of a row come from "
        "one run.",
        f"Straightforward: re-index + numpy/scipy MAE, NLL, Spearman per resample. uqcore "
        f"'trio': bootstrap() of {', '.join(trio)} (the registered ones of the three); 'all': "
        f"all {n_all} regression metrics that apply to a Gaussian.",
        "",
        "| N | straightforward (3 metrics) s | MiB | uqcore trio s | MiB | speed-up "
        "| uqcore all s | MiB | all vs straightforward |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, t_ref, m_ref, t_trio, m_trio, t_all, m_all in rows:
        lines.append(
            f"| {n:.0e} | {t_ref:.2f} | {m_ref:.0f} | {t_trio:.2f} | {m_trio:.0f} "
            f"| {t_ref / t_trio:.1f}× | {t_all:.2f} | {m_all:.0f} | {t_ref / t_all:.2f}× |"
        )
    lines += [
        "",
        "Cost per resample of each metric alone (bootstrap of B = 50 at N = 1e5, the same "
        "machine; includes drawing the counts, ≈1 ms): 'matrix product' = mean-type metrics "
        "(one product per block), 'block' = order-based metrics evaluated a block of resamples "
        "at a time over fixed orders, 'per resample' = through the implementation.",
        "",
        "| metric | path | ms per resample |",
        "|---|---|---|",
        *(
            f"| {name} | {path} | {ms:.2f} |"
            for name, path, ms in sorted(costs, key=lambda r: -r[2])
        ),
    ]
    write_section("Stability (bootstrap)", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
