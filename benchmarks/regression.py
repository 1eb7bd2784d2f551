"""Regression metrics: uqcore side by side with Uncertainty Toolbox and with the numpy floor.

Run from the repository root (the ``bench`` extra installs the peer):

    python benchmarks/regression.py            # peer's get_all_metrics up to N = 10^5
    python benchmarks/regression.py --full     # also the peer at N = 10^6 (about 10 minutes)

Writes the "Regression metrics" section of ``benchmarks/RESULTS.md``. Every comparison is
measured in the same run on the same arrays and reported as a ratio; absolute times on a shared
2-core machine are noise. Peak memory is measured with ``tracemalloc`` (numpy reports its
allocations to it) as the peak of new allocations during the call, the inputs excluded.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.special as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uqcore
from benchmarks._results import write_section
from uqcore import evaluate, metric, registry
from uqcore import predictions as P

os.environ.setdefault("MPLBACKEND", "Agg")


def gaussian_batch(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n) * rng.uniform(0.7, 1.3, size=n)
    return mu, sd, y


def timeit(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``repeats`` calls (after one warm-up call when repeats > 1)."""
    times = []
    if repeats > 1:
        fn()
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_bytes(fn: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


def fmt_s(t: float) -> str:
    if t >= 1:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.1f} ms"
    return f"{t * 1e6:.0f} µs"


def regression_metric_names(pred: Any, exclude: tuple[str, ...] = ()) -> list[str]:
    return [
        s.name
        for s in registry.specs("regression")
        if s.why_not(pred) is None and s.name not in exclude
    ]


# -- 1. get_all_metrics ---------------------------------------------------------------------------
def bench_get_all_metrics(sizes: list[int]) -> list[str]:
    import uncertainty_toolbox as uct

    from uqcore.compat import uncertainty_toolbox_metrics

    lines = [
        "### The numbers of Uncertainty Toolbox's `get_all_metrics` (Gaussian batches)",
        "",
        "Same group sizes, trials and draws for adversarial group calibration as the peer.",
        "",
        "| N | Uncertainty Toolbox | uqcore (`uqcore.compat.uncertainty_toolbox_metrics`) | speed-up |",
        "|---:|---:|---:|---:|",
    ]
    for n in sizes:
        mu, sd, y = gaussian_batch(n)
        pred = P.Gaussian(mu, sd)
        reps_peer = 3 if n <= 10**4 else 1
        t_peer = timeit(
            lambda mu=mu, sd=sd, y=y: uct.get_all_metrics(mu, sd, y, verbose=False), reps_peer
        )
        t_ours = timeit(lambda pred=pred, y=y: uncertainty_toolbox_metrics(pred, y, seed=0), 3)
        lines.append(
            f"| 10^{round(math.log10(n))} | {fmt_s(t_peer)} | {fmt_s(t_ours)} | {t_peer / t_ours:.0f}× |"
        )
        print(lines[-1], flush=True)
    return lines


# -- 2. per metric against the peer and against the numpy floor -------------------------------------
def bench_per_metric(n: int, full: bool) -> list[str]:
    import uncertainty_toolbox as uct

    mu, sd, y = gaussian_batch(n, seed=1)
    pred = P.Gaussian(mu, sd)
    lines = [
        f"### Per metric at N = 10^{round(math.log10(n))}",
        "",
        "| metric | uqcore | compared with | its time | ratio (them / uqcore) |",
        "|---|---:|---|---:|---:|",
    ]

    def row(
        name: str, ours: Callable[[], Any], label: str, theirs: Callable[[], Any], reps: int
    ) -> None:
        t_ours = timeit(ours, 5)
        t_them = timeit(theirs, reps)
        lines.append(
            f"| `{name}` | {fmt_s(t_ours)} | {label} | {fmt_s(t_them)} | {t_them / t_ours:.1f}× |"
        )
        print(lines[-1], flush=True)

    peer_reps = 1 if n >= 10**6 else 3
    row(
        "ece",
        lambda: metric("ece", pred, y, compat="uncertainty_toolbox"),
        "UT `mean_absolute_calibration_error`",
        lambda: uct.mean_absolute_calibration_error(mu, sd, y),
        peer_reps,
    )
    row(
        "rmsce",
        lambda: metric("rmsce", pred, y, compat="uncertainty_toolbox"),
        "UT `root_mean_squared_calibration_error`",
        lambda: uct.root_mean_squared_calibration_error(mu, sd, y),
        peer_reps,
    )
    row(
        "check_score",
        lambda: metric("check_score", pred, y),
        "UT `check_score`",
        lambda: uct.check_score(mu, sd, y),
        peer_reps,
    )
    row(
        "interval_score",
        lambda: metric("interval_score", pred, y),
        "UT `interval_score`",
        lambda: uct.interval_score(mu, sd, y),
        peer_reps,
    )
    if full:
        row(
            "adversarial_group_calibration",
            lambda: metric("adversarial_group_calibration", pred, y, seed=0),
            "UT `adversarial_group_calibration`",
            lambda: uct.adversarial_group_calibration(
                mu, sd, y, cali_type="mean_abs", verbose=False
            ),
            1,
        )
    else:
        m = min(n, 10**5)
        mu2, sd2, y2 = mu[:m], sd[:m], y[:m]
        pred2 = P.Gaussian(mu2, sd2)
        t_o = timeit(lambda: metric("adversarial_group_calibration", pred2, y2, seed=0), 3)
        t_t = timeit(
            lambda: uct.adversarial_group_calibration(
                mu2, sd2, y2, cali_type="mean_abs", verbose=False
            ),
            1,
        )
        lines.append(
            f"| `adversarial_group_calibration` (N = 10^5) | {fmt_s(t_o)} | UT `adversarial_group_calibration` | {fmt_s(t_t)} | {t_t / t_o:.1f}× |"
        )
        print(lines[-1], flush=True)

    # the floor: one direct numpy expression of the same formula
    def floor_nll() -> float:
        z = (y - mu) / sd
        return float(np.mean(0.5 * z * z + np.log(sd)) + 0.5 * math.log(2 * math.pi))

    def floor_crps() -> float:
        z = (y - mu) / sd
        return float(
            np.mean(
                sd
                * (
                    z * (2 * sps.ndtr(z) - 1)
                    + 2 * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
                    - 1 / math.sqrt(math.pi)
                )
            )
        )

    floors = {
        "mae": lambda: float(np.mean(np.abs(y - mu))),
        "rmse": lambda: float(np.sqrt(np.mean((y - mu) ** 2))),
        "nll": floor_nll,
        "crps": floor_crps,
        "sharpness": lambda: float(np.sqrt(np.mean(sd**2))),
    }
    for name, fn in floors.items():
        row(
            name,
            lambda name=name: metric(name, pred, y),
            "numpy expression of the formula (floor)",
            fn,
            5,
        )
    return lines


