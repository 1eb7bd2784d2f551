"""The metrics of conformal sets and intervals, score decompositions, skill scores and
calibration tests at N = 10^6, each against one sort of N values and against its peer.

Used by ``benchmarks/regression.py`` and ``benchmarks/classification.py`` (their
``--against-sort`` part), each writing its own section of ``benchmarks/RESULTS.md``.

Method. Each row is one public call (``uqcore.metric``, ``uqcore.evaluate`` for a set of
components that share one computation, or the curve's function) on arrays built once: the
prediction is validated inside the call, as a caller's first call would be. The floor is one
``np.sort`` of N float64 values; for CORP it is one sort plus one PAV pass
(``scipy.optimize.isotonic_regression`` of N values), as the target says. Floor, uqcore and
peer are timed in alternation, one warm-up call first, and the medians are compared: the
ratios are the result, absolute times on a shared machine are noise. The target of every
row is uqcore ≤ 3× its floor.

Peers, where one has the metric: MAPIE (set and interval metrics; its ``hsic`` holds N×N
matrices, so it is compared at N = 4,000), model-diagnostics (CORP; its quantile fit takes
about a minute at N = 10^6 and is timed once, only with ``--full``), scoringrules (WIS),
scikit-learn (the D² skill scores) and relplot (smooth ECE, on confidences given ready-made).
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression

import uqcore
from uqcore import predictions as P

TARGET = 3.0


@dataclass
class Case:
    """One row: uqcore's call, its floor and, where one exists, the peer's call."""

    label: str
    ours: Callable[[], Any]
    floor: str = "sort"  # "sort" or "sort+PAV"
    peer: str = ""
    theirs: Callable[[], Any] | None = None
    peer_once: bool = False  # a slow peer: one run, not alternated
    n: int | None = None  # rows of this case when not the run's N (floor of the same N)


def _metric(name: str, pred: Any, y: Any, **opts: Any) -> Callable[[], Any]:
    return lambda: uqcore.metric(name, pred, y, **opts)


def _evaluate(names: list[str], pred: Any, y: Any, params: Any = None) -> Callable[[], Any]:
    return lambda: uqcore.evaluate(pred, y, metrics=names, params=params)


CORP3 = ["corp_mcb", "corp_dsc", "corp_unc"]
WIS4 = ["wis", "wis_dispersion", "wis_overprediction", "wis_underprediction"]
BRIER3 = ["brier_reliability", "brier_resolution", "brier_uncertainty"]


def regression_cases(n: int, *, full: bool = False, hsic_n: int = 4000) -> list[Case]:
    """Every regression metric of the family on a Gaussian batch and the intervals, sets of
    quantiles and point forecasts derived from it."""
    import scoringrules as sr
    import sklearn.metrics as skm
    from mapie.metrics import regression as mr
    from model_diagnostics.scoring import PinballLoss, SquaredError, decompose

    from uqcore.regression.decomposition import HUB_COVERAGES
    from uqcore.score_curves import murphy_diagram

    rng = np.random.default_rng(0)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, n)
    y = 0.8 * mu + sd * rng.normal(size=n) + 0.1
    gauss = P.Gaussian(mu, sd)
    alphas = np.sort(1.0 - np.asarray(HUB_COVERAGES))
    levels = np.concatenate([alphas / 2, [0.5], 1 - alphas[::-1] / 2])
    qvals = np.asarray(gauss.ppf(levels))
    quant = P.Quantiles(levels, qvals)
    k = alphas.shape[0]
    q_lo, q_up, q_med = qvals[:, :k], qvals[:, k + 1 :][:, ::-1], qvals[:, k]
    q3 = np.asarray(gauss.ppf([0.3]))[:, 0]
    half = 1.645 * sd
    interval = P.Interval(mu - half, mu + half, level=0.9)
    pis = np.stack([interval.lower, interval.upper], axis=1)[:, :, None]
    # widths on a grid of 1/256: about 1,000 distinct widths
    few = P.Interval(mu - np.round(half * 256) / 256, mu + np.round(half * 256) / 256, level=0.9)
    small = P.Interval(interval.lower[:hsic_n], interval.upper[:hsic_n], level=0.9)
    y_small = y[:hsic_n]
    pis_small = pis[:hsic_n]
    q_params = {m: {"functional": "quantile", "level": 0.3} for m in CORP3}
    md_mean = "model-diagnostics `decompose` (SquaredError)"
    md_q = "model-diagnostics `decompose` (PinballLoss 0.3)"

    def md_quantile() -> Any:
        return decompose(
            y, q3, scoring_function=PinballLoss(level=0.3), functional="quantile", level=0.3
        )

    sr_wis = "scoringrules `weighted_interval_score`"

    def wis_peer() -> Any:
        return np.mean(sr.weighted_interval_score(y, q_med, q_lo, q_up, alphas))

    cases = [
        # conformal intervals
        Case(
            "`coverage` (Interval)",
            _metric("coverage", interval, y),
            peer="MAPIE `regression_coverage_score`",
            theirs=lambda: mr.regression_coverage_score(y, pis),
        ),
        Case(
            "`mean_width` (Interval)",
            _metric("mean_width", interval, y),
            peer="MAPIE `regression_mean_width_score`",
            theirs=lambda: mr.regression_mean_width_score(pis),
        ),
        Case(
            "`interval_score` (Interval)",
            _metric("interval_score", interval, y),
            peer="MAPIE `regression_mwi_score`",
            theirs=lambda: mr.regression_mwi_score(y, pis, 0.9),
        ),
        Case(
            "`cwc`",
            _metric("cwc", interval, y),
            peer="MAPIE `coverage_width_based` (another criterion)",
            theirs=lambda: mr.coverage_width_based(y, interval.lower, interval.upper, 50.0, 0.9),
        ),
        Case(
            "`size_stratified_coverage`",
            _metric("size_stratified_coverage", interval, y),
            peer="MAPIE `regression_ssc_score`",
            theirs=lambda: mr.regression_ssc_score(y, pis, 3),
        ),
        Case(
            '`size_stratified_coverage` (strata="mapie")',
            _metric("size_stratified_coverage", interval, y, strata="mapie"),
            peer="MAPIE `regression_ssc_score`",
            theirs=lambda: mr.regression_ssc_score(y, pis, 3),
        ),
        Case("`coverage_pvalue`", _metric("coverage_pvalue", interval, y)),
        Case(
            "`hsic_width_coverage` (continuous widths)",
            _metric("hsic_width_coverage", interval, y, max_distinct=n + 1),
        ),
        Case(
            "`hsic_width_coverage` (about 1,000 distinct widths)",
            _metric("hsic_width_coverage", few, y),
        ),
        Case(
            '`hsic_width_coverage` (statistic="mapie", kernel_size=1)',
            _metric("hsic_width_coverage", small, y_small, kernel_size=1.0, statistic="mapie"),
            peer="MAPIE `hsic` (N×N matrices)",
            theirs=lambda: mr.hsic(y_small, pis_small),
            peer_once=True,
            n=hsic_n,
        ),
        # decompositions
        Case(
            "`corp_mcb` (mean, Gaussian)",
            _metric("corp_mcb", gauss, y),
            floor="sort+PAV",
            peer=md_mean,
            theirs=lambda: decompose(y, mu, scoring_function=SquaredError()),
        ),
        Case(
            "CORP set of 3 (mean)",
            _evaluate(CORP3, gauss, y),
            floor="sort+PAV",
            peer=md_mean,
            theirs=lambda: decompose(y, mu, scoring_function=SquaredError()),
        ),
        Case(
            "`corp_mcb` (quantile 0.3)",
            _metric("corp_mcb", gauss, y, functional="quantile", level=0.3),
            floor="sort+PAV",
            peer=md_q if full else "",
            theirs=md_quantile if full else None,
            peer_once=True,
        ),
        Case(
            "CORP set of 3 (quantile 0.3)",
            _evaluate(CORP3, gauss, y, q_params),
            floor="sort+PAV",
        ),
        Case("`wis` (Quantiles, 23)", _metric("wis", quant, y), peer=sr_wis, theirs=wis_peer),
        Case(
            "WIS set of 4 (Quantiles, 23)", _evaluate(WIS4, quant, y), peer=sr_wis, theirs=wis_peer
        ),
        Case("`wis` (Gaussian, 23 levels)", _metric("wis", gauss, y), peer=sr_wis, theirs=wis_peer),
        Case("`murphy_diagram` (mean, 101 θ)", lambda: murphy_diagram(gauss, y)),
        Case(
            "`murphy_diagram` (quantile 0.3, 101 θ)",
            lambda: murphy_diagram(gauss, y, functional="quantile", level=0.3),
        ),
        # skill scores
        Case("`crps_skill` (Gaussian)", _metric("crps_skill", gauss, y)),
        Case(
            "`check_score_skill` (levels=[0.5])",
            _metric("check_score_skill", gauss, y, levels=[0.5]),
            peer="scikit-learn `d2_absolute_error_score`",
            theirs=lambda: skm.d2_absolute_error_score(y, mu),
        ),
        Case("`check_score_skill` (99 levels)", _metric("check_score_skill", gauss, y)),
        Case("`interval_score_skill` (Interval)", _metric("interval_score_skill", interval, y)),
        Case("`nll_skill` (Gaussian)", _metric("nll_skill", gauss, y)),
    ]
    return cases


def classification_cases(n: int, c: int = 10) -> list[Case]:
    """Every classification metric of the family: prediction sets (C classes), CORP and the
    Brier terms (binary), skill scores, smooth ECE and Spiegelhalter's test (C classes)."""
    import relplot
    import sklearn.metrics as skm
    from mapie.metrics import classification as mc

    rng = np.random.default_rng(1)
    logits = rng.normal(size=(n, c)) * 2.0
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (p.cumsum(axis=1) < rng.uniform(size=n)[:, None]).sum(axis=1).clip(0, c - 1)
    probs = P.Probs(p)
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == labels).astype(float)
    in_set = p >= 0.15
    sets = P.PredictionSet(in_set)
    s3 = in_set[:, :, None]
    pb = np.c_[1.0 - p[:, 0], p[:, 0]]
    yb = (labels == 0).astype(int)
    binary = P.Probs(pb)
    bin_params = {m: {"target": "binary"} for m in CORP3}
    return [
        Case(
            f"`coverage` (sets, C = {c})",
            _metric("coverage", sets, labels),
            peer="MAPIE `classification_coverage_score`",
            theirs=lambda: mc.classification_coverage_score(labels, s3),
        ),
        Case(
            "`mean_set_size`",
            _metric("mean_set_size", sets, labels),
            peer="MAPIE `classification_mean_width_score`",
            theirs=lambda: mc.classification_mean_width_score(s3),
        ),
        Case("`singleton_rate`", _metric("singleton_rate", sets, labels)),
        Case("`empty_rate`", _metric("empty_rate", sets, labels)),
        Case(
            "`class_conditional_coverage_gap`",
            _metric("class_conditional_coverage_gap", sets, labels),
        ),
        Case("`worst_class_coverage`", _metric("worst_class_coverage", sets, labels)),
        Case(
            "`size_stratified_coverage` (sets)",
            _metric("size_stratified_coverage", sets, labels),
            peer="MAPIE `classification_ssc_score`",
            theirs=lambda: mc.classification_ssc_score(labels, s3),
        ),
        Case("`corp_mcb` (top label, C = 2)", _metric("corp_mcb", binary, yb), floor="sort+PAV"),
        Case(
            "CORP set of 3 (binary)",
            _evaluate(CORP3, binary, yb, bin_params),
            floor="sort+PAV",
        ),
        Case("Brier terms, set of 3 (10 bins)", _evaluate(BRIER3, binary, yb)),
        Case(
            f"`brier_skill` (C = {c})",
            _metric("brier_skill", probs, labels),
            peer="scikit-learn `d2_brier_score`",
            theirs=lambda: skm.d2_brier_score(labels, p, labels=list(range(c))),
        ),
        Case(
            "`brier_skill` (binary)",
            _metric("brier_skill", binary, yb, variant="binary"),
            peer="scikit-learn `d2_brier_score`",
            theirs=lambda: skm.d2_brier_score(yb, pb[:, 1]),
        ),
        Case(
            f"`log_loss_skill` (C = {c})",
            _metric("log_loss_skill", probs, labels),
            peer="scikit-learn `d2_log_loss_score`",
            theirs=lambda: skm.d2_log_loss_score(labels, p, labels=list(range(c))),
        ),
        Case(
            f"`smooth_ece` (top label, C = {c})",
            _metric("smooth_ece", probs, labels),
            peer="relplot `smECE` (confidences given)",
            theirs=lambda: relplot.smECE(conf, correct),
        ),
        Case(
            "`smooth_ece` (binary)",
            _metric("smooth_ece", binary, yb, target="binary"),
            peer="relplot `smECE`",
            theirs=lambda: relplot.smECE(pb[:, 1], yb.astype(float)),
        ),
        Case(f"`spiegelhalter_z` (top label, C = {c})", _metric("spiegelhalter_z", probs, labels)),
    ]


