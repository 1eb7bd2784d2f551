"""The classification curves of :mod:`uqcore.curves`: reliability diagram, risk–coverage, and
the ROC and precision–recall curves of OOD detection and of correctness prediction.

An uncertainty estimate u (higher = less confident; ``estimator=``, default
:data:`~uqcore.classification.DEFAULT_ESTIMATOR`) ranks the rows. The curves follow the
metrics of :mod:`uqcore.classification.selective` and :mod:`uqcore.classification.ood`
exactly, so that each curve's recorded area is the metric's value:

- :func:`risk_coverage_curve` rejects the most uncertain rows first: at each distinct value t
  of u it accepts the rows with u ≤ t (tied rows are accepted or rejected together) and gives
  the coverage (accepted weight over the total), the selective risk (accepted errors over the
  accepted weight) and the selective accuracy (one minus it). Its ``aurc`` is
  :func:`~uqcore.classification.selective.aurc` under the same ``convention``.
- :func:`roc_ood` and :func:`pr_ood` flag u ≥ t as OOD (OOD positive, u the score): the
  points of :func:`sklearn.metrics.roc_curve` and :func:`sklearn.metrics.precision_recall_curve`
  with ``drop_intermediate=False``; areas :func:`~uqcore.classification.ood.auroc_ood` and
  :func:`~uqcore.classification.ood.aupr_ood`.
- :func:`roc_correctness` and :func:`pr_correctness` flag u ≥ t as a wrong prediction (errors
  positive, as :func:`~uqcore.classification.selective.auroc_correctness` and
  :func:`~uqcore.classification.selective.aupr_error`).

Rows of zero weight are left out (as scikit-learn does), so they add no threshold.

Thinning: each curve has one vertex per distinct threshold, and a large set has many. A curve
keeps at most ``max_points`` vertices (default 1000), chosen among its exact vertices, so every
point drawn lies on the exact curve: the first and the last vertex are always kept, and the
others are spread evenly over a measure that is half the normalised length along the curve
and half the normalised progress along its x axis (so steep stretches and long flat ones both
get points). The recorded areas are those of the exact curve, never of the thinned one;
``n_thresholds`` says how many thresholds the exact curve has.

References: Geifman et al. 2019 (AURC); Traub et al. 2024 (generalized risk, AUGRC);
Hendrycks & Gimpel 2017 (ROC and PR of errors and of OOD); mucsanyi2024 §3.2, §3.4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._backend import host_floats
from uqcore._validation import UQValidationError
from uqcore.batch import ClassificationBatch, make_batch
from uqcore.classification._ranking import Blocks, auroc, average_precision, blocks
from uqcore.classification.aggregators import DEFAULT_ESTIMATOR
from uqcore.classification.calibration import ReliabilityDiagram, reliability_diagram
from uqcore.classification.selective import _aurc_from_blocks, _check_convention, _oracle
from uqcore.curves import CurveSpec, register_curve

__all__ = [
    "PrecisionRecallCurve",
    "RiskCoverageCurve",
    "RocCurve",
    "pr_correctness",
    "pr_ood",
    "risk_coverage_curve",
    "roc_correctness",
    "roc_ood",
    "thin_indices",
]

NDArray = np.ndarray[Any, Any]
Positive = Literal["ood", "error"]

#: Default bound on the vertices a curve keeps (module docstring).
MAX_POINTS = 1000


@dataclass(frozen=True)
class RiskCoverageCurve:
    """Selective risk and accuracy against coverage, rejecting the most uncertain rows first.

    Vertex j accepts the rows with u ≤ ``threshold[j]``.

    Attributes
    ----------
    coverage : tuple of float
        Accepted weight over the total weight, increasing, ending at 1.
    risk : tuple of float
        Selective risk: accepted errors over the accepted weight.
    accuracy : tuple of float
        Selective accuracy, 1 − risk.
    generalized_risk : tuple of float
        Accepted errors over the total weight (Traub et al. 2024).
    threshold : tuple of float
        The value of u at each vertex (ascending).
    estimator : str
        The uncertainty estimate that ranks the rows.
    convention : str
        The AURC convention of ``aurc`` and ``oracle_aurc`` (see
        :mod:`uqcore.classification.selective`).
    aurc : float or None
        :func:`~uqcore.classification.selective.aurc` of these rows (exact curve); AUAC is
        1 − aurc. ``None`` where the convention leaves it undefined.
    oracle_aurc : float or None
        The AURC of the perfect ranking (every correct row before every error).
    augrc : float
        :func:`~uqcore.classification.selective.augrc` (trapezoid convention).
    error_rate : float
        Errors over the total weight: the risk at full coverage, and the risk of a random
        ranking at every coverage.
    n_thresholds : int
        Vertices of the exact curve (before thinning).
    """

    coverage: tuple[float, ...]
    risk: tuple[float, ...]
    accuracy: tuple[float, ...]
    generalized_risk: tuple[float, ...]
    threshold: tuple[float, ...]
    estimator: str
    convention: str
    aurc: float | None
    oracle_aurc: float | None
    augrc: float
    error_rate: float
    n_thresholds: int


@dataclass(frozen=True)
class RocCurve:
    """ROC curve of an uncertainty estimate as a score (flag u ≥ t as positive).

    ``fpr`` and ``tpr`` start at (0, 0), which flags nothing, as scikit-learn's
    ``roc_curve``; ``thresholds[k]`` is the threshold of point k + 1 (scikit-learn's
    thresholds without its leading ``inf``), descending.

    Attributes
    ----------
    fpr, tpr : tuple of float
        False- and true-positive rates (weighted), non-decreasing.
    thresholds : tuple of float
        One fewer than the points.
    positive : {"ood", "error"}
        What a positive is: an OOD row, or a wrong prediction.
    estimator : str
    auroc : float or None
        The area (the metric ``auroc_ood`` or ``auroc_correctness``); ``None`` without both
        positive and negative weight.
    n_thresholds : int
        Distinct thresholds of the exact curve (before thinning).
    """

    fpr: tuple[float, ...]
    tpr: tuple[float, ...]
    thresholds: tuple[float, ...]
    positive: str
    estimator: str
    auroc: float | None
    n_thresholds: int


@dataclass(frozen=True)
class PrecisionRecallCurve:
    """Precision–recall curve of an uncertainty estimate as a score (flag u ≥ t).

    In scikit-learn's order (``precision_recall_curve``): thresholds ascending, recall
    non-increasing, and a last point (recall 0, precision 1) with no threshold, so
    ``thresholds[k]`` is the threshold of point k.

    Attributes
    ----------
    precision, recall : tuple of float
        Weighted precision and recall (recall 1 everywhere when there is no positive, as
        scikit-learn).
    thresholds : tuple of float
        One fewer than the points.
    positive : {"ood", "error"}
    estimator : str
    average_precision : float or None
        AP = Σ_k (R_k − R_{k−1}) P_k (the metric ``aupr_ood`` or ``aupr_error``); ``None``
        when no row is positive.
    prevalence : float
        Positive weight over the total weight: the precision of a random score.
    n_thresholds : int
        Distinct thresholds of the exact curve (before thinning).
    """

    precision: tuple[float, ...]
    recall: tuple[float, ...]
    thresholds: tuple[float, ...]
    positive: str
    estimator: str
    average_precision: float | None
    prevalence: float
    n_thresholds: int


def _check_max_points(max_points: Any) -> int:
    if (
        isinstance(max_points, bool)
        or not isinstance(max_points, (int, np.integer))
        or max_points < 2
    ):
        raise UQValidationError(
            f"max_points must be an integer >= 2, found {max_points!r}", argument="max_points"
        )
    return int(max_points)


def thin_indices(x: NDArray, y: NDArray, max_points: int = MAX_POINTS) -> NDArray:
    """Indices of at most ``max_points`` vertices of the polyline (x, y), first and last kept.

    The interior vertices are those where the measure ½ (normalised length along the curve) +
    ½ (normalised progress |Δx| along x) first reaches each of ``max_points − 2`` evenly spaced
    levels (duplicates merged, so fewer may remain). All vertices when there are few enough.
    """
    max_points = _check_max_points(max_points)
    n = int(x.shape[0])
    if n <= max_points:
        return np.arange(n)

    def unit(v: NDArray) -> NDArray:
        span = float(np.max(v) - np.min(v))
        return (v - np.min(v)) / span if span > 0 else np.zeros_like(v)

    xs, ys = unit(x), unit(y)
    measure = np.zeros(n)
    for step in (np.hypot(np.diff(xs), np.diff(ys)), np.abs(np.diff(xs))):
        total = float(np.sum(step))
        if total > 0:
            measure[1:] += np.cumsum(step) / total
    if measure[-1] <= 0:  # a single point repeated: spread by position
        inner = np.round(np.linspace(0, n - 1, max_points)[1:-1]).astype(np.int64)
    else:
        levels = np.linspace(0.0, float(measure[-1]), max_points)[1:-1]
        inner = np.searchsorted(measure, levels, side="left")
    return np.unique(np.concatenate([[0], np.clip(inner, 0, n - 1), [n - 1]]))


def _batch(
    name: str, prediction: Any, y: Any, sample_weight: Any, ood: Any = None
) -> ClassificationBatch:
    if getattr(prediction, "task", None) != "classification":
        raise UQValidationError(
            f"{name} needs a classification prediction (e.g. predictions.Probs), found "
            f"{type(prediction).__name__}",
            argument="prediction",
        )
    batch = make_batch(prediction, y, sample_weight, ood=ood)
    assert isinstance(batch, ClassificationBatch)
    return batch


def _weighted_blocks(batch: ClassificationBatch, estimator: str, positive: NDArray) -> Blocks:
    """Blocks of distinct u (ascending) with their weight and positive weight; blocks of zero
    weight are left out (they set no threshold)."""
    if not isinstance(estimator, str):
        raise UQValidationError(
            f"estimator must be a string, found {estimator!r}", argument="estimator"
        )
    u = batch.estimate(estimator)
    b = blocks(u, positive, batch.weights)
    keep = b.weight > 0
    return Blocks(b.value[keep], b.weight[keep], b.positive[keep])


_floats = host_floats


def risk_coverage_curve(
    prediction: Any,
    y: Any,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    sample_weight: Any = None,
    convention: Literal["mean", "trapezoid", "trapezoid_rows"] = "mean",
    max_points: int = MAX_POINTS,
) -> RiskCoverageCurve:
    """Risk–coverage curve: rejecting the most uncertain rows first (module docstring).

    Vertex j accepts the rows with u ≤ t_j, t_j the j-th distinct value of u:
    coverage c_j = W_j / W, selective risk r_j = E_j / W_j, selective accuracy 1 − r_j and
    generalized risk E_j / W, with W_j and E_j the accepted weight and errors. ``aurc`` is
    :func:`~uqcore.classification.selective.aurc` with this ``convention`` (by default the
    mean of the risk of the k most certain rows, Geifman et al. 2019); with
    ``convention="trapezoid"`` it is the trapezoidal area under the exact vertices.

    Parameters
    ----------
    prediction : ClassificationPrediction
    y : array_like of int, shape (N,)
        Hard labels.
    estimator : str, default ``DEFAULT_ESTIMATOR``
        The uncertainty estimate (higher = less confident).
    sample_weight : array_like, shape (N,), optional
    convention : {"mean", "trapezoid", "trapezoid_rows"}, default "mean"
    max_points : int, default 1000
        At most this many vertices are kept (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcore.predictions import Probs
    >>> p = Probs(np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4]]))
    >>> c = risk_coverage_curve(p, [0, 1, 0])
    >>> [round(v, 4) for v in c.coverage], [round(v, 4) for v in c.risk]
    ([0.3333, 0.6667, 1.0], [0.0, 0.5, 0.3333])
    >>> round(c.aurc, 4)  # (0 + 1/2 + 1/3) / 3
    0.2778
    """
    _check_convention(convention)
    max_points = _check_max_points(max_points)
    batch = _batch("risk_coverage_curve", prediction, y, sample_weight)
    b = _weighted_blocks(batch, estimator, 1.0 - batch.correct)
    cw, ce = np.cumsum(b.weight), np.cumsum(b.positive)
    total = float(cw[-1])
    coverage, risk = cw / total, ce / cw
    generalized = ce / total
    g0 = np.concatenate([[0.0], generalized])
    c0 = np.concatenate([[0.0], coverage])
    augrc = float(np.sum(np.diff(c0) * (g0[1:] + g0[:-1]) / 2.0))
    idx = thin_indices(coverage, risk, max_points)
    return RiskCoverageCurve(
        coverage=_floats(coverage[idx]),
        risk=_floats(risk[idx]),
        accuracy=_floats(1.0 - risk[idx]),
        generalized_risk=_floats(generalized[idx]),
        threshold=_floats(b.value[idx]),
        estimator=estimator,
        convention=convention,
        aurc=_aurc_from_blocks(b, convention),
        oracle_aurc=_aurc_from_blocks(_oracle(b), convention),
        augrc=augrc,
        error_rate=float(ce[-1]) / total,
        n_thresholds=int(b.weight.shape[0]),
    )


def _counts(b: Blocks) -> tuple[NDArray, NDArray]:
    """Positive and negative weight flagged at each distinct threshold, descending."""
    return np.cumsum(b.positive[::-1]), np.cumsum((b.weight - b.positive)[::-1])


def _rate(count: NDArray) -> NDArray:
    total = float(count[-1])
    return count / total if total > 0 else np.zeros_like(count)


def _roc(
    batch: ClassificationBatch, flags: NDArray, positive: Positive, estimator: str, max_points: int
) -> RocCurve:
    max_points = _check_max_points(max_points)
    b = _weighted_blocks(batch, estimator, flags)
    tps, fps = _counts(b)
    fpr = np.concatenate([[0.0], _rate(fps)])
    tpr = np.concatenate([[0.0], _rate(tps)])
    thresholds = b.value[::-1]
    idx = thin_indices(fpr, tpr, max_points)
    return RocCurve(
        fpr=_floats(fpr[idx]),
        tpr=_floats(tpr[idx]),
        thresholds=_floats(thresholds[idx[1:] - 1]),
        positive=positive,
        estimator=estimator,
        auroc=auroc(batch.estimate(estimator), flags, batch.weights),
        n_thresholds=int(thresholds.shape[0]),
    )


def _pr(
    batch: ClassificationBatch, flags: NDArray, positive: Positive, estimator: str, max_points: int
) -> PrecisionRecallCurve:
    max_points = _check_max_points(max_points)
    b = _weighted_blocks(batch, estimator, flags)
    tps, fps = _counts(b)
    precision = tps / (tps + fps)  # every block has positive weight
    recall = tps / tps[-1] if float(tps[-1]) > 0 else np.ones_like(tps)
    # scikit-learn's order: thresholds ascending, then the point (recall 0, precision 1)
    precision = np.concatenate([precision[::-1], [1.0]])
    recall = np.concatenate([recall[::-1], [0.0]])
    thresholds = b.value
    idx = thin_indices(recall, precision, max_points)
    return PrecisionRecallCurve(
        precision=_floats(precision[idx]),
        recall=_floats(recall[idx]),
        thresholds=_floats(thresholds[idx[:-1]]),
        positive=positive,
        estimator=estimator,
        average_precision=average_precision(batch.estimate(estimator), flags, batch.weights),
        prevalence=float(tps[-1]) / float(tps[-1] + fps[-1]),
        n_thresholds=int(thresholds.shape[0]),
    )


def _ood_flags(name: str, batch: ClassificationBatch) -> NDArray:
    if batch.ood is None:
        raise UQValidationError(
            f"{name} needs OOD flags: ood= (True for out-of-distribution rows)", argument="ood"
        )
    return np.asarray(batch.ood, dtype=np.float64)


def roc_ood(
    prediction: Any,
    y: Any,
    *,
    ood: Any,
    estimator: str = DEFAULT_ESTIMATOR,
    sample_weight: Any = None,
    max_points: int = MAX_POINTS,
) -> RocCurve:
    """ROC curve of OOD detection: OOD rows positive, the uncertainty u the score.

    The points of ``sklearn.metrics.roc_curve(ood, u, sample_weight=...,
    drop_intermediate=False)`` (module docstring for the thinning); the area ``auroc`` is
    :func:`~uqcore.classification.ood.auroc_ood` (Hendrycks & Gimpel 2017).

    Parameters
    ----------
    prediction : ClassificationPrediction
    y : array_like of int, shape (N,)
        Hard labels (validated; OOD rows need some label in range).
    ood : array_like of bool, shape (N,)
        True for out-of-distribution rows.
    estimator, sample_weight, max_points
        As for :func:`risk_coverage_curve`.
    """
    batch = _batch("roc_ood", prediction, y, sample_weight, ood)
    return _roc(batch, _ood_flags("roc_ood", batch), "ood", estimator, max_points)


def pr_ood(
    prediction: Any,
    y: Any,
    *,
    ood: Any,
    estimator: str = DEFAULT_ESTIMATOR,
    sample_weight: Any = None,
    max_points: int = MAX_POINTS,
) -> PrecisionRecallCurve:
    """Precision–recall curve of OOD detection: OOD rows positive, u the score.

    The points of ``sklearn.metrics.precision_recall_curve(ood, u, sample_weight=...,
    drop_intermediate=False)``; ``average_precision`` is
    :func:`~uqcore.classification.ood.aupr_ood`. Parameters as :func:`roc_ood`.
    """
    batch = _batch("pr_ood", prediction, y, sample_weight, ood)
    return _pr(batch, _ood_flags("pr_ood", batch), "ood", estimator, max_points)


def roc_correctness(
    prediction: Any,
    y: Any,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    sample_weight: Any = None,
    max_points: int = MAX_POINTS,
) -> RocCurve:
    """ROC curve of correctness prediction: wrong predictions positive, u the score.

    As :func:`~uqcore.classification.selective.auroc_correctness`, errors are the positive
    class (argmax_c p̄_c ≠ y), flagged when u ≥ t; the points of
    ``sklearn.metrics.roc_curve(errors, u, ..., drop_intermediate=False)`` and the area
    ``auroc`` is ``auroc_correctness`` (mucsanyi2024 §3.4). Parameters as
    :func:`risk_coverage_curve`.
    """
    batch = _batch("roc_correctness", prediction, y, sample_weight)
    return _roc(batch, 1.0 - batch.correct, "error", estimator, max_points)


def pr_correctness(
    prediction: Any,
    y: Any,
    *,
    estimator: str = DEFAULT_ESTIMATOR,
    sample_weight: Any = None,
    max_points: int = MAX_POINTS,
) -> PrecisionRecallCurve:
    """Precision–recall curve of finding the wrong predictions with u (errors positive).

    The points of ``sklearn.metrics.precision_recall_curve(errors, u, ...,
    drop_intermediate=False)``; ``average_precision`` is
    :func:`~uqcore.classification.selective.aupr_error`. Parameters as
    :func:`risk_coverage_curve`.
    """
    batch = _batch("pr_correctness", prediction, y, sample_weight)
    return _pr(batch, 1.0 - batch.correct, "error", estimator, max_points)


# Registration: compute(prediction, y, *, sample_weight, groups, ood, seed) with the defaults.


def _reliability(
    prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any
) -> ReliabilityDiagram:
    return reliability_diagram(prediction, y, n_bins=15, sample_weight=sample_weight)


def _risk_coverage(
    prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any
) -> RiskCoverageCurve:
    return risk_coverage_curve(prediction, y, sample_weight=sample_weight)


def _roc_ood(
    prediction: Any, y: Any, *, sample_weight: Any = None, ood: Any = None, **_: Any
) -> RocCurve:
    return roc_ood(prediction, y, ood=ood, sample_weight=sample_weight)


def _pr_ood(
    prediction: Any, y: Any, *, sample_weight: Any = None, ood: Any = None, **_: Any
) -> PrecisionRecallCurve:
    return pr_ood(prediction, y, ood=ood, sample_weight=sample_weight)


def _roc_correctness(prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any) -> RocCurve:
    return roc_correctness(prediction, y, sample_weight=sample_weight)


def _pr_correctness(
    prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any
) -> PrecisionRecallCurve:
    return pr_correctness(prediction, y, sample_weight=sample_weight)


_RANKED = frozenset({"probs", "estimates"})
_C: Literal["classification"] = "classification"

register_curve(
    CurveSpec(
        "reliability_diagram",
        _C,
        frozenset({"probs"}),
        frozenset(),
        _reliability,
        ReliabilityDiagram,
        description="accuracy against confidence in 15 equal-width bins, with bin counts",
    )
)
register_curve(
    CurveSpec(
        "risk_coverage_curve",
        _C,
        _RANKED,
        frozenset(),
        _risk_coverage,
        RiskCoverageCurve,
        description="selective risk and accuracy against coverage (most uncertain rejected first)",
    )
)
register_curve(
    CurveSpec(
        "roc_ood",
        _C,
        _RANKED,
        frozenset({"ood"}),
        _roc_ood,
        RocCurve,
        description="ROC curve of OOD detection by the uncertainty (OOD positive)",
    )
)
register_curve(
    CurveSpec(
        "pr_ood",
        _C,
        _RANKED,
        frozenset({"ood"}),
        _pr_ood,
        PrecisionRecallCurve,
        description="precision–recall curve of OOD detection by the uncertainty (OOD positive)",
    )
)
register_curve(
    CurveSpec(
        "roc_correctness",
        _C,
        _RANKED,
        frozenset(),
        _roc_correctness,
        RocCurve,
        description="ROC curve of telling wrong predictions by the uncertainty (errors positive)",
    )
)
register_curve(
    CurveSpec(
        "pr_correctness",
        _C,
        _RANKED,
        frozenset(),
        _pr_correctness,
        PrecisionRecallCurve,
        description="precision–recall curve of finding wrong predictions by the uncertainty",
    )
)
