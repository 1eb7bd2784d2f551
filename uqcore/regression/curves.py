"""The regression curves of :mod:`uqcore.curves`, registered on import.

Besides the registration, this module holds the curves that have no function elsewhere: the
PIT histogram with its uniform band (:func:`pit_histogram`), adversarial group calibration as
a curve (:func:`group_calibration_curve`), metrics per group (:func:`stratified_metrics`) and
the n-MeRCI view of uncertainty against error (:func:`interval_width_curve`). Each returns a
small frozen dataclass whose fields are the JSON of :func:`uqcore.curves.curve_to_json`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore import registry
from uqcore._backend import host_floats, to_numpy
from uqcore._binomial import binom_ppf
from uqcore._validation import UQValidationError
from uqcore.batch import regression_batch
from uqcore.curves import CurveSpec, register_curve
from uqcore.regression import ranking
from uqcore.regression.calibration import (
    _UNCERTAINTY_IS_STD,
    DEFAULT_LEVELS,
    CalibrationCurve,
    PropType,
    calibration_curve,
    pit,
)
from uqcore.regression.group_calibration import adversarial_group_calibration
from uqcore.regression.ranking import SparsificationCurve, sparsification_curve
from uqcore.regression.stratified import stratified

__all__ = [
    "STRATIFIED_METRICS",
    "GroupCalibrationCurve",
    "IntervalWidthCurve",
    "PitHistogram",
    "StratifiedMetrics",
    "group_calibration_curve",
    "interval_width_curve",
    "pit_histogram",
    "stratified_metrics",
]

#: The metrics :func:`stratified_metrics` computes by default (those that apply): the error
#: (moukari2019 Fig. 4), n-MeRCI (its Fig. 5: does the uncertainty follow the error within
#: each stratum) and the interval calibration error (chung2021: calibration per group).
STRATIFIED_METRICS: tuple[str, ...] = ("mae", "nmerci", "ece")

#: Most points :func:`interval_width_curve` keeps (a scatter of more says nothing more).
MAX_POINTS = 2000


_floats = host_floats


def _optional_floats(values: Any) -> tuple[float | None, ...]:
    return tuple(None if v is None else float(v) for v in values)


def _set(obj: Any, **fields: Any) -> None:
    """Normalise fields of a frozen dataclass (JSON lists to tuples) in ``__post_init__``."""
    for k, v in fields.items():
        object.__setattr__(obj, k, v)


# -- PIT histogram ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PitHistogram:
    """The PIT histogram with the band of a uniform PIT.

    Attributes
    ----------
    edges : tuple of float
        The B + 1 bin edges k/B.
    counts : tuple of float
        Weight of the PIT values u_i = F_i(y_i) in each bin [k/B, (k+1)/B) (the last one
        closed): the number of rows without weights.
    expected : tuple of float
        The count of each bin under a uniform PIT, Σw / B.
    band_low, band_high : tuple of float
        Per bin, the central ``level`` range of the count under a uniform PIT: the binomial
        quantiles of Binomial(n, 1/B) at (1 − level)/2 and (1 + level)/2, n = round(n_eff),
        times Σw / n_eff (in units of weight; n = N and the factor 1 without weights). The
        band holds per bin, not for all bins at once.
    level : float
    n_eff : float
        Effective sample size (Σw)²/Σw².
    total : float
        Σw.
    ks_statistic, p_value : float
        The Kolmogorov-Smirnov test of the PIT values against U(0, 1) (metric ``pit``).
    """

    edges: tuple[float, ...]
    counts: tuple[float, ...]
    expected: tuple[float, ...]
    band_low: tuple[float, ...]
    band_high: tuple[float, ...]
    level: float
    n_eff: float
    total: float
    ks_statistic: float
    p_value: float

    def __post_init__(self) -> None:
        _set(
            self,
            edges=_floats(self.edges),
            counts=_floats(self.counts),
            expected=_floats(self.expected),
            band_low=_floats(self.band_low),
            band_high=_floats(self.band_high),
        )


def pit_histogram(
    prediction: Any,
    y: Any,
    *,
    n_bins: int = 10,
    level: float = 0.95,
    sample_weight: Any = None,
) -> PitHistogram:
    """The PIT histogram of u_i = F_i(y_i) and the band of a uniform PIT.

    Dawid (1984); Gneiting et al. (2007): for a calibrated forecast the PIT values are U(0, 1),
    so the count of a bin is Binomial(N, 1/B). The band is that binomial's central ``level``
    range (default 95%: its 2.5% and 97.5% quantiles, ``scipy.stats.binom.ppf``), per bin;
    with weights the counts are weights and the band is Binomial(round(n_eff), 1/B) scaled by
    Σw / n_eff (n_eff = (Σw)²/Σw²). The counts are those of the metric
    :func:`~uqcore.regression.calibration.pit` (``histogram · Σw``).

    >>> import numpy as np; from uqcore import predictions as P
    >>> h = pit_histogram(P.Gaussian(np.zeros(4), np.ones(4)), np.array([-2.0, -0.1, 0.3, 1.0]),
    ...                   n_bins=2)
    >>> h.counts, h.expected, h.band_low, h.band_high
    ((2.0, 2.0), (2.0, 2.0), (0.0, 0.0), (4.0, 4.0))
    """
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise UQValidationError(f"level must lie in (0, 1), found {level!r}")
    if "cdf" not in getattr(prediction, "capabilities", ()):
        raise UQValidationError(
            "pit_histogram needs a prediction with a CDF, found "
            f"{getattr(prediction, 'kind', type(prediction).__name__)}"
        )
    res = pit(prediction, y, sample_weight=sample_weight, n_bins=n_bins)
    total = (
        float(np.asarray(to_numpy(y)).shape[0])
        if sample_weight is None
        else float(np.sum(np.asarray(to_numpy(sample_weight), dtype=np.float64)))
    )
    b = len(res["histogram"])
    n_eff = float(res["n_eff"])
    n = max(1, round(n_eff))
    scale = total / n_eff
    lo = binom_ppf((1 - level) / 2, n, 1 / b) * scale
    hi = binom_ppf((1 + level) / 2, n, 1 / b) * scale
    return PitHistogram(
        edges=tuple(res["bin_edges"]),
        counts=tuple(float(h) * total for h in res["histogram"]),
        expected=(total / b,) * b,
        band_low=(lo,) * b,
        band_high=(hi,) * b,
        level=float(level),
        n_eff=n_eff,
        total=total,
        ks_statistic=float(res["ks_statistic"]),
        p_value=float(res["p_value"]),
    )


# -- adversarial group calibration -------------------------------------------------------------
@dataclass(frozen=True)
class GroupCalibrationCurve:
    """Adversarial group calibration per group size (chung2021 Fig. 1).

    The fields of :func:`~uqcore.regression.group_calibration.adversarial_group_calibration`:
    ``group_sizes`` (fractions r of the data), ``group_rows`` (rows G per group),
    ``score_mean`` (mean over trials of the worst group's calibration error), ``score_std``
    and ``score_stderr`` (``None`` for one trial), ``value`` (mean of ``score_mean``),
    ``cali_type`` and ``prop_type``.
    """

    group_sizes: tuple[float, ...]
    group_rows: tuple[int, ...]
    score_mean: tuple[float, ...]
    score_std: tuple[float | None, ...]
    score_stderr: tuple[float | None, ...]
    value: float
    cali_type: str
    prop_type: str

    def __post_init__(self) -> None:
        _set(
            self,
            group_sizes=_floats(self.group_sizes),
            group_rows=tuple(int(v) for v in self.group_rows),
            score_mean=_floats(self.score_mean),
            score_std=_optional_floats(self.score_std),
            score_stderr=_optional_floats(self.score_stderr),
        )


def group_calibration_curve(
    prediction: Any, y: Any, *, sample_weight: Any = None, seed: int = 0, **options: Any
) -> GroupCalibrationCurve:
    """Adversarial group calibration as a curve: the worst calibration error of random groups
    against the group size (Zhao et al. 2020; chung2021 appendix A.3). ``options`` are those
    of :func:`~uqcore.regression.group_calibration.adversarial_group_calibration` (seeded by
    ``seed``)."""
    res = adversarial_group_calibration(
        prediction, y, sample_weight=sample_weight, seed=seed, **options
    )
    if res is None:  # too many rows to draw groups from; the warning said why
        raise UQValidationError("adversarial group calibration is undefined on this input")
    return GroupCalibrationCurve(**res)


# -- metrics per group -------------------------------------------------------------------------
@dataclass(frozen=True)
class StratifiedMetrics:
    """Metrics per group of samples (moukari2019 Fig. 4-5).

    Attributes
    ----------
    groups : tuple of int
        The group ids, ascending.
    metrics : tuple of str
    values : tuple of tuple
        ``values[m][g]``: metric ``metrics[m]`` on group ``groups[g]`` (``None`` where it is
        undefined or the group has zero weight).
    counts : tuple of int
        Rows per group.
    weights : tuple of float
        Total weight per group.
    """

    groups: tuple[int, ...]
    metrics: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    counts: tuple[int, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        _set(
            self,
            groups=tuple(int(v) for v in self.groups),
            metrics=tuple(str(v) for v in self.metrics),
            values=tuple(_optional_floats(row) for row in self.values),
            counts=tuple(int(v) for v in self.counts),
            weights=_floats(self.weights),
        )


def _scalar(value: Any) -> float | None:
    if isinstance(value, Mapping):  # a structured metric: its headline value
        value = value.get("value")
    return None if value is None or not math.isfinite(float(value)) else float(value)


def stratified_metrics(
    prediction: Any,
    y: Any,
    groups: Any,
    *,
    metrics: Sequence[str] | None = None,
    sample_weight: Any = None,
) -> StratifiedMetrics:
    """Metrics per group (:func:`~uqcore.regression.stratified.stratified`, one per metric).

    ``metrics`` defaults to those of :data:`STRATIFIED_METRICS` that apply to the prediction:
    ``mae``, ``nmerci`` (moukari2019 Fig. 4 and 5 show the MAE and n-MeRCI per depth
    interval) and ``ece`` (interval calibration error, chung2021). A metric undefined on a
    group gives ``None`` there (with its warning).

    >>> import numpy as np; from uqcore import predictions as P
    >>> s = stratified_metrics(P.Gaussian(np.zeros(4), np.ones(4)), np.array([1.0, -1, 2, 4]),
    ...                        np.array([0, 0, 1, 1]), metrics=["mae"])
    >>> s.groups, s.values
    ((0, 1), ((1.0, 3.0),))
    """
    if groups is None:
        raise UQValidationError("stratified metrics need groups (an integer id per row)")
    if metrics is None:
        names = [m for m in STRATIFIED_METRICS if registry.get(m).why_not(prediction) is None]
        if not names:
            raise UQValidationError(
                f"none of the default metrics {', '.join(STRATIFIED_METRICS)} applies to a "
                f"{getattr(prediction, 'kind', type(prediction).__name__)} prediction; "
                "name them with metrics="
            )
    else:
        names = list(dict.fromkeys([metrics] if isinstance(metrics, str) else metrics))
        if not names:
            raise UQValidationError("metrics must name at least one metric")
    rows: list[tuple[float | None, ...]] = []
    first: dict[str, Any] = {}
    for name in names:
        res = stratified(name, prediction, y, groups=groups, sample_weight=sample_weight)
        first = first or res
        rows.append(tuple(_scalar(v) for v in res["values"]))
    return StratifiedMetrics(
        groups=tuple(first["groups"]),
        metrics=tuple(names),
        values=tuple(rows),
        counts=tuple(first["counts"]),
        weights=tuple(first["weights"]),
    )


# -- uncertainty against error (n-MeRCI) -------------------------------------------------------
@dataclass(frozen=True)
class IntervalWidthCurve:
    """Predicted uncertainty against absolute error, with the n-MeRCI scale (moukari2019).

    Attributes
    ----------
    uncertainty, abs_error : tuple of float
        u_i (the predicted std for a distribution, the given score for ``PointUncertainty``)
        and |y_i − ŷ_i| of the rows kept: every row up to :data:`MAX_POINTS`, else a seeded
        random subset of that many.
    rows : tuple of int
        Their row indices in the input (ascending).
    weights : tuple of float or None
        Their sample weights (``None`` without weights).
    n : int
        Rows of the input.
    uncertainty_label : str
        ``"std"`` where u is the predicted std, else ``"uncertainty"``.
    alpha : float
        The n-MeRCI coverage.
    scale : float or None
        λ^α, the α-quantile of |e_i|/u_i over all rows: the intervals ±λ^α·u_i hold a
        fraction α of the errors (``None`` when infinite, see :func:`~uqcore.regression.
        ranking.merci`).
    q_error : float
        Q_α(|e|), the α-quantile of the errors (the MeRCI of a constant uncertainty).
    mae, mean_uncertainty : float
        Over all rows (weighted).
    nmerci : float or None
        (λ^α·mean(u) − MAE) / (Q_α(|e|) − MAE), moukari2019 eq. 2 (``None`` when undefined).
    """

    uncertainty: tuple[float, ...]
    abs_error: tuple[float, ...]
    rows: tuple[int, ...]
    weights: tuple[float, ...] | None
    n: int
    uncertainty_label: str
    alpha: float
    scale: float | None
    q_error: float
    mae: float
    mean_uncertainty: float
    nmerci: float | None

    def __post_init__(self) -> None:
        _set(
            self,
            uncertainty=_floats(self.uncertainty),
            abs_error=_floats(self.abs_error),
            rows=tuple(map(int, self.rows)),
            weights=None if self.weights is None else _floats(self.weights),
        )


def interval_width_curve(
    prediction: Any,
    y: Any,
    *,
    alpha: float = 0.95,
    max_points: int = MAX_POINTS,
    seed: int = 0,
    sample_weight: Any = None,
) -> IntervalWidthCurve:
    """The points (u_i, |e_i|) and the n-MeRCI scale λ^α (moukari2019 §III, eq. 1-2).

    λ^α, Q_α(|e|), the MAE and n-MeRCI (``variant="paper"``, ``quantile_method="linear"``) are
    computed on all rows; the points are thinned to ``max_points`` rows drawn without
    replacement by ``numpy.random.default_rng([seed, 7])`` (all rows when there are fewer).

    >>> import numpy as np; from uqcore import predictions as P
    >>> c = interval_width_curve(P.PointUncertainty(np.zeros(3), np.array([1.0, 2.0, 4.0])),
    ...                          np.array([1.0, -2.0, 4.0]), alpha=1.0)
    >>> c.abs_error, c.scale, c.nmerci
    ((1.0, 2.0, 4.0), 1.0, 0.0)
    """
    ranking._check_alpha(alpha)
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
        raise UQValidationError(f"max_points must be an integer >= 1, found {max_points!r}")
    batch = regression_batch(prediction, y, sample_weight)
    caps = batch.prediction.capabilities
    if not {"point", "uncertainty"} <= caps:
        raise UQValidationError(
            "interval_width needs a point prediction and a scalar uncertainty, which a "
            f"{batch.prediction.kind} prediction lacks"
        )
    lam = ranking._lambda(batch, float(alpha), "linear")
    q = ranking._q_error(batch, float(alpha), "linear")
    u = batch.uncertainty
    mean_u = batch.mean(u)
    mae = batch.mean(batch.abs_error)
    denom = q - mae
    nm = None if lam is None or not denom > 0 else (lam * mean_u - mae) / denom
    n = batch.n
    if n > max_points:
        rng = np.random.default_rng([int(seed), 7])
        rows = np.sort(rng.choice(n, size=max_points, replace=False))
    else:
        rows = np.arange(n)
    u_host = np.asarray(to_numpy(u), dtype=np.float64)
    e_host = np.asarray(to_numpy(batch.abs_error), dtype=np.float64)
    w = batch.weights
    is_std = type(batch.prediction).uncertainty in _UNCERTAINTY_IS_STD
    return IntervalWidthCurve(
        uncertainty=host_floats(u_host[rows]),
        abs_error=host_floats(e_host[rows]),
        rows=tuple(rows.tolist()),
        weights=None if w is None else host_floats(np.asarray(to_numpy(w), dtype=np.float64)[rows]),
        n=n,
        uncertainty_label="std" if is_std else "uncertainty",
        alpha=float(alpha),
        scale=lam,
        q_error=float(q),
        mae=float(mae),
        mean_uncertainty=float(mean_u),
        nmerci=None if nm is None else float(nm),
    )


# -- registration ------------------------------------------------------------------------------
#: The calibration curves' levels for a prediction with a CDF: 0.01..0.99 completed with 0 and
#: 1, the grid of :func:`~uqcore.regression.calibration.miscalibration_area` (so the area
#: between this curve and the diagonal is that metric).
FULL_LEVELS: tuple[float, ...] = (0.0, *DEFAULT_LEVELS, 1.0)


def _calibration(prop_type: PropType) -> Any:
    def compute(prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any) -> Any:
        levels = FULL_LEVELS if "cdf" in prediction.capabilities else None
        return calibration_curve(
            prediction, y, prop_type=prop_type, levels=levels, sample_weight=sample_weight
        )

    return compute


def _sparsification(prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any) -> Any:
    return sparsification_curve(prediction, y, grid=100, sample_weight=sample_weight)


def _pit(prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any) -> Any:
    return pit_histogram(prediction, y, sample_weight=sample_weight)


def _group(prediction: Any, y: Any, *, sample_weight: Any = None, seed: int = 0, **_: Any) -> Any:
    return group_calibration_curve(prediction, y, sample_weight=sample_weight, seed=seed)


def _stratified(
    prediction: Any, y: Any, *, sample_weight: Any = None, groups: Any = None, **_: Any
) -> Any:
    return stratified_metrics(prediction, y, groups, sample_weight=sample_weight)


def _width(prediction: Any, y: Any, *, sample_weight: Any = None, seed: int = 0, **_: Any) -> Any:
    return interval_width_curve(prediction, y, sample_weight=sample_weight, seed=seed)


_NONE: frozenset[str] = frozenset()
for _spec in (
    CurveSpec(
        "calibration_curve",
        "regression",
        frozenset({"quantiles"}),
        _NONE,
        _calibration("interval"),
        CalibrationCurve,
        description="Observed against expected proportion in the central intervals",
    ),
    CurveSpec(
        "quantile_calibration_curve",
        "regression",
        frozenset({"quantiles"}),
        _NONE,
        _calibration("quantile"),
        CalibrationCurve,
        description="Observed share of y <= q_p against the quantile level p",
    ),
    CurveSpec(
        "pit_histogram",
        "regression",
        frozenset({"cdf"}),
        _NONE,
        _pit,
        PitHistogram,
        description="Histogram of the PIT values F(y) with the band of a uniform PIT",
    ),
    CurveSpec(
        "sparsification_curve",
        "regression",
        frozenset({"point", "uncertainty"}),
        _NONE,
        _sparsification,
        SparsificationCurve,
        description="Error of the data left after removing the most uncertain (model), the "
        "largest errors (oracle) or random rows",
    ),
    CurveSpec(
        "group_calibration",
        "regression",
        frozenset({"quantiles"}),
        _NONE,
        _group,
        GroupCalibrationCurve,
        integer_weights=True,
        late=True,
        description="Worst calibration error of random groups against the group size",
    ),
    CurveSpec(
        "stratified",
        "regression",
        frozenset({"point"}),
        frozenset({"groups"}),
        _stratified,
        StratifiedMetrics,
        description="Metrics per group",
    ),
    CurveSpec(
        "interval_width",
        "regression",
        frozenset({"point", "uncertainty"}),
        _NONE,
        _width,
        IntervalWidthCurve,
        description="Predicted uncertainty against absolute error, with the n-MeRCI scale",
    ),
):
    register_curve(_spec)
