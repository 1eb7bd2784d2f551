"""Bootstrap confidence intervals: uqcore.stability side by side with the straightforward approach.

The straightforward approach is what users do today: for each of B resamples, re-index the
arrays and recompute each metric with numpy/scipy (MAE with numpy, NLL with
``scipy.stats.norm.logpdf``, Spearman with ``scipy.stats.spearmanr``). uqcore draws the same
kind of resamples as count vectors and evaluates them through the one engine (one matrix
product per block for the row sums, cumulative weights along orders computed once for the
rest).

Run from the repository root:

    python benchmarks/stability.py            # N = 10^4 and 10^5, B = 1000 (about 5 minutes)
    python benchmarks/stability.py --full     # also N = 10^6 (about 20 minutes on 2 cores)
    python benchmarks/stability.py --paths    # only the per-metric table at N = 10^5 (prints)

Writes the "Stability (bootstrap)" section of ``benchmarks/RESULTS.md``: the timings per N from
one run (so the ratios compare like with like on a shared machine), the load average before
and after, and the engine time per resample of each metric alone, through its block path and
through its implementation on the same counts (``Engine(..., use_blocks=False,
use_mean_terms=False)``), alternated, best of several rounds. Peak memory is the
``tracemalloc`` peak of new allocations during a call (numpy reports its buffers to it),
measured in a separate call on the first two blocks: tracemalloc slowed the timed calls down by
20–30%.
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
from uqcore.stability.blocks import tuning
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


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of the process (all its threads) for one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def peak_mib(fn: Callable[[], Any]) -> float:
    """Peak MiB of new allocations during one call (``tracemalloc``, which slows Python code
    down, so it is not on while timing)."""
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def one_size(n: int, b: int, trio: list[str]) -> tuple[float, ...]:
    """Seconds and MiB of the straightforward approach, uqcore's trio and all metrics (and the
    CPU seconds of all) at N = ``n``."""
    mu, sd, y = batch(n)
    pred = P.Gaussian(mu, sd)
    # the peak memory is reached within the first blocks: measured on two of them
    b_mem = min(b, max(16, 2 * default_block(n, b)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_ref, _ = timed(lambda: straightforward(mu, sd, y, b))
        t_trio, _ = timed(lambda: bootstrap(pred, y, trio, n_resamples=b))
        t_all, c_all = timed(lambda: bootstrap(pred, y, "all", n_resamples=b))
        m_ref = peak_mib(lambda: straightforward(mu, sd, y, b_mem))
        m_trio = peak_mib(lambda: bootstrap(pred, y, trio, n_resamples=b_mem))
        m_all = peak_mib(lambda: bootstrap(pred, y, "all", n_resamples=b_mem))
    return t_ref, m_ref, t_trio, m_trio, t_all, c_all, m_all


def paths(n: int, b: int, rounds: int) -> list[tuple[str, str, float, float]]:
    """(metric, path, block-path ms, per-resample-path ms) per resample of each metric alone
    and of all of them together ("all"): the engine on the same counts (drawn beforehand, not
    timed), the two paths alternated, best of ``rounds``."""
    mu, sd, y = batch(n)
    pred = P.Gaussian(mu, sd)
    size = default_block(n, b)
    blocks = [
        [Resample(r) for r in Resampler(n).block(0, list(range(s, min(s + size, b))))]
        for s in range(0, b, size)
    ]
    chosen_all, _ = select_metrics([pred], "all", None)
    shared = Batch(pred, y)  # its sorts and PIT values are computed once for every engine
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in [*chosen_all, None]:
            chosen = chosen_all if c is None else [c]
            engines = {
                fast: Engine(shared, chosen, use_blocks=fast, use_mean_terms=fast)
                for fast in (True, False)
            }
            if c is None:
                path = "all"
            elif engines[True].is_mean_type(c):
                path = "matrix product"
            else:
                path = "block" if c.name in engines[True]._fast else "per resample"
            best = {True: math.inf, False: math.inf}
            for _ in range(rounds):
                for fast, engine in engines.items():
                    engine.values(blocks[0][:1])
                    t0 = time.perf_counter()
                    for bl in blocks:
                        engine.values(bl)
                    best[fast] = min(best[fast], (time.perf_counter() - t0) / b * 1e3)
            name = "all metrics together" if c is None else c.name
            out.append((name, path, best[True], best[False]))
            print(out[-1], flush=True)
    return out


def paths_table(
    n: int, b: int, rows: list[tuple[str, str, float, float]], load: str = ""
) -> list[str]:
    lines = [
        f"Engine time per resample at N = {n:.0e} (B = {b}{load}, counts drawn beforehand; each "
        "metric alone, then all together): its path ('matrix product': the row sums of all "
        "mean-type terms and block columns in one product per block; 'block': cumulative "
        "weights along fixed orders, a block of resamples at a time) against its "
        "implementation called resample by resample on the counts as weights, the same "
        "resamples, alternated, best of the rounds.",
        "",
        "| metric | path | ms per resample | through the implementation | speed-up |",
        "|---|---|---|---|---|",
    ]
    for name, path, fast, slow in sorted(rows, key=lambda r: (r[1] == "all", -r[3])):
        lines.append(f"| {name} | {path} | {fast:.2f} | {slow:.2f} | {slow / fast:.1f}× |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also N = 10^6 (about 20 minutes)")
    ap.add_argument("--resamples", type=int, default=1000, help="B (default 1000)")
    ap.add_argument("--paths", action="store_true", help="only print the per-metric table")
    args = ap.parse_args()
    if args.paths:
        print("\n".join(paths_table(10**5, 32, paths(10**5, 32, 3))))
        return
    sizes = [10**4, 10**5] + ([10**6] if args.full else [])
    b = args.resamples
    trio = [m for m in ("mae", "nll", "spearman") if m in registry.names()]
    load_before = os.getloadavg()
    rows = []
    for n in sizes:
        rows.append((n, *one_size(n, b, trio)))
        print(rows[-1], flush=True)
    load_after = os.getloadavg()
    per_metric = []
    for n, b_paths, rounds in [(10**5, 32, 3)] + ([(10**6, 8, 2)] if args.full else []):
        before = os.getloadavg()[0]
        table = paths(n, b_paths, rounds)
        load = f"; load average {before:.2f} before, {os.getloadavg()[0]:.2f} after"
        per_metric.append((n, b_paths, table, load))
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
        f"all {n_all} regression metrics that apply to a Gaussian (adversarial group "
        "calibration's random groups in a helper thread: "
        f"{'on' if tuning.BACKGROUND else 'off'}).",
        "",
        "Wall-clock seconds; 'CPU s' is the CPU time of the process (all its threads) during "
        "the call, which depends less on the other jobs. MiB: peak of new allocations "
        "(tracemalloc, not on while timing; measured on the first two blocks, where the peak "
        "is reached).",
        "",
        "| N | straightforward (3 metrics) s | MiB | uqcore trio s | MiB | speed-up "
        "| uqcore all s | CPU s | MiB | all vs straightforward |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, t_ref, m_ref, t_trio, m_trio, t_all, c_all, m_all in rows:
        lines.append(
            f"| {n:.0e} | {t_ref:.2f} | {m_ref:.0f} | {t_trio:.2f} | {m_trio:.0f} "
            f"| {t_ref / t_trio:.1f}× | {t_all:.2f} | {c_all:.2f} | {m_all:.0f} "
            f"| {t_ref / t_all:.2f}× |"
        )
    for n, b_paths, table, load in per_metric:
        lines += ["", *paths_table(n, b_paths, table, load)]
    write_section("Stability (bootstrap)", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
