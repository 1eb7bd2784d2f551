"""Skill scores and smooth calibration: each metric at N = 10^6 against one sort and the peers.

Run from the repository root:

    python benchmarks/skill.py            # N = 10^6, 3 repetitions (about 1 minute)

Writes the "Skill scores and smooth calibration" section of ``benchmarks/RESULTS.md``.

Each metric is timed through ``uqcore.metric`` (a fresh batch per call: validation, the
model's score and the climatological reference), in alternation with the floor, one
``np.sort`` of N float64 values, and with the peer's own function where one exists
(scikit-learn's D² scores, relplot's ``smECE``) on the same arrays; medians of the
repetitions. The classification inputs are N×C probabilities (C = 10): reading them is part
of every metric's work and of the peers'.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import relplot
import sklearn.metrics as skm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import write_section
from benchmarks.regression import machine
from uqcore import metric
from uqcore import predictions as P

SECTION = "Skill scores and smooth calibration"


def _median(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def cases(
    n: int, seed: int = 0
) -> list[tuple[str, Callable[[], Any], str, Callable[[], Any] | None]]:
    """(what, uqcore call, peer name, peer call) on shared arrays."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    g = P.Gaussian(mu, sd)
    med = mu.copy()  # the median of the Gaussian
    interval = P.Interval(mu - 1.645 * sd, mu + 1.645 * sd, level=0.9)
    c = 10
    logits = rng.normal(size=(n, c)) * 2.0
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (p.cumsum(axis=1) < rng.uniform(size=n)[:, None]).sum(axis=1).clip(0, c - 1)
    probs = P.Probs(p)
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == labels).astype(float)
    pb = np.c_[1.0 - p[:, 0], p[:, 0]]
    yb = (labels == 0).astype(int)
    binary = P.Probs(pb)
    return [
        ("crps_skill (Gaussian)", lambda: metric("crps_skill", g, y), "", None),
        (
            "check_score_skill (Gaussian, levels=[0.5])",
            lambda: metric("check_score_skill", g, y, levels=[0.5]),
            "sklearn d2_absolute_error_score",
            lambda: skm.d2_absolute_error_score(y, med),
        ),
        (
            "check_score_skill (Gaussian, 99 levels)",
            lambda: metric("check_score_skill", g, y),
            "",
            None,
        ),
        (
            "interval_score_skill (Interval, level 0.9)",
            lambda: metric("interval_score_skill", interval, y),
            "",
            None,
        ),
        ("nll_skill (Gaussian)", lambda: metric("nll_skill", g, y), "", None),
        (
            "brier_skill (C = 10)",
            lambda: metric("brier_skill", probs, labels),
            "sklearn d2_brier_score",
            lambda: skm.d2_brier_score(labels, p, labels=list(range(c))),
        ),
        (
            "brier_skill (binary)",
            lambda: metric("brier_skill", binary, yb, variant="binary"),
            "sklearn d2_brier_score",
            lambda: skm.d2_brier_score(yb, pb[:, 1]),
        ),
        (
            "log_loss_skill (C = 10)",
            lambda: metric("log_loss_skill", probs, labels),
            "sklearn d2_log_loss_score",
            lambda: skm.d2_log_loss_score(labels, p, labels=list(range(c))),
        ),
        (
            "smooth_ece (top label, C = 10)",
            lambda: metric("smooth_ece", probs, labels),
            "relplot smECE (on the confidences)",
            lambda: relplot.smECE(conf, correct),
        ),
        (
            "spiegelhalter_z (top label, C = 10)",
            lambda: metric("spiegelhalter_z", probs, labels),
            "",
            None,
        ),
    ]


def run(n: int, repeat: int) -> str:
    rng = np.random.default_rng(1)
    x = rng.normal(size=n)
    rows = []
    t_start = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for what, ours, peer_name, peer in cases(n):
            ours()  # warm-up
            t_sort = _median(lambda: np.sort(x), repeat)
            t_ours = _median(ours, repeat)
            t_peer = _median(peer, repeat) if peer is not None else None
            peer_cell = (
                f"{peer_name}: {t_peer * 1e3:.0f} ms ({t_ours / t_peer:.2f}×)"
                if t_peer is not None
                else "—"
            )
            rows.append(
                f"| {what} | {t_ours * 1e3:.0f} | {t_sort * 1e3:.0f} | "
                f"{t_ours / t_sort:.2f}× | {peer_cell} |"
            )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    minutes = (time.time() - t_start) / 60
    head = (
        f"`python benchmarks/skill.py` ({stamp}, {minutes:.1f} min; {machine()}, shared with "
        f"other work). N = {n:,}, medians of {repeat} runs; the floor is one `np.sort` of N "
        "float64 timed in alternation with each metric; the peer ratio is uqcore / peer.\n\n"
        "| metric | uqcore ms | np.sort ms | / sort | peer (uqcore / peer) |\n"
        "|---|---|---|---|---|\n"
    )
    note = (
        "\nThe regression skill scores are one sort of y (the climatology) plus the model's "
        "score; the classification ones read the N×C probabilities once. `smooth_ece` is "
        "above 3× one sort: its top-label confidences need an argmax over N×C, and the "
        "bandwidth search evaluates smECE_σ at up to 12 bandwidths (the grid sums are made "
        "once per grid size, each σ then costs a convolution of ~1000 points); it is level "
        "with relplot's own `smECE`, which runs the same search on precomputed confidences.\n"
    )
    return head + "\n".join(rows) + "\n" + note


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    body = run(args.n, args.repeat)
    print(body)
    if not args.no_write:
        write_section(SECTION, body)


if __name__ == "__main__":
    main()
