"""Bootstrap speed: B = 1000 resamples of the 28 regression metrics of a Gaussian the target
was set for at N = 10^6, side by side with its floor.

The target's metrics are those of ``bootstrap(..., "all")`` on a Gaussian but the ones added
after it was set (:data:`benchmarks.floor.ADDED_LATER`: score decompositions, interval metrics,
skill scores); the bootstrap of every metric ``"all"`` selects is timed too, for information
(``--all-resamples`` of them).

The floor is what any bootstrap of these metrics must do: draw the B count vectors (the
resamples are fixed by the seed: resample i from ``default_rng([seed, 0, i])``) and read the
N × K per-row columns once per block in the (B × N)·(N × K) product of the row sums (K: the
distinct columns the engine's metrics need). Both are timed in the same run as the bootstrap
itself, as is the time per resample of each part of the engine (the product, each block
evaluator, grouped by family) run in turn in one thread (``time.thread_time``: the helper
thread of adversarial group calibration is counted apart, in wall-clock time while the main
thread waits; bootstrap() itself runs the rank, binned and quantile families in a second
helper thread beside the others). With ``--against DIR`` (a copy of an earlier commit's ``uqcore``, e.g.
``git archive <commit> uqcore | tar -x -C DIR``) the same bootstrap call of that version runs
in a subprocess, alternated with this one, and the values of the two are compared.

Run from the repository root:

    python benchmarks/bootstrap_speed.py                    # N = 10^6, B = 1000 (~2 minutes)
    python benchmarks/bootstrap_speed.py --against ../old  # also the earlier version
    python benchmarks/bootstrap_speed.py --against ../old --against-all  # and its "all"
    python benchmarks/bootstrap_speed.py --n 100000 --no-write

Writes the "Bootstrap speed" section of ``benchmarks/RESULTS.md`` (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if "BOOTSTRAP_SPEED_AGAINST" not in os.environ:  # a child imports the earlier uqcore first
    sys.path.insert(0, str(ROOT))

from benchmarks._results import write_section  # noqa: E402
from benchmarks.floor import ADDED_LATER  # noqa: E402
from uqcore import predictions as P  # noqa: E402
from uqcore.stability import bootstrap  # noqa: E402

#: The family of each block evaluator, by the module that defines it.
FAMILIES = {
    "ranks": "ranks (spearman, ause, aurg)",
    "calibration": "calibration (pit, ece, rmsce, calibration_error, miscalibration_area, "
    "adversarial_group_calibration)",
    "binned": "binned (ence, uce)",
    "quantiles": "quantiles (mdae, merci, nmerci)",
    "row_sums": "row-sum functions (pearson, corr, r2, coverage, mean_width)",
}


def gaussian(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    return mu, sd, mu + sd * rng.normal(size=n)


def target_metrics(n: int = 1000) -> list[str]:
    """The metrics of the target: those ``"all"`` selects for a Gaussian, but
    :data:`ADDED_LATER`."""
    from uqcore.stability._engine import select_metrics

    mu, sd, _ = gaussian(n)
    chosen, _ = select_metrics([P.Gaussian(mu, sd)], "all", None)
    return [c.name for c in chosen if c.name not in ADDED_LATER]


def run_bootstrap(
    n: int, b: int, metrics: str | list[str]
) -> tuple[float, float, dict[str, list[float | None]]]:
    """Wall-clock and CPU seconds of ``bootstrap(..., metrics, n_resamples=b)``, and its
    values. The compiled kernels are loaded (or compiled, in a fresh copy of an earlier
    version) before the clock starts, as a worker has them."""
    try:
        from uqcore._compiled import kernels
    except ImportError:  # a version before the compiled kernels
        pass
    else:
        kernels()
    mu, sd, y = gaussian(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        res = bootstrap(P.Gaussian(mu, sd), y, metrics, n_resamples=b, keep_values=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, {k: v["values"] for k, v in res.items()}


def engine_of(n: int, metrics: list[str]) -> Any:
    """The engine ``bootstrap()`` builds for ``metrics`` on the Gaussian of N rows."""
    from uqcore.batch import Batch
    from uqcore.stability._engine import Engine, select_metrics

    mu, sd, y = gaussian(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = P.Gaussian(mu, sd)
        return Engine(Batch(pred, y), select_metrics([pred], metrics, None)[0])


def floor(n: int, b: int, metrics: list[str]) -> tuple[float, float, int]:
    """Seconds to draw the B count vectors (in the blocks bootstrap() uses) and to compute
    the (B × N)·(N × K) product of the engine's K distinct columns, and K."""
    from uqcore.stability._engine import count_block
    from uqcore.stability.weights import Resampler

    engine = engine_of(n, metrics)
    keys = engine._keys
    assert keys is not None
    block = count_block(n, b)
    resampler = Resampler(n)
    buffer = np.empty((block, n), dtype=np.uint8)
    keys.linear(buffer[:1])  # builds the N × K columns (not part of the floor)
    k = int(keys._x.shape[1]) if keys._x is not None else 0
    t_draw = t_product = 0.0
    for start in range(0, b, block):
        t0 = time.perf_counter()
        w = resampler.block(0, range(start, min(start + block, b)), out=buffer)
        t1 = time.perf_counter()
        keys.linear(w)
        t_draw += t1 - t0
        t_product += time.perf_counter() - t1
    return t_draw, t_product, k


