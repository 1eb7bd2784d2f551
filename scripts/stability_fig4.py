"""xiong2024 Fig. 4: convergence and bias of the mean of UQ metrics with the test-set size.

The heteroscedastic dataset of xiong2024 §IV-A: x ~ U[−1, 1], y = cos(1.5πx) + ε with
ε ~ N(0, 0.4·|cos(1.5πx)|). One test set of N = 2^16 points; the metrics on nested subsets
(Fig. 4a, one path) and on 100 independent subsets per size 2^3, …, 2^16 (Fig. 4b), for

- the true distribution N(cos(1.5πx), 0.4|cos(1.5πx)|), and
- a deliberately imperfect prediction: mean shifted by 0.05 and std 0.15 + 0.2|x| (it gets the
  shape of the heteroscedasticity wrong, but its uncertainty still varies, so that Spearman and
  AUSE are defined).

Run from the repository root:

    python scripts/stability_fig4.py [--repeats 100] [--log2n 16] [--out docs/stability]

Writes ``fig4.json`` (the figure data: sizes, paths, means, stds, quantiles, minimum reliable
sizes) and ``fig4.md`` (the summary table) to ``--out``, and with matplotlib (the ``plots``
extra) ``fig4a.png`` / ``fig4b.png``. Metrics not registered yet are skipped and listed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uqcore import predictions as P
from uqcore import registry
from uqcore.stability import convergence, minimum_reliable_size

#: The paper's four metrics (its "calibration error" is Kuleshov's, ``calibration_error``).
PAPER_METRICS = ("calibration_error", "ause", "nll", "spearman")
EXTRA_METRICS = ("ece", "mae", "crps", "ence")


def heteroscedastic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, the true mean and std, and y, per xiong2024 §IV-A (std floored at 1e-9)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=n)
    mean = np.cos(1.5 * np.pi * x)
    std = np.maximum(0.4 * np.abs(mean), 1e-9)
    y = mean + std * rng.normal(size=n)
    return x, mean, std, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=0.1, help="relative tolerance")
    ap.add_argument("--abs-tolerance", type=float, default=0.01, help="absolute tolerance")
    ap.add_argument("--out", type=Path, default=Path("docs/stability"))
    args = ap.parse_args()
    n = 2**args.log2n
    x, mean, std, y = heteroscedastic(n, args.seed)
    models = {
        "true": P.Gaussian(mean, std),
        "imperfect": P.Gaussian(mean + 0.05, 0.15 + 0.2 * np.abs(x)),
    }
    known = set(registry.names())
    names = [m for m in (*PAPER_METRICS, *EXTRA_METRICS) if m in known]
    missing = [m for m in PAPER_METRICS if m not in known]
    doc: dict[str, Any] = {"n": n, "seed": args.seed, "repeats": args.repeats, "models": {}}
    rows = []
    for label, pred in models.items():
        t0 = time.perf_counter()
        cur = convergence(
            pred, y, names, repeats=args.repeats, seed=args.seed, tolerance=args.tolerance
        )
        elapsed = time.perf_counter() - t0
        d = cur.to_dict()
        doc["models"][label] = d
        doc["sizes"] = d["sizes"]
        for name in names:
            e = cur[name]
            bias = e["bias"]
            small = d["sizes"].index(32) if 32 in d["sizes"] else 0
            size_abs = minimum_reliable_size(
                d["sizes"],
                e["spread_low"],
                e["spread_high"],
                e["value"],
                args.abs_tolerance,
                "absolute",
            )
            e["min_reliable_size_absolute"] = size_abs
            rows.append(
                (
                    label,
                    name,
                    e["value"],
                    e["min_reliable_size"],
                    size_abs,
                    bias[0],
                    bias[small],
                    e["std"][small],
                )
            )
        print(f"{label}: {elapsed:.1f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fig4.json").write_text(json.dumps(doc, allow_nan=False))
    lines = [
        f"# xiong2024 Fig. 4 on the heteroscedastic dataset (N = 2^{args.log2n}, "
        f"{args.repeats} subsets per size, seed {args.seed})",
        "",
        "Minimum reliable size: smallest size from which the 5–95% range of the 100 subset "
        f"values stays within ±{args.tolerance:g}·|full value| (relative) or "
        f"±{args.abs_tolerance:g} (absolute) of the full-set value at every larger size.",
        "",
        "| model | metric | full value | reliable from (rel.) | reliable from (abs.) "
        "| bias of mean at 8 | bias at 32 | std at 32 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, name, value, size, size_abs, b8, b32, s32 in rows:
        lines.append(
            f"| {label} | {name} | {_fmt(value)} | {size} | {size_abs} | {_fmt(b8)} "
            f"| {_fmt(b32)} | {_fmt(s32)} |"
        )
    if missing:
        lines += ["", f"Not registered yet (skipped): {', '.join(missing)}."]
    (args.out / "fig4.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _plots(doc, names, args.out)


def _fmt(v: Any) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def _plots(doc: dict[str, Any], names: list[str], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (the 'plots' extra): figures skipped")
        return
    sizes = doc["sizes"]
    for fig_name, key in (("fig4a", "path"), ("fig4b", "mean")):
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.0), squeeze=False)
        for ax, name in zip(axes[0], names, strict=True):
            for label, d in doc["models"].items():
                e = d["results"][name]
                vals = [np.nan if v is None else v for v in e[key]]
                ax.plot(sizes, vals, marker="o", ms=3, label=label)
                if key == "mean":
                    lo = [np.nan if v is None else v for v in e["quantiles"]["0.05"]]
                    hi = [np.nan if v is None else v for v in e["quantiles"]["0.95"]]
                    ax.fill_between(sizes, lo, hi, alpha=0.15)
            ax.set_xscale("log", base=2)
            ax.set_title(name)
            ax.set_xlabel("test-set size")
        axes[0][0].legend()
        fig.tight_layout()
        fig.savefig(out / f"{fig_name}.png", dpi=120)
        plt.close(fig)


if __name__ == "__main__":
    main()
