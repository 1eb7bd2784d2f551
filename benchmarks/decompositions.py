"""Score decompositions at N = 10^6: CORP, Murphy's Brier terms, WIS and the Murphy diagram,
against one sort of N values and against the peers.

Run from the repository root:

    python benchmarks/decompositions.py           # N = 10^6, 3 repetitions
    python benchmarks/decompositions.py --quick   # N = 10^5

Writes the "Score decompositions" section of ``benchmarks/RESULTS.md``.

The floor is ``numpy.sort`` of N float64 values, timed in the same run, in alternation with the
metrics (medians of the repetitions). Each metric is one public call on fresh arrays (a new
batch: nothing cached from an earlier call); "the set" is one ``uqcore.evaluate`` of the three
(or four) components, which share one computation. The CORP target is one sort and one PAV
pass: within 3× of the floor.

Peers: model-diagnostics' ``decompose`` (``SquaredError``; ``PinballLoss`` with
``functional="quantile"``; it has no weighted quantile fit), timed on the same forecasts, and
scoringrules' ``weighted_interval_score`` on the 23 quantiles given as arrays (ours reads them
from a ``Quantiles`` prediction). model-diagnostics' quantile fit recomputes a block's
quantile at each merge and takes about a minute at N = 10^6: it is timed once.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uqcore
from benchmarks._results import write_section
from uqcore import predictions as P
from uqcore.regression.decomposition import HUB_COVERAGES
from uqcore.score_curves import murphy_diagram


def timed(fn: Callable[[], Any], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = 10**5 if args.quick else 10**6
    rng = np.random.default_rng(0)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, n)
    y = 0.8 * mu + sd * rng.normal(size=n) + 0.1
    gauss = P.Gaussian(mu, sd)
    alphas = np.sort(1.0 - np.asarray(HUB_COVERAGES))
    levels = np.concatenate([alphas / 2, [0.5], 1 - alphas[::-1] / 2])
    qvals = np.asarray(gauss.ppf(levels))
    quant = P.Quantiles(levels, qvals)
    p1 = 1.0 / (1.0 + np.exp(-(mu + 0.3 * rng.normal(size=n))))
    probs = np.stack([1 - p1, p1], axis=1)
    labels = (rng.random(n) < 1.0 / (1.0 + np.exp(-mu))).astype(int)
    cls = P.Probs(probs)
    q3 = np.asarray(gauss.ppf([0.3]))[:, 0]
    floor_data = rng.normal(size=n)

    def call(name: str, pred: Any, target: Any, **opts: Any) -> Callable[[], Any]:
        return lambda: uqcore.metric(name, pred, target, **opts)

    def evaluate(names: list[str], pred: Any, target: Any, params: Any = None) -> Any:
        return lambda: uqcore.evaluate(pred, target, metrics=names, params=params)

    corp3 = ["corp_mcb", "corp_dsc", "corp_unc"]
    q_params = {m: {"functional": "quantile", "level": 0.3} for m in corp3}
    wis4 = ["wis", "wis_dispersion", "wis_overprediction", "wis_underprediction"]
    brier3 = ["brier_reliability", "brier_resolution", "brier_uncertainty"]
    rows: list[tuple[str, Callable[[], Any], str]] = [
        ("regression corp_mcb (mean, Gaussian)", call("corp_mcb", gauss, y), "md_mean"),
        ("regression corp set of 3 (mean)", evaluate(corp3, gauss, y), "md_mean"),
        (
            "regression corp_mcb (quantile 0.3)",
            call("corp_mcb", gauss, y, functional="quantile", level=0.3),
            "md_quantile",
        ),
        (
            "regression corp set of 3 (quantile 0.3)",
            evaluate(corp3, gauss, y, q_params),
            "md_quantile",
        ),
        ("wis (23 quantiles, Quantiles kind)", call("wis", quant, y), "sr_wis"),
        ("wis set of 4 (Quantiles kind)", evaluate(wis4, quant, y), "sr_wis"),
        ("wis (Gaussian, 23 levels)", call("wis", gauss, y), "sr_wis"),
        ("classification corp_mcb (top label, C = 2)", call("corp_mcb", cls, labels), ""),
        (
            "classification corp set of 3 (binary)",
            evaluate(corp3, cls, labels, {m: {"target": "binary"} for m in corp3}),
            "",
        ),
        ("brier_reliability set of 3 (10 bins)", evaluate(brier3, cls, labels), ""),
        ("murphy_diagram curve (mean, 101 θ)", lambda: murphy_diagram(gauss, y), ""),
    ]
    peers: dict[str, tuple[str, Callable[[], Any], int]] = {}
    try:
        from model_diagnostics.scoring import PinballLoss, SquaredError, decompose

        peers["md_mean"] = (
            "model-diagnostics decompose (SquaredError)",
            lambda: decompose(y, mu, scoring_function=SquaredError()),
            args.repeat,
        )
        peers["md_quantile"] = (
            "model-diagnostics decompose (PinballLoss 0.3)",
            lambda: decompose(
                y, q3, scoring_function=PinballLoss(level=0.3), functional="quantile", level=0.3
            ),
            1,
        )
    except ImportError:
        pass
    try:
        import scoringrules as sr

        k = alphas.shape[0]
        lo, up, med = qvals[:, :k], qvals[:, k + 1 :][:, ::-1], qvals[:, k]
        peers["sr_wis"] = (
            "scoringrules weighted_interval_score",
            lambda: np.mean(sr.weighted_interval_score(y, med, lo, up, alphas)),
            args.repeat,
        )
    except ImportError:
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        floor = []
        ours = {}
        for label, fn, _ in rows:
            floor.append(timed(lambda: np.sort(floor_data), args.repeat))
            fn()  # warm (imports)
            ours[label] = timed(fn, args.repeat)
        floor.append(timed(lambda: np.sort(floor_data), args.repeat))
        peer_times = {key: timed(fn, rep) for key, (_, fn, rep) in peers.items()}
    f = statistics.median(floor)
    lines = [
        f"`python benchmarks/decompositions.py{' --quick' if args.quick else ''}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()}, "
        f"numpy {np.__version__}; N = {n:,}, median of {args.repeat}). Floor: one "
        f"`np.sort` of N float64 = {f * 1e3:.1f} ms (timed between the metrics).",
        "",
        "| metric | time | × floor | peer | peer time | peer / ours |",
        "|---|---|---|---|---|---|",
    ]
    for label, _, key in rows:
        t = ours[label]
        if key in peers:
            name, _, rep = peers[key]
            pt = peer_times[key]
            note = "" if rep == args.repeat else f" (×{rep})"
            peer = f"{name}{note} | {pt:.3f} s | {pt / t:.1f}×"
        else:
            peer = "— | — | —"
        lines.append(f"| {label} | {t * 1e3:.0f} ms | {t / f:.1f}× | {peer} |")
    body = "\n".join(lines)
    print(body)
    write_section("Score decompositions", body)


if __name__ == "__main__":
    main()