def parts(n: int, b: int, metrics: list[str]) -> dict[str, float]:
    """Main-thread seconds per resample of each part of the engine on ``b`` resamples, and
    the helper thread's time; keyed by part."""
    from uqcore.stability import blocks
    from uqcore.stability._engine import count_block
    from uqcore.stability.weights import Resampler

    out: dict[str, float] = collections.Counter()
    engine = engine_of(n, metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keys = engine._keys
        assert keys is not None
        block = count_block(n, b)
        resampler = Resampler(n)
        buffer = np.empty((block, n), dtype=np.uint8)
        keys.linear(buffer[:1])
        step = blocks.rows_per_block(n)
        for start in range(0, b, block):
            t = time.thread_time()
            w = resampler.block(0, range(start, min(start + block, b)), out=buffer)
            out["draw the counts"] += time.thread_time() - t
            t = time.thread_time()
            lin = keys.linear(w)
            out["row sums (one product per block)"] += time.thread_time() - t
            assert lin is not None
            for s in range(0, w.shape[0], step):
                ctx = blocks.context(keys, w[s : s + step], lin[s : s + step])
                for ev in engine._fast.values():
                    family = FAMILIES.get(ev.__module__.rsplit(".", 1)[-1], "other")
                    t = time.thread_time()
                    v = ev(ctx)
                    out[family] += time.thread_time() - t
                    if isinstance(v, blocks.Deferred):
                        t_wall = time.perf_counter()
                        v.result()
                        out["helper thread (adversarial groups), wall-clock"] += (
                            time.perf_counter() - t_wall
                        )
    return {k: v / b for k, v in out.items()}


def child(n: int, b: int, path: str, metrics: list[str]) -> None:
    """In a subprocess: one bootstrap call of the ``uqcore`` found first on the path."""
    wall, cpu, values = run_bootstrap(n, b, metrics)
    Path(path).write_text(json.dumps({"wall": wall, "cpu": cpu, "values": values}))


def against(
    src: Path, n: int, b: int, metrics: str | list[str]
) -> tuple[float, float, dict[str, Any]]:
    """The same bootstrap call of the version of ``uqcore`` under ``src``, in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        env = {**os.environ, "BOOTSTRAP_SPEED_AGAINST": "1", "PYTHONPATH": f"{src}:{ROOT}"}
        code = (
            "import uqcore; from benchmarks.bootstrap_speed import child; "
            f"assert uqcore.__file__.startswith({str(src)!r}), uqcore.__file__; "
            f"child({n}, {b}, {str(out)!r}, {metrics!r})"
        )
        subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=src)
        got = json.loads(out.read_text())
    return got["wall"], got["cpu"], got["values"]


def max_relative_difference(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, str]:
    worst, where = 0.0, ""
    for name in a:
        x = np.array([np.nan if v is None else v for v in a[name]], dtype=float)
        y = np.array([np.nan if v is None else v for v in b.get(name, [])], dtype=float)
        if x.shape != y.shape or not np.array_equal(np.isnan(x), np.isnan(y)):
            return float("inf"), name
        ok = ~np.isnan(x)
        if ok.any():
            rel = float(np.max(np.abs(x[ok] - y[ok]) / np.maximum(np.abs(x[ok]), 1e-300)))
            if rel > worst:
                worst, where = rel, name
    return worst, where


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    got = fn()
    return time.perf_counter() - t0, got


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=10**6, help="N (default 10^6)")
    ap.add_argument("--resamples", type=int, default=1000, help="B (default 1000)")
    ap.add_argument("--parts", type=int, default=64, help="resamples of the per-part table")
    ap.add_argument("--against", type=Path, help="a directory holding an earlier uqcore")
    ap.add_argument(
        "--against-name", default="earlier version", help="what RESULTS calls that version"
    )
    ap.add_argument("--rounds", type=int, default=1, help="bootstrap calls per version")
    ap.add_argument(
        "--all-resamples",
        type=int,
        default=1000,
        help='B of the bootstrap of every metric "all" selects (default 1000; 0 skips it)',
    )
    ap.add_argument(
        "--against-all",
        action="store_true",
        help='with --against: also the earlier version\'s bootstrap of every metric "all" '
        "selects (its own set), once",
    )
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    n, b = args.n, args.resamples
    load_before = os.getloadavg()
    metrics = target_metrics()
    t_draw, t_product, k = floor(n, b, metrics)
    runs: list[tuple[str, float, float]] = []
    values: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for _ in range(args.rounds):
        wall, cpu, values = run_bootstrap(n, b, metrics)
        runs.append(("this version", wall, cpu))
        print(runs[-1], flush=True)
        if args.against is not None:
            wall, cpu, other = against(args.against.resolve(), n, b, metrics)
            runs.append(("earlier version", wall, cpu))
            print(runs[-1], flush=True)
    b_all = args.all_resamples
    every = run_bootstrap(n, b_all, "all") if b_all > 0 else None
    if every is not None:
        print(("all metrics", b_all, *every[:2]), flush=True)
    every_old = None
    if every is not None and args.against is not None and args.against_all:
        every_old = against(args.against.resolve(), n, b_all, "all")
        print(("all metrics, earlier version", b_all, *every_old[:2]), flush=True)
    per_part = parts(n, args.parts, metrics)
    load_after = os.getloadavg()
    best = {label: min((w, c) for lab, w, c in runs if lab == label) for label, _, _ in runs}
    wall, cpu = best["this version"]
    fl = t_draw + t_product
    lines = [
        f"B = {b} bootstrap of the {len(metrics)} regression metrics of a Gaussian the target "
        f'was set for (those `bootstrap(..., "all")` selects but the {len(ADDED_LATER)} '
        f"added since: `{'`, `'.join(ADDED_LATER)}`) at N = {n:.0e}, one process; {platform.processor() or 'cpu'}, {os.cpu_count()} cores "
        f"shared with other jobs (load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after), Python {platform.python_version()}, numpy "
        f"{np.__version__}. All figures from one run.",
        "",
        "Floor: drawing the B count vectors (the resamples the seed defines) and one "
        f"(B × N)·(N × K) product of the K = {k} distinct per-row columns the metrics sum, "
        "in the blocks bootstrap() uses.",
        "",
        "| what | seconds | × floor |",
        "|---|---|---|",
        f"| draw the B count vectors | {t_draw:.2f} | |",
        f"| (B × N)·(N × K) product | {t_product:.2f} | |",
        f"| floor (both) | {fl:.2f} | 1.0× |",
        f"| bootstrap of the {len(metrics)} metrics, this version (CPU {cpu:.2f} s) | "
        f"{wall:.2f} | {wall / fl:.1f}× |",
    ]
    if "earlier version" in best:
        w_old, c_old = best["earlier version"]
        worst, where = max_relative_difference(values, other)
        lines.append(
            f"| the same call, {args.against_name} (CPU {c_old:.2f} s) | {w_old:.2f} "
            f"| {w_old / fl:.1f}× |"
        )
    if every is not None:
        w_all, c_all, got = every
        n_all = len(got)
        scale = b / b_all
        per = f", B = {b_all}, its seconds × {scale:g}" if b_all != b else ""
        lines.append(
            f'| for information: bootstrap(..., "all"), {n_all} metrics{per} '
            f"(CPU {c_all * scale:.2f} s) | {w_all * scale:.2f} | {w_all * scale / fl:.1f}× |"
        )
        if every_old is not None:
            wo, co, got_old = every_old
            lines.append(
                f"| for information: the same, {args.against_name}, {len(got_old)} metrics{per} "
                f"(CPU {co * scale:.2f} s) | {wo * scale:.2f} | {wo * scale / fl:.1f}× |"
            )
    if "earlier version" in best:
        lines += [
            "",
            f"Speed-up {w_old / wall:.2f}× (wall), {c_old / cpu:.2f}× (CPU), the best of "
            f"{args.rounds} alternated round(s) each (this version "
            + ", ".join(f"{w:.2f}" for lab, w, _ in runs if lab == "this version")
            + f" s; {args.against_name} "
            + ", ".join(f"{w:.2f}" for lab, w, _ in runs if lab == "earlier version")
            + f" s); the B values of every metric agree to {worst:.1e} relative (largest: "
            f"{where or 'none'}).",
        ]
    if every is not None and every_old is not None:
        common = {k: v for k, v in every[2].items() if k in every_old[2]}
        worst_all, where_all = max_relative_difference(common, every_old[2])
        lines.append("")
        lines.append(
            f'bootstrap(..., "all"): {every_old[0] / every[0]:.2f}× (wall), '
            f"{every_old[1] / every[1]:.2f}× (CPU), one call each; the B values of the "
            f"{len(common)} metrics both select agree to {worst_all:.1e} relative (largest: "
            f"{where_all or 'none'})."
        )
    lines += [
        "",
        f"CPU time per resample of each part, run in turn in one thread (ms; {args.parts} "
        "resamples drawn as bootstrap() draws them; the helper thread's adversarial groups in "
        "wall-clock time waited for). In bootstrap() the ranks, binned and quantiles families "
        "run in a second helper thread beside the others, and the next block's counts are "
        "drawn in a third while a block is evaluated.",
        "",
        "| part | ms per resample |",
        "|---|---|",
    ]
    for name, sec in sorted(per_part.items(), key=lambda kv: -kv[1]):
        if sec > 0:
            lines.append(f"| {name} | {sec * 1e3:.2f} |")
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("Bootstrap speed", text)


if __name__ == "__main__":
    main()