def _once(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _ms(t: float) -> str:
    return f"{t * 1e3:.1f} ms" if t < 10 else f"{t:.1f} s"


def run(cases: list[Case], n: int, repeat: int) -> tuple[list[str], int, int]:
    """The table's lines, how many rows meet the target, and how many rows there are."""
    rng = np.random.default_rng(7)
    data = rng.normal(size=n)
    pav_input = np.sort(data) + rng.normal(size=n)  # a noisy increasing sequence

    def floor_of(case: Case) -> Callable[[], Any]:
        m = case.n or n
        if case.floor == "sort":
            return lambda: np.sort(data[:m])
        return lambda: (np.sort(data[:m]), isotonic_regression(pav_input[:m]))

    lines = [
        "| metric | uqcore | floor | floor time | uqcore / floor | ≤ 3×? | peer | peer time "
        "| peer / uqcore |",
        "|---|---:|---|---:|---:|---|---|---:|---:|",
    ]
    met = total = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            floor = floor_of(case)
            sides: dict[str, Callable[[], Any]] = {"floor": floor, "ours": case.ours}
            if case.theirs is not None and not case.peer_once:
                sides["theirs"] = case.theirs
            for fn in sides.values():
                fn()  # warm-up (imports, first-touch of pages)
            times: dict[str, list[float]] = {k: [] for k in sides}
            for _ in range(repeat):
                for key, fn in sides.items():
                    times[key].append(_once(fn))
            t = {k: statistics.median(v) for k, v in times.items()}
            if case.theirs is not None and case.peer_once:
                t["theirs"] = _once(case.theirs)
            ratio = t["ours"] / t["floor"]
            ok = ratio <= TARGET
            counted = case.n is None  # the target is at the run's N; a smaller case is a peer check
            met += ok and counted
            total += counted
            verdict = ("met" if ok else "**not met**") if counted else "(peer check)"
            size = "" if case.n is None else f" (N = {case.n:,})"
            floor_name = "one sort" if case.floor == "sort" else "one sort + one PAV"
            if "theirs" in t:
                once = " (1 run)" if case.peer_once else ""
                peer = f"{case.peer}{once} | {_ms(t['theirs'])} | {t['theirs'] / t['ours']:.2f}×"
            else:
                peer = "— | | "
            line = (
                f"| {case.label}{size} | {_ms(t['ours'])} | {floor_name} | {_ms(t['floor'])} "
                f"| {ratio:.2f}× | {verdict} | {peer} |"
            )
            lines.append(line)
            print(line, flush=True)
    return lines, met, total


def section(cases: list[Case], n: int, repeat: int, command: str, machine: str) -> str:
    """The markdown of one run: a header, the table and the count of rows meeting 3×."""
    start = time.perf_counter()
    table, met, total = run(cases, n, repeat)
    head = [
        f"Run: `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{(time.perf_counter() - start) / 60:.1f} min; {machine}; numpy {np.__version__}. "
        f"N = {n:,}; medians of {repeat} alternated runs of the floor, uqcore and the peer.",
        "",
        "Target (issue: each within 3× of one sort of N values; CORP: one sort + one PAV "
        f"pass): met by {met} of {total} rows.",
        "",
    ]
    return "\n".join([*head, *table])