# -- 3. all metrics at large N: time vs two argsorts, peak memory ----------------------------------
def bench_all_at(n: int) -> list[str]:
    mu, sd, y = gaussian_batch(n, seed=2)
    pred = P.Gaussian(mu, sd)
    names = regression_metric_names(pred, exclude=("adversarial_group_calibration",))

    def run() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return evaluate(pred, y, metrics=names)

    t_eval = timeit(run, 3 if n <= 10**6 else 2)
    t_sort = timeit(lambda: (np.argsort(y), np.argsort(mu)), 3)
    peak = peak_bytes(run)
    lines = [
        f"### All applicable regression metrics of a Gaussian batch at N = 10^{round(math.log10(n))}",
        "",
        f"{len(names)} metrics (all but `adversarial_group_calibration`): {', '.join(f'`{m}`' for m in names)}.",
        "",
        "| quantity | value |",
        "|---|---:|",
        f"| `evaluate(...)` | {fmt_s(t_eval)} |",
        f"| two float64 argsorts of N values | {fmt_s(t_sort)} |",
        f"| ratio (target < 3) | {t_eval / t_sort:.2f} |",
        f"| peak new memory during `evaluate` | {peak / 2**20:.0f} MiB = {peak / (8 * n):.1f} × 8 × N bytes (target < 12) |",
    ]
    for line in lines[-4:]:
        print(line, flush=True)
    return lines


def bench_scaling(sizes: list[int]) -> list[str]:
    lines = [
        "### Growth with N (all metrics but adversarial group calibration, one evaluate call)",
        "",
        "| N | time | time / (N log2 N) relative to the smallest N |",
        "|---:|---:|---:|",
    ]
    base = None
    for n in sizes:
        mu, sd, y = gaussian_batch(n, seed=3)
        pred = P.Gaussian(mu, sd)
        names = regression_metric_names(pred, exclude=("adversarial_group_calibration",))

        def run(pred: Any = pred, y: Any = y, names: list[str] = names) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return evaluate(pred, y, metrics=names)

        t = timeit(run, 3)
        per = t / (n * math.log2(n))
        base = base or per
        lines.append(f"| 10^{round(math.log10(n))} | {fmt_s(t)} | {per / base:.2f} |")
        print(lines[-1], flush=True)
    return lines


def bench_samples(n_total: int) -> list[str]:
    lines = [
        '### Samples: CRPS (`estimator="nrg"`) cost per row as S grows (N·S fixed)',
        "",
        "| S | N | time | time / (N·S·log2 S) relative to S = 8 |",
        "|---:|---:|---:|---:|",
    ]
    base = None
    rng = np.random.default_rng(4)
    for s in (8, 64, 512, 4096):
        n = n_total // s
        draws = rng.normal(size=(n, s))
        y = rng.normal(size=n)
        pred = P.Samples(draws)
        t = timeit(lambda pred=pred, y=y: metric("crps", pred, y), 3)
        per = t / (n * s * math.log2(s))
        base = base or per
        lines.append(f"| {s} | {n} | {fmt_s(t)} | {per / base:.2f} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--full", action="store_true", help="include the peer's slow runs at N = 10^6"
    )
    parser.add_argument("--max-n", type=int, default=10**7, help="largest N for uqcore-only runs")
    args = parser.parse_args()

    import uncertainty_toolbox

    header = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}, scipy {scipy.__version__}, uqcore {uqcore.__version__}, "
        f"uncertainty-toolbox {getattr(uncertainty_toolbox, '__version__', '0.1.1')}. "
        f"Run: `python benchmarks/regression.py{' --full' if args.full else ''}`, "
        f"{time.strftime('%Y-%m-%d')}.",
        "",
    ]
    sections: list[str] = [*header]
    sizes_peer = [10**3, 10**4, 10**5] + ([10**6] if args.full else [])
    sections += [*bench_get_all_metrics(sizes_peer), ""]
    sections += [*bench_per_metric(10**6, args.full), ""]
    sections += [*bench_all_at(args.max_n), ""]
    sections += [*bench_scaling([10**k for k in range(3, round(math.log10(args.max_n)) + 1)]), ""]
    sections += [*bench_samples(2**21), ""]
    write_section("Regression metrics (uqcore)", "\n".join(sections))


if __name__ == "__main__":
    main()
