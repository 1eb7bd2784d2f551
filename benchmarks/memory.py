"""Checks the job memory estimate (service/memory.py) against the measured peak of real jobs.

Each job of a grid of shapes (prediction kinds and widths, N, bootstrap resamples and method,
stability repeats, curves, bins, estimators) runs the worker's computation
(:func:`worker.evaluation.compute`, numpy backend) in a fresh Python process: after a small
warm-up job of the same shape (imports, caches), the peak resident set is reset
(``/proc/self/clear_refs``) and ``tracemalloc`` started; the measured peak of the job is its
inputs plus the larger of the traced peak (numpy reports its buffers to it) and the growth of
the peak resident set. The check: measured <= estimate <= 4 × measured for every row.

Run from the repository root:

    python benchmarks/memory.py            # the grid (about 5 minutes on 2 cores)
    python benchmarks/memory.py --quick    # a few small rows (prints, writes nothing)

Writes the "Memory estimate" section of ``benchmarks/RESULTS.md`` and exits 1 when a row fails
the check.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# first: this file's folder holds benchmarks/service.py, which would shadow the package
sys.path.insert(0, str(ROOT))

#: The largest accepted ratio estimate / measured.
MAX_RATIO = 4.0

#: (label, kind, N, width, analyses)
GRID: list[tuple[str, str, int, int, dict[str, Any]]] = [
    ("gaussian", "gaussian", 200_000, 1, {}),
    ("gaussian", "gaussian", 800_000, 1, {}),
    ("gaussian, curves", "gaussian", 200_000, 1, {"curves": True}),
    (
        "gaussian, 3 × n_bins 10⁴",
        "gaussian",
        200_000,
        1,
        {
            "params": {
                "ence": {"n_bins": 10_000},
                "pit": {"n_bins": 10_000},
                "uce": {"n_bins": 10_000},
            }
        },
    ),
    ("gaussian, B 200", "gaussian", 50_000, 1, {"bootstrap": {"n_resamples": 200}}),
    ("gaussian, B 200", "gaussian", 200_000, 1, {"bootstrap": {"n_resamples": 200}}),
    ("gaussian, B 30", "gaussian", 800_000, 1, {"bootstrap": {"n_resamples": 30}}),
    (
        "gaussian, B 100 BCa",
        "gaussian",
        200_000,
        1,
        {"bootstrap": {"n_resamples": 100, "method": "bca"}},
    ),
    (
        "gaussian, stability R 5",
        "gaussian",
        200_000,
        1,
        {"stability": {"enabled": True, "repeats": 5}},
    ),
    (
        "gaussian, stability R 20",
        "gaussian",
        20_000,
        1,
        {"stability": {"enabled": True, "repeats": 20}},
    ),
    ("samples S 32", "samples", 100_000, 32, {}),
    ("samples S 128", "samples", 100_000, 128, {}),
    ("samples S 32, B 100", "samples", 100_000, 32, {"bootstrap": {"n_resamples": 100}}),
    ("mixture K 8", "mixture", 10_000, 8, {}),
    ("quantiles Q 19", "quantiles", 100_000, 19, {}),
    ("probs C 10", "probs", 200_000, 10, {}),
    ("probs C 100", "probs", 200_000, 100, {}),
    ("probs C 10, curves", "probs", 200_000, 10, {"curves": True}),
    ("probs C 10, B 50", "probs", 100_000, 10, {"bootstrap": {"n_resamples": 50}}),
    (
        "probs C 10, all estimators, B 20",
        "probs",
        50_000,
        10,
        {"estimators": "all", "bootstrap": {"n_resamples": 20}},
    ),
    ("ensemble M 5 C 10", "ensemble", 100_000, 10, {}),
]

QUICK = [row for row in GRID if row[2] <= 50_000][:3]


def make_arrays(kind: str, n: int, width: int, seed: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    """Seeded arrays of a valid submission of ``kind`` with N = ``n`` rows."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    if kind == "gaussian":
        return {"mean": rng.normal(size=n), "std": rng.uniform(0.5, 2, n), "y": y}
    if kind == "samples":
        return {"draws": rng.normal(size=(n, width)), "y": y}
    if kind == "mixture":
        w = rng.uniform(0.1, 1, (n, width))
        w /= w.sum(axis=1, keepdims=True)
        return {
            "weights": w,
            "means": rng.normal(size=(n, width)),
            "stds": rng.uniform(0.5, 2, (n, width)),
            "y": y,
        }
    if kind == "quantiles":
        levels = np.linspace(0.05, 0.95, width)
        return {"levels": levels, "values": np.sort(rng.normal(size=(n, width)), 1), "y": y}
    labels = rng.integers(0, width, n)
    if kind == "probs":
        return {"probs": rng.dirichlet(np.ones(width), n), "labels": labels}
    if kind == "ensemble":
        return {"member_probs": rng.dirichlet(np.ones(width), (5, n)), "labels": labels}
    raise ValueError(f"no arrays for kind {kind!r}")


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def measure_one(kind: str, n: int, width: int, analyses_doc: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process and return its measured peak (see the module's text)."""
    import gc
    import tracemalloc

    from service.analyses import Analyses
    from worker.backend import select_backend
    from worker.evaluation import compute

    analyses = Analyses.model_validate(analyses_doc)
    backend = select_backend("numpy")

    def run(arrays: dict[str, Any]) -> None:
        compute(kind, arrays, analyses, backend=backend, checkpoint=lambda _: None)

    run(make_arrays(kind, min(n, 2000), width, seed=1))  # imports and caches
    arrays = make_arrays(kind, n, width)
    inputs = sum(a.nbytes for a in arrays.values())
    gc.collect()
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # resets the peak resident set (VmHWM) to the current one
    rss0 = _status("VmRSS")
    tracemalloc.start()
    t0 = time.perf_counter()
    run(arrays)
    seconds = time.perf_counter() - t0
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    grown = _status("VmHWM") - rss0
    return {
        "inputs": inputs,
        "traced": traced,
        "rss": grown,
        "measured": inputs + max(traced, grown),
        "seconds": seconds,
    }


def estimate(kind: str, n: int, width: int, analyses_doc: dict[str, Any]) -> Any:
    from service.analyses import Analyses
    from service.memory import estimate_job

    shapes = {k: a.shape for k, a in make_arrays(kind, n, width).items()}
    return estimate_job(kind, n, Analyses.model_validate(analyses_doc), shapes=shapes)


def _mib(b: float) -> str:
    return f"{b / 2**20:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few small rows; writes nothing")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process: one measurement
    args = parser.parse_args()
    if args.one:
        kind, n, width, doc = json.loads(args.one)
        print(json.dumps(measure_one(kind, n, width, doc)))
        return 0
    rows = []
    failed = 0
    for label, kind, n, width, doc in QUICK if args.quick else GRID:
        out = subprocess.run(
            [sys.executable, __file__, "--one", json.dumps([kind, n, width, doc])],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=ROOT,
            check=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        est = estimate(kind, n, width, doc)
        ratio = est.total / got["measured"]
        ok = got["measured"] <= est.total and ratio <= MAX_RATIO
        failed += not ok
        part, _ = est.biggest
        rows.append(
            f"| {label} | {n:,} | {_mib(got['inputs'])} | {_mib(got['traced'])} | "
            f"{_mib(got['rss'])} | {_mib(got['measured'])} | {_mib(est.total)} | {ratio:.2f} | "
            f"{part} | {got['seconds']:.1f} | {'ok' if ok else 'FAIL'} |"
        )
        print(rows[-1], flush=True)
    if args.quick:
        return 1 if failed else 0
    import platform

    from benchmarks._results import write_section

    body = "\n".join(
        [
            "`python benchmarks/memory.py`: the estimate of `service/memory.py` (the per-job "
            "memory budget's check, API and worker) against the measured peak of the same job "
            "(the worker's computation in a fresh process: inputs + max(tracemalloc peak, "
            "growth of the peak resident set)). The check: measured <= estimate <= "
            f"{MAX_RATIO:g} × measured. MiB; {platform.machine()}, Python "
            f"{platform.python_version()}, numpy {np.__version__}.",
            "",
            "| job | N | inputs | traced peak | RSS growth | measured | estimate | "
            "estimate / measured | biggest part | s | check |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
            *rows,
            "",
            f"{len(rows) - failed} of {len(rows)} rows pass.",
        ]
    )
    write_section("Memory estimate", body)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
