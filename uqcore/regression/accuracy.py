"""Accuracy of the point prediction: MAE, RMSE, MdAE, MARPD, R², Pearson correlation.

The point prediction ŷ_i is the predictive mean (the median for ``Quantiles``, the given
prediction for ``PointUncertainty``). With sample weights w_i every mean is the weighted mean
Σ w_i t_i / Σ w_i. These are the accuracy metrics of Uncertainty Toolbox (chung2021 §3).
"""

from __future__ import annotations

import math

import numpy as np

from uqcore._backend import Array
from uqcore._scaling import exponent, max_abs, rescaled, squares_in_range
from uqcore._stats import (
    QuantileMethod,
    select_quantile,
    sorted_values,
    sorted_weights,
    weighted_pearson,
    weighted_quantile,
)
from uqcore.batch import Batch
from uqcore.registry import register, undefined
from uqcore.regression.ranking import sorted_abs_error_planned

__all__ = ["corr", "mae", "marpd", "mdae", "r2", "rmse"]

_UT = "Chung et al. 2021, Uncertainty Toolbox, §3 (accuracy metrics)"

# Why a metric is undefined, in the words of its warning; the stability engine's block paths
# report the same texts (:mod:`uqcore.stability.blocks.table`).
#: R².
CONSTANT_TARGETS = "the targets are constant (zero variance)"
#: The correlation of the point prediction and the targets.
CONSTANT_POINT_OR_TARGETS = "the predictions or the targets are constant"


