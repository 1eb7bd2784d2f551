"""Coverage of bootstrap confidence intervals by simulation, and the bias of biased metrics.

Data: x ~ U[−1, 1], y ~ N(sin(3x), σ(x)) with σ(x) = 0.2 + 0.5|x|. Two predictions:

- ``true``: the data-generating distribution (used for the metrics that are means of per-row
  terms: MAE, RMSE, NLL, CRPS, whose population values are computed on a reference sample);
- ``overconfident``: the true mean with 0.7·σ(x) (its calibration errors, AUSE, Spearman,
  n-MeRCI have a population value away from 0, so coverage is meaningful).

For each N, ``--reps`` independent test sets; on each the percentile and BCa 95% intervals with
B = ``--resamples``; coverage = share of intervals that contain the population value (its
binomial standard error is printed with it). The population value of every metric is the
metric on one reference sample of ``--reference`` rows (2^21 by default).

    python scripts/stability_coverage.py [--reps 1000] [--resamples 1000] [--sizes 50 200 1000]

Writes ``coverage.json`` and ``coverage.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uqcore import metric, registry
from uqcore import predictions as P
from uqcore.stability import bootstrap

MEAN_TYPE = ("mae", "rmse", "nll", "crps")
BIASED = ("ece", "calibration_error", "miscalibration_area", "ence", "ause", "spearman", "nmerci")


def draw(n: int, rng: np.random.Generator) -> dict[str, Any]:
    x = rng.uniform(-1.0, 1.0, size=n)
    mu, sd = np.sin(3 * x), 0.2 + 0.5 * np.abs(x)
    y = mu + sd * rng.normal(size=n)
    return {
        "y": y,
        "true": P.Gaussian(mu, sd),
        "overconfident": P.Gaussian(mu, 0.7 * sd),
    }


def _scalar(v: Any) -> float:
    v = v["value"] if isinstance(v, dict) else v
    return math.nan if v is None else float(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--reference", type=int, default=2**21)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("docs/stability"))
    args = ap.parse_args()
    known = set(registry.names())
    plan = [("true", m) for m in MEAN_TYPE if m in known]
    plan += [("overconfident", m) for m in BIASED if m in known]
    ref = draw(args.reference, np.random.default_rng([args.seed, 999]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        population = {(p, m): _scalar(metric(m, ref[p], ref["y"])) for p, m in plan}
    results: list[dict[str, Any]] = []
    for n in args.sizes:
        rng = np.random.default_rng([args.seed, n])
        hits = {key: {"percentile": 0, "bca": 0} for key in plan}
        estimates: dict[tuple[str, str], list[float]] = {key: [] for key in plan}
        valid = dict.fromkeys(plan, 0)
        t0 = time.perf_counter()
        for rep in range(args.reps):
            data = draw(n, rng)
            for model in ("true", "overconfident"):
                names = [m for p, m in plan if p == model]
                if not names:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = bootstrap(
                        data[model],
                        data["y"],
                        names,
                        n_resamples=args.resamples,
                        seed=rep,
                        method="bca",
                        keep_values=True,
                    )
                for m in names:
                    e = r[m]
                    if e["value"] is None or e["low"] is None:
                        continue
                    key = (model, m)
                    truth = population[key]
                    valid[key] += 1
                    estimates[key].append(e["value"])
                    vals = np.array([np.nan if v is None else v for v in e["values"]])
                    vals = vals[np.isfinite(vals)]
                    lo, hi = np.quantile(vals, [0.025, 0.975])
                    hits[key]["percentile"] += int(lo <= truth <= hi)
                    hits[key]["bca"] += int(e["low"] <= truth <= e["high"])
        elapsed = time.perf_counter() - t0
        for key in plan:
            k = max(valid[key], 1)
            est = np.array(estimates[key])
            results.append(
                {
                    "n": n,
                    "prediction": key[0],
                    "metric": key[1],
                    "population": population[key],
                    "mean_estimate": float(est.mean()) if est.size else None,
                    "bias": float(est.mean() - population[key]) if est.size else None,
                    "coverage_percentile": hits[key]["percentile"] / k,
                    "coverage_bca": hits[key]["bca"] / k,
                    "repetitions": valid[key],
                }
            )
        print(f"N = {n}: {elapsed:.1f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "reps": args.reps,
        "resamples": args.resamples,
        "reference": args.reference,
        "seed": args.seed,
        "level": 0.95,
    }
    (args.out / "coverage.json").write_text(
        json.dumps({**meta, "results": results}, allow_nan=False, indent=1)
    )
    se = math.sqrt(0.95 * 0.05 / args.reps)
    lines = [
        f"# Coverage of 95% bootstrap intervals ({args.reps} repetitions, B = {args.resamples})",
        "",
        f"Binomial standard error of a coverage near 0.95: {se:.3f}. Population values from "
        f"one reference sample of {args.reference} rows.",
        "",
        "| N | prediction | metric | population | bias of the estimate | coverage percentile "
        "| coverage BCa |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['n']} | {r['prediction']} | {r['metric']} | {r['population']:.4g} "
            f"| {r['bias']:.3g} | {r['coverage_percentile']:.3f} | {r['coverage_bca']:.3f} |"
        )
    missing = [m for m in (*MEAN_TYPE, *BIASED) if m not in known]
    if missing:
        lines += ["", f"Not registered yet (skipped): {', '.join(missing)}."]
    (args.out / "coverage.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
