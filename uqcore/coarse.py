"""Curves on a coarse fixed grid: what a benchmark's submission may learn of its hidden targets.

A curve computed at row resolution reveals the targets: the sparsification curve removes the
rows in the order of the submitter's own uncertainty, so the difference between two
consecutive points is the error of the rows removed in between — with one row per step, each
row's error, hence y. A coarse curve gives only numbers that each sum a large set of rows:

- every point is computed on a fixed grid (fixed by these constants and the benchmark's N,
  never by the submission) of at most :data:`COARSE_MAX_POINTS` points;
- every point, and every difference of two consecutive points of a nested curve, is a
  (weighted) sum over at least :data:`COARSE_MIN_ROWS` rows, each row entering with a
  coefficient in [0, 1] (tied rows share a step's fraction, as uqcore's curves do);
- per-bin or per-group values are given only for bins and groups of at least
  :data:`COARSE_MIN_ROWS` rows;
- a curve whose points are rows (``interval_width``), small random groups
  (``group_calibration``) or blocks of rows that may be single rows (``corp_reliability``,
  whose isotonic steps can hold one row each) is not given at all.

The grid, per curve (N the benchmark's rows, M = :func:`coarse_points` (N) =
min(:data:`COARSE_MAX_POINTS`, N // :data:`COARSE_MIN_ROWS`)):

- ``sparsification_curve``: removed fractions 0, 1/M, ..., (M − 1)/M (model, oracle and
  random curves): each step removes N/M ≥ :data:`COARSE_MIN_ROWS` rows.
- ``risk_coverage_curve``: coverages 1/M, 2/M, ..., 1 (the most certain rows accepted
  first).
- ``roc_correctness``, ``pr_correctness``, ``roc_ood``, ``pr_ood``: the points where the most
  uncertain 1/M, 2/M, ..., 1 of the rows are flagged (plus the fixed end points (0, 0) of a
  ROC curve and (recall 0, precision 1) of a PR curve).
- ``calibration_curve``, ``quantile_calibration_curve``: the levels :data:`COARSE_LEVELS`
  (19 levels; a prediction without a CDF: those of its own levels nearest to them, at most
  :data:`COARSE_MAX_POINTS`); each point is a proportion of all N rows.
- ``pit_histogram``: :data:`COARSE_PIT_BINS` equal bins; each count is a count over all N
  rows (the number of PIT values in the bin, like a calibration point).
- ``reliability_diagram``: :data:`COARSE_RELIABILITY_BINS` equal-width bins; a bin of fewer
  than :data:`COARSE_MIN_ROWS` rows has its confidence and accuracy dropped (``None``).
- ``stratified``: only the groups of at least :data:`COARSE_MIN_ROWS` rows.
- ``murphy_diagram``: :data:`COARSE_MAX_POINTS` thresholds evenly between the least and the
  largest forecast (not the targets); each point is a mean over all N rows.

The summary numbers of a curve (its area: ``aurc``, ``auroc``, ``average_precision``, the
KS statistic of the PIT, ...) are the metrics of the same names: one number each.

A benchmark with fewer than 2 · :data:`COARSE_MIN_ROWS` rows gets no curves (M < 2):
:func:`coarse_curves` says so in its notes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import host_floats, to_numpy
from uqcore._validation import UQValidationError
from uqcore.classification.aggregators import DEFAULT_ESTIMATOR
from uqcore.classification.calibration import reliability_diagram
from uqcore.classification.curves import (
    PrecisionRecallCurve,
    RiskCoverageCurve,
    RocCurve,
    _batch,
    _ood_flags,
    _weighted_blocks,
    pr_correctness,
    pr_ood,
    risk_coverage_curve,
    roc_correctness,
    roc_ood,
)
from uqcore.curves import CURVES
from uqcore.regression.calibration import CalibrationCurve, PropType, calibration_curve
from uqcore.regression.curves import StratifiedMetrics, pit_histogram, stratified_metrics
from uqcore.regression.ranking import sparsification_curve

__all__ = [
    "COARSE_LEVELS",
    "COARSE_MAX_POINTS",
    "COARSE_MIN_ROWS",
    "COARSE_PIT_BINS",
    "COARSE_RELIABILITY_BINS",
    "ROW_LEVEL_CURVES",
    "coarse_curves",
    "coarse_details",
    "coarse_points",
]

NDArray = np.ndarray[Any, Any]

#: Most points of a coarse curve computed on the targets (fixed end points aside).
COARSE_MAX_POINTS = 20
#: Fewest rows behind a coarse point, a step between two points, a bin or a group.
COARSE_MIN_ROWS = 50
#: The levels of the coarse calibration curves: 0.05, 0.10, ..., 0.95.
COARSE_LEVELS: tuple[float, ...] = tuple(round(k / 20, 2) for k in range(1, 20))
#: Bins of the coarse PIT histogram.
COARSE_PIT_BINS = 10
#: Bins of the coarse reliability diagram (those of fewer than COARSE_MIN_ROWS rows dropped).
COARSE_RELIABILITY_BINS = 15
#: Curves whose points are rows or small random groups: never given coarse.
ROW_LEVEL_CURVES: frozenset[str] = frozenset(
    {"interval_width", "group_calibration", "corp_reliability"}
)


def coarse_points(n: int) -> int:
    """M, the points of a nested coarse curve on ``n`` rows: min(COARSE_MAX_POINTS,
    n // COARSE_MIN_ROWS), so each step holds at least COARSE_MIN_ROWS rows.

    >>> coarse_points(200), coarse_points(99), coarse_points(10_000)
    (4, 1, 20)
    """
    return min(COARSE_MAX_POINTS, int(n) // COARSE_MIN_ROWS)


def _floats(a: Any) -> tuple[float, ...]:
    return host_floats(np.asarray(a, dtype=np.float64))


# -- regression --------------------------------------------------------------------------------
def _sparsification(prediction: Any, y: Any, m: int, **_: Any) -> Any:
    return sparsification_curve(prediction, y, grid=m)


def _calibration(prop_type: PropType) -> Any:
    def compute(prediction: Any, y: Any, m: int, **_: Any) -> CalibrationCurve:
        if "cdf" in prediction.capabilities:
            return calibration_curve(
                prediction,
                y,
                prop_type=prop_type,
                levels=COARSE_LEVELS,
            )
        # Quantiles: the prediction's own levels; keep those nearest the fixed levels (every
        # point is a proportion of all rows, so any subset is as coarse).
        full = calibration_curve(prediction, y, prop_type=prop_type)
        levels = np.asarray(full.levels, dtype=np.float64)
        keep = sorted({int(np.argmin(np.abs(levels - p))) for p in COARSE_LEVELS})
        keep = keep[:COARSE_MAX_POINTS]
        return CalibrationCurve(
            expected=tuple(full.expected[i] for i in keep),
            observed=tuple(full.observed[i] for i in keep),
            prop_type=full.prop_type,
            levels=tuple(full.levels[i] for i in keep),
        )

    return compute


def _pit(prediction: Any, y: Any, m: int, **_: Any) -> Any:
    return pit_histogram(prediction, y, n_bins=COARSE_PIT_BINS)


def _stratified(prediction: Any, y: Any, m: int, *, groups: Any = None, **_: Any) -> Any:
    full = stratified_metrics(prediction, y, groups)
    keep = [i for i, c in enumerate(full.counts) if c >= COARSE_MIN_ROWS]
    if not keep:
        return None
    return StratifiedMetrics(
        groups=tuple(full.groups[i] for i in keep),
        metrics=full.metrics,
        values=tuple(tuple(row[i] for i in keep) for row in full.values),
        counts=tuple(full.counts[i] for i in keep),
        weights=tuple(full.weights[i] for i in keep),
    )


def _murphy(prediction: Any, y: Any, m: int, **_: Any) -> Any:
    from uqcore.score_curves import murphy_diagram

    x = np.asarray(to_numpy(prediction.point()), dtype=np.float64)
    thetas = np.linspace(float(np.min(x)), float(np.max(x)), COARSE_MAX_POINTS)
    return murphy_diagram(prediction, y, thetas=thetas.tolist())


# -- classification ----------------------------------------------------------------------------
def _reliability(prediction: Any, y: Any, m: int, **_: Any) -> Any:
    full = reliability_diagram(prediction, y, n_bins=COARSE_RELIABILITY_BINS)
    small = [c < COARSE_MIN_ROWS for c in full.count]
    return dataclasses.replace(
        full,
        confidence=tuple(None if s else v for s, v in zip(small, full.confidence, strict=True)),
        accuracy=tuple(None if s else v for s, v in zip(small, full.accuracy, strict=True)),
    )


def _cumulative(weight: NDArray, positive: NDArray, m: int) -> tuple[NDArray, NDArray, NDArray]:
    """At the weights W_j = j/M · W (j = 1..M) taken in the given order of blocks: W_j, the
    positive weight taken, and the index of the block where W_j falls. A block (tied rows)
    is taken in proportion, so a step takes each row with a coefficient in [0, 1]."""
    cw = np.cumsum(weight)
    cp = np.cumsum(positive)
    total = float(cw[-1])
    w = total * np.arange(1, m + 1, dtype=np.float64) / m
    w[-1] = total
    taken = np.interp(w, np.concatenate([[0.0], cw]), np.concatenate([[0.0], cp]))
    at = np.minimum(np.searchsorted(cw, w * (1 - 1e-12), side="left"), cw.shape[0] - 1)
    return w, taken, at


def _risk_coverage(prediction: Any, y: Any, m: int, **_: Any) -> Any:
    fine = risk_coverage_curve(prediction, y)
    batch = _batch("risk_coverage_curve", prediction, y, None)
    b = _weighted_blocks(batch, DEFAULT_ESTIMATOR, 1.0 - batch.correct)
    w, errors, at = _cumulative(b.weight, b.positive, m)
    total = float(w[-1])
    risk = errors / w
    return RiskCoverageCurve(
        coverage=_floats(w / total),
        risk=_floats(risk),
        accuracy=_floats(1.0 - risk),
        generalized_risk=_floats(errors / total),
        threshold=_floats(b.value[at]),
        estimator=fine.estimator,
        convention=fine.convention,
        aurc=fine.aurc,
        oracle_aurc=fine.oracle_aurc,
        augrc=fine.augrc,
        error_rate=fine.error_rate,
        n_thresholds=fine.n_thresholds,
    )


def _flagged(
    prediction: Any, y: Any, m: int, flags_of: Any, name: str, ood: Any = None
) -> tuple[NDArray, NDArray, NDArray]:
    """(flagged weight, flagged positive weight, threshold) when the most uncertain
    1/M, ..., 1 of the rows are flagged."""
    batch = _batch(name, prediction, y, None, ood)
    b = _weighted_blocks(batch, DEFAULT_ESTIMATOR, flags_of(batch))
    w, tp, at = _cumulative(b.weight[::-1], b.positive[::-1], m)
    return w, tp, b.value[::-1][at]


def _errors(batch: Any) -> NDArray:
    return np.asarray(1.0 - batch.correct, dtype=np.float64)


def _ood(batch: Any) -> NDArray:
    return _ood_flags("roc_ood", batch)


def _roc(fine_fn: Any, flags_of: Any, name: str) -> Any:
    def compute(prediction: Any, y: Any, m: int, *, ood: Any = None, **_: Any) -> RocCurve:
        ood = ood if flags_of is _ood else None
        fine = fine_fn(prediction, y, **({} if ood is None else {"ood": ood}))
        w, tp, thr = _flagged(prediction, y, m, flags_of, name, ood)
        fp = w - tp
        pos, neg = float(tp[-1]), float(fp[-1])
        tpr = tp / pos if pos > 0 else np.zeros_like(tp)
        fpr = fp / neg if neg > 0 else np.zeros_like(fp)
        return RocCurve(
            fpr=(0.0, *_floats(fpr)),
            tpr=(0.0, *_floats(tpr)),
            thresholds=_floats(thr),
            positive=fine.positive,
            estimator=fine.estimator,
            auroc=fine.auroc,
            n_thresholds=fine.n_thresholds,
        )

    return compute


def _pr(fine_fn: Any, flags_of: Any, name: str) -> Any:
    def compute(
        prediction: Any, y: Any, m: int, *, ood: Any = None, **_: Any
    ) -> PrecisionRecallCurve:
        ood = ood if flags_of is _ood else None
        fine = fine_fn(prediction, y, **({} if ood is None else {"ood": ood}))
        w, tp, thr = _flagged(prediction, y, m, flags_of, name, ood)
        pos = float(tp[-1])
        precision = tp / w
        recall = tp / pos if pos > 0 else np.ones_like(tp)
        # scikit-learn's order: thresholds ascending, then the point (recall 0, precision 1)
        return PrecisionRecallCurve(
            precision=(*_floats(precision[::-1]), 1.0),
            recall=(*_floats(recall[::-1]), 0.0),
            thresholds=_floats(thr[::-1]),
            positive=fine.positive,
            estimator=fine.estimator,
            average_precision=fine.average_precision,
            prevalence=fine.prevalence,
            n_thresholds=fine.n_thresholds,
        )

    return compute


#: How each curve is computed on the coarse grid: compute(prediction, y, M, groups=, ood=).
_COARSE: dict[str, Any] = {
    "calibration_curve": _calibration("interval"),
    "quantile_calibration_curve": _calibration("quantile"),
    "pit_histogram": _pit,
    "sparsification_curve": _sparsification,
    "stratified": _stratified,
    "murphy_diagram": _murphy,
    "reliability_diagram": _reliability,
    "risk_coverage_curve": _risk_coverage,
    "roc_ood": _roc(roc_ood, _ood, "roc_ood"),
    "pr_ood": _pr(pr_ood, _ood, "pr_ood"),
    "roc_correctness": _roc(roc_correctness, _errors, "roc_correctness"),
    "pr_correctness": _pr(pr_correctness, _errors, "pr_correctness"),
}


def coarse_curves(
    prediction: Any, y: Any, *, groups: Any = None, ood: Any = None
) -> tuple[dict[str, Any], list[str]]:
    """Every curve of :mod:`uqcore.curves` that applies to the prediction and the inputs
    given, on the coarse grid of the module docstring: (name -> curve object, notes saying
    what was left out and why). Unweighted (a benchmark's rows count once each).

    >>> import numpy as np; from uqcore import predictions as P
    >>> rng = np.random.default_rng(0); y = rng.normal(size=200)
    >>> found, notes = coarse_curves(P.Gaussian(np.zeros(200), np.ones(200)), y)
    >>> [round(float(f), 2) for f in found["sparsification_curve"].fractions]
    [0.0, 0.25, 0.5, 0.75]
    >>> "interval_width" in found
    False
    """
    n = int(np.asarray(to_numpy(y)).shape[0])
    m = coarse_points(n)
    if m < 2:
        return {}, [
            f"curves: none; this benchmark has N = {n} rows and a coarse curve needs at least "
            f"{2 * COARSE_MIN_ROWS} (each point averages at least {COARSE_MIN_ROWS} rows)"
        ]
    available = frozenset(k for k, v in (("groups", groups), ("ood", ood)) if v is not None)
    out: dict[str, Any] = {}
    notes: list[str] = []
    left_out: list[str] = []
    for name, spec in CURVES.items():
        if spec.why_not(prediction, available) is not None:
            continue
        compute = _COARSE.get(name)
        if compute is None or name in ROW_LEVEL_CURVES:
            left_out.append(name)
            continue
        try:
            curve = compute(prediction, y, m, groups=groups, ood=ood)
        except UQValidationError as exc:
            notes.append(f"curves: {name} is not given ({exc})")
            continue
        if curve is None:
            notes.append(
                f"curves: {name} is not given (no group has {COARSE_MIN_ROWS} rows or more)"
            )
            continue
        out[name] = curve
    if left_out:
        notes.append(
            f"curves: {', '.join(left_out)} not given on a benchmark (their points are rows "
            "or small groups of the hidden targets)"
        )
    return out, notes


def coarse_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """A structured metric's details with the entries of small groups left out: where the
    details list ``group_rows`` (adversarial group calibration), every list aligned with it
    keeps only the entries of groups of at least COARSE_MIN_ROWS rows. Other details (a
    PIT histogram, coverages at fixed levels) are proportions of all rows and are kept.

    >>> coarse_details({"group_rows": [5, 60], "score_mean": [0.3, 0.1], "value": 0.2})
    {'group_rows': [60], 'score_mean': [0.1], 'value': 0.2}
    """
    rows = details.get("group_rows")
    if not isinstance(rows, (list, tuple)):
        return dict(details)
    keep = [i for i, r in enumerate(rows) if r is not None and float(r) >= COARSE_MIN_ROWS]
    out: dict[str, Any] = {}
    for k, v in details.items():
        if isinstance(v, (list, tuple)) and len(v) == len(rows):
            out[k] = [v[i] for i in keep]
        else:
            out[k] = v
    return out