@register(
    "mae",
    family="accuracy",
    needs={"point"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_UT,
    mean_terms=lambda batch: batch.abs_error,
)
def mae(batch: Batch) -> float:
    """Mean absolute error: MAE = Σ w_i |y_i − ŷ_i| / Σ w_i.

    >>> import numpy as np; from uqcore import predictions as P
    >>> mae(P.PointUncertainty([0.0, 0.0], [1.0, 1.0]), np.array([1.0, -3.0]))
    2.0
    """
    e, accept = batch.abs_error_unchecked()
    with np.errstate(over="ignore", invalid="ignore"):  # a bad y: the check below reports it
        value = batch.mean(e)
    accept(value)
    if not math.isfinite(value):  # finite y whose errors overflow: as before, numpy warns
        value = batch.mean(e)
    return value


@register(
    "rmse",
    family="accuracy",
    needs={"point"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_UT,
    mean_terms=lambda batch: batch.residual**2,
    finalize=math.sqrt,
)
def rmse(batch: Batch) -> float:
    """Root mean squared error: RMSE = sqrt(Σ w_i (y_i − ŷ_i)² / Σ w_i).

    >>> import numpy as np; from uqcore import predictions as P
    >>> rmse(P.PointUncertainty([0.0, 0.0], [1.0, 1.0]), np.array([3.0, 4.0]))  # doctest: +ELLIPSIS
    3.535...
    """
    e, accept = batch.abs_error_unchecked()
    with np.errstate(over="ignore", under="ignore"):  # the squares' range: checked below
        ms = batch.mean_square(e)
    accept(ms)  # y is finite from here on (a non-finite ms ran the check)
    if squares_in_range(ms):
        return math.sqrt(ms)  # what root_mean_square gives for squares in range
    return batch.root_mean_square(e)


@register(
    "mdae",
    family="accuracy",
    needs={"point"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_UT,
    exempt={
        "scale_weights": "with method='linear' the median is taken in units of weight "
        "(type-7 interpolation depends on the count); method='inverted_cdf' is scale-invariant",
    },
)
def mdae(batch: Batch, *, method: QuantileMethod = "linear") -> float:
    """Median absolute error: the weighted median of |y_i − ŷ_i|.

    ``method="linear"`` (default) is ``numpy.median`` for unit weights and, for integer
    weights, the median of the repeated rows; ``"inverted_cdf"`` is the lower weighted median,
    invariant to the scale of the weights. See :func:`uqcore._stats.weighted_quantile`.

    >>> import numpy as np; from uqcore import predictions as P
    >>> mdae(P.PointUncertainty(np.zeros(4), np.ones(4)), np.array([1.0, -2.0, 3.0, 10.0]))
    2.5
    """
    # The sorted |e| is shared with the ranking metrics where they make it; otherwise, without
    # weights, a partial sort (O(N)) gives the same order statistics; weights need the order.
    if batch.weights is None:
        sv = sorted_abs_error_planned(batch)
        if sv is None:
            return select_quantile(batch.xp, batch.abs_error, 0.5, method)
        return weighted_quantile(batch.xp, sv, None, 0.5, method)
    sv = sorted_values(batch, "abs_error", lambda: batch.abs_error)
    sw = sorted_weights(batch, "abs_error", lambda: batch.abs_error)
    return weighted_quantile(batch.xp, sv, sw, 0.5, method)


@register(
    "marpd",
    family="accuracy",
    needs={"point"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, 200.0),
    best=0.0,
    reference=_UT,
    mean_terms=lambda batch: _marpd_terms(batch),
)
def marpd(batch: Batch) -> float:
    """Mean absolute relative percent difference: 100 · mean(2|y_i − ŷ_i| / (|ŷ_i| + |y_i|)).

    The definition of Uncertainty Toolbox. A row with y_i = ŷ_i = 0 contributes 0 (a perfect
    prediction) instead of 0/0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> marpd(P.PointUncertainty([1.0, 0.0], [1.0, 1.0]), np.array([3.0, 0.0]))
    50.0
    """
    return batch.mean_by_chunks(lambda rows: _marpd_rows(batch, rows))


def _marpd_rows(batch: Batch, rows: slice) -> Array:
    """The terms 200|e_i| / (|ŷ_i| + |y_i|) of ``rows`` (0 where ŷ_i = y_i = 0)."""
    xp = batch.xp
    denom = xp.abs(batch.point[rows])
    denom += xp.abs(batch.y[rows])
    if float(xp.min(denom)) > 0.0:  # the usual case: no 0/0 row
        terms = batch.abs_error[rows] * 200.0
        terms /= denom
        return terms
    safe = xp.where(denom > 0, denom, 1.0)
    return xp.where(denom > 0, 200.0 * batch.abs_error[rows] / safe, 0.0)


def _marpd_terms(batch: Batch) -> Array:
    return _marpd_rows(batch, slice(0, batch.n))


@register(
    "r2",
    family="accuracy",
    needs={"point"},
    direction="higher",
    scaling="invariant",
    bounds=(None, 1.0),
    best=1.0,
    reference=_UT,
)
def r2(batch: Batch) -> float | None:
    """Coefficient of determination: R² = 1 − Σ w_i (y_i − ŷ_i)² / Σ w_i (y_i − ȳ_w)².

    Undefined (``None`` with a warning) when the targets are constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(r2(P.PointUncertainty([1.0, 2.0, 3.0], np.ones(3)), np.array([1.0, 2.0, 4.0])), 6)
    0.785714
    """
    with np.errstate(over="ignore", under="ignore"):  # checked just below
        ss_tot, ss_res = _r2_sums(batch, 0)
    if not squares_in_range(ss_tot, ss_res):
        # R² does not change when y and ŷ are scaled: divide them by a power of two (exactly)
        # where their squares overflow or underflow
        e = exponent(max_abs(batch.xp, batch.y), max_abs(batch.xp, batch.abs_error))
        if e != 0:
            ss_tot, ss_res = _r2_sums(batch, e)
    if ss_tot <= 0.0 or _constant(batch):
        undefined("r2", CONSTANT_TARGETS)
        return None
    return 1.0 - ss_res / ss_tot


def _r2_sums(batch: Batch, e: int) -> tuple[float, float]:
    """Σ w (y − ȳ)² / Σ w and Σ w (y − ŷ)² / Σ w of y and ŷ divided by 2^e."""
    y = rescaled(batch.y, e)
    ybar = batch.mean(y)
    ss_tot = batch.mean_by_chunks(lambda rows: _squared(y[rows] - ybar))
    return ss_tot, batch.mean_square(rescaled(batch.abs_error, e))


def _squared(values: Array) -> Array:
    values *= values
    return values


def _constant(batch: Batch) -> bool:
    xp = batch.xp
    y = batch.y if batch.weights is None else batch.y[batch.weights > 0]
    return bool(xp.max(y) == xp.min(y))


@register(
    "corr",
    family="accuracy",
    needs={"point"},
    direction="higher",
    scaling="invariant",
    bounds=(-1.0, 1.0),
    best=1.0,
    reference=_UT,
)
def corr(batch: Batch) -> float | None:
    """Pearson correlation between the point prediction ŷ and the targets y (weighted).

    ρ = Σ w (ŷ − ŷ̄)(y − ȳ) / sqrt(Σ w (ŷ − ŷ̄)² · Σ w (y − ȳ)²). Undefined (``None`` with a
    warning) when either is constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(corr(P.PointUncertainty([1.0, 2.0, 3.0], np.ones(3)), np.array([2.0, 4.0, 6.0])), 12)
    1.0
    """
    value = weighted_pearson(batch.xp, batch.point, batch.y, batch.weights)
    if value is None:
        undefined("corr", CONSTANT_POINT_OR_TARGETS)
    return value
