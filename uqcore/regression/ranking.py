"""Ranking metrics: does the uncertainty order the errors? (AUSE, AURG, Spearman, n-MeRCI).

These apply to every prediction kind with a point prediction and a scalar uncertainty u_i
(the predictive std for distributions, the given score for ``PointUncertainty``).

Sparsification (xiong2024 eq. 1–4, Ilg et al. 2018). Remove the most uncertain fraction α of
the data and measure the error of the rest (the *model* curve); the *oracle* curve removes the
largest errors instead, and the *random* curve removes rows at random (its expectation is the
full-set error, a constant). Conventions, stated once for every function here:

* **Ties in the uncertainty** are averaged over all orders of the tied rows. This equals
  merging each tie block into one row whose error is the block's weighted mean error and whose
  weight is the block's total weight, and makes the result independent of the row order. For
  ``error="rmse"`` the averaging applies to the squared errors (the curve is the square root of
  the order-averaged remaining mean squared error). Ties in the error do not affect the oracle.
* **Weights** are frequency weights: the removal proceeds in units of weight, partially through
  a row when needed (the row's error counts with the remaining part of its weight).
* **grid="exact"** (the paper's definition): α = t/W for t = 0, 1, …, ⌈W⌉ − 1 (W = Σ w_i, N
  for unit weights), a left Riemann sum with step 1/W, so the remaining set is never empty. An
  integer weight k equals k copies of the row; scaling all weights changes the grid, exactly as
  duplicating every row changes the paper's AUSE. For ``error="mae"`` a block of weight m,
  remaining weighted error S and remaining weight R contributes
  Σ_{j=0}^{m−1} (S − j·ē)/(R − j) = m·ē + (S − R·ē)(ψ(R + 1) − ψ(R − m + 1)) (ψ the digamma
  function), which extends to non-integer weights. For ``error="rmse"`` the square root has no
  closed-form sum: integer weights are expanded step by step (vectorised); non-integer weights
  raise :class:`~uqcore._validation.UQValidationError` pointing to ``grid=<int>``.
* **grid=K** (an integer, e.g. 100 as in fregu856/evaluating_bdl, 50 as in Poggi et al. 2020):
  α_k = k/K for k = 0, …, K − 1, a left Riemann sum with step 1/K. The removed weight α_k·W is
  generally fractional; the curve is then the linear interpolation of the cumulative error sums
  (the boundary row counts with its remaining fraction). When α_k·W is an integer for every k
  (unit weights with N divisible by K) the remaining set is exactly fregu856's
  ``sorted_inds[0:int((1 − α_k)·N)]`` rows (up to its floating-point rounding of
  ``(1.0 − fraction)·N``, which can drop one row), and the curve points agree; fregu856 then
  integrates with ``np.trapz`` over α_0..α_{K−1}, which is our sum minus half its last term.
  This grid is invariant to scaling the weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from uqcore._backend import Array, Namespace, special
from uqcore._stats import QuantileMethod, weighted_midranks, weighted_pearson, weighted_quantile
from uqcore._validation import UQValidationError, first_bad
from uqcore.batch import Batch
from uqcore.registry import register, undefined

__all__ = [
    "SparsificationCurve",
    "aurg",
    "ause",
    "merci",
    "nmerci",
    "pearson",
    "sparsification_curve",
    "spearman",
]

ErrorKind = Literal["mae", "rmse"]
Grid = Literal["exact"] | int

_ILG = (
    "Xiong et al. 2024, Uncertainty Quantification Metrics for Deep Regression, eq. 1-4; "
    "Ilg et al. 2018 (ECCV)"
)
_POGGI = "Poggi et al. 2020, On the uncertainty of self-supervised monocular depth estimation"
_SPEARMAN = "Xiong et al. 2024, eq. 8-10; Spearman 1904"
_MOUKARI = "Moukari et al. 2019, n-MeRCI (IROS), section III, eq. 1-2"

#: Most unit steps the exact RMSE grid expands (beyond this, use grid=<int>).
_MAX_EXACT_STEPS = 1 << 27


# -- validation of options -------------------------------------------------------------------
def _check_error(error: Any) -> None:
    if error not in ("mae", "rmse"):
        raise UQValidationError(f"error must be 'mae' or 'rmse', found {error!r}")


def _check_grid(grid: Any) -> None:
    if grid == "exact" and isinstance(grid, str):
        return
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 1:
        raise UQValidationError(
            f"grid must be 'exact' or a positive integer number of steps, found {grid!r}"
        )


# -- sorted blocks ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Blocks:
    """Rows (or tie blocks) in removal order with suffix sums, for one error kind."""

    xp: Namespace
    mass: Array  # weight m_b of each block
    before: Array  # removed weight before the block, C_{b-1}
    rem_err: Array  # remaining weighted error sum at the block's start, S_b
    rem_w: Array  # remaining weight at the block's start, R_b
    after_err: Array  # remaining error sum after the block, S_b − E_b
    after_w: Array  # remaining weight after the block, R_b − m_b
    mean_err: Array  # ē_b (0 for blocks of zero weight)
    total_err: float
    total_w: float


def _suffix(xp: Namespace, x: Array) -> Array:
    """s[i] = Σ_{j ≥ i} x_j, with s[n] = 0 (summed from the end, no cancellation)."""
    rev = xp.cumulative_sum(xp.flip(x))
    return xp.concat([xp.flip(rev), xp.zeros((1,), dtype=x.dtype)])


def _blocks(
    xp: Namespace, err: Array, weights: Array | None, order: Array, keys: Array | None
) -> _Blocks:
    """Blocks of ``err`` in the removal ``order``; ``keys`` merges runs of equal keys."""
    n = int(err.shape[0])
    e = xp.take(err, order)
    if weights is None:  # unit weights: the remaining weight is exactly N − i
        w = xp.ones((n,), dtype=err.dtype)
        we = e
        suf_w = xp.astype(n - xp.arange(n + 1), err.dtype)
    else:
        w = xp.take(weights, order)
        we = w * e
        suf_w = _suffix(xp, w)
    suf_e = _suffix(xp, we)
    starts = None
    if keys is not None and n > 1:
        sk = xp.take(keys, order)
        new = xp.concat([xp.ones((1,), dtype=xp.bool), sk[1:] != sk[:-1]])
        if not bool(xp.all(new)):  # tie blocks present (else every row is its own block)
            starts = xp.nonzero(new)[0]
    if starts is None:
        rem_err, after_err = suf_e[:-1], suf_e[1:]
        rem_w, after_w = suf_w[:-1], suf_w[1:]
        mass, mean_err = w, e
    else:
        ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype)])
        rem_err = xp.take(suf_e, starts)
        after_err = xp.take(suf_e, ends)
        rem_w = xp.take(suf_w, starts)
        after_w = xp.take(suf_w, ends)
        single = (ends - starts) == 1
        mass = xp.where(single, xp.take(w, starts), rem_w - after_w)
        block_err = xp.where(single, xp.take(we, starts), rem_err - after_err)
        safe = xp.where(mass > 0, mass, 1.0)
        mean_err = xp.where(mass > 0, block_err / safe, 0.0)
    total_w = float(suf_w[0])
    before = total_w - rem_w
    return _Blocks(
        xp, mass, before, rem_err, rem_w, after_err, after_w, mean_err, float(suf_e[0]), total_w
    )


def _exact_sum_mae(b: _Blocks) -> float:
    """Σ_t (remaining error / remaining weight) over unit steps t = 0, 1, … (closed form)."""
    xp = b.xp
    safe_r = xp.where(b.rem_w > 0, b.rem_w, 1.0)
    direct = xp.where(b.mass > 0, b.rem_err / safe_r, 0.0)  # a block of unit weight
    if bool(xp.all((b.mass == 1.0) | (b.mass == 0.0))):
        return float(xp.sum(direct))
    psi = special(xp).digamma
    dpsi = psi(b.rem_w + 1.0) - psi(b.after_w + 1.0)  # Σ_{j<m} 1/(R − j)
    general = b.mass * b.mean_err + (b.after_err - b.after_w * b.mean_err) * dpsi
    contrib = xp.where(b.mass == 1.0, direct, xp.where(b.mass > 0, general, 0.0))
    return float(xp.sum(contrib))


def _curve_at(b: _Blocks, removed: Array, root: bool) -> Array:
    """Error of the remaining data after removing ``removed`` units of weight (0 ≤ r < W)."""
    xp = b.xp
    ends = b.before + b.mass
    k = xp.searchsorted(ends, removed, side="right")
    k = xp.clip(k, max=int(b.mass.shape[0]) - 1)
    j = removed - xp.take(b.before, k)
    num = xp.take(b.rem_err, k) - j * xp.take(b.mean_err, k)
    den = xp.take(b.rem_w, k) - j
    num = xp.clip(num, min=0.0)
    den = xp.where(den > 0, den, 1.0)
    out = num / den
    return xp.sqrt(out) if root else out


def _integer_weights(batch: Batch) -> None:
    xp = batch.xp
    w = batch.weights
    if w is None:
        return
    idx = first_bad(w == xp.floor(w))
    if idx is not None:
        raise UQValidationError(
            "error='rmse' with grid='exact' needs integer sample weights (the exact grid steps "
            "one unit of weight at a time and the square root has no closed-form sum over a "
            f"fractional step); sample_weight[{idx[0]}] = {float(w[idx[0]]):.6g}; use grid=<int> "
            "(e.g. grid=100) for non-integer weights"
        )


# -- the sparsification computation ------------------------------------------------------------
def _errors(batch: Batch, error: str) -> Array:
    if error == "mae":
        return batch.abs_error
    return batch.shared("ranking:squared_error", lambda: batch.residual * batch.residual)


def _model_blocks(batch: Batch, error: str) -> _Blocks:
    def compute() -> _Blocks:
        order = batch.order("uncertainty", lambda: batch.uncertainty, descending=True)
        return _blocks(batch.xp, _errors(batch, error), batch.weights, order, batch.uncertainty)

    return batch.weighted(f"ranking:model_blocks:{error}", compute)


def _oracle_blocks(batch: Batch, error: str) -> _Blocks:
    def compute() -> _Blocks:
        xp = batch.xp
        # The ascending |error| order is shared with mdae and Spearman; reversed, it removes
        # the largest errors first (|e| and e² have the same order). Ties do not matter here.
        order = xp.flip(batch.order("abs_error", lambda: batch.abs_error))
        return _blocks(xp, _errors(batch, error), batch.weights, order, None)

    return batch.weighted(f"ranking:oracle_blocks:{error}", compute)


def _areas(batch: Batch, error: str, grid: Grid) -> tuple[float, float, float]:
    """(model area, oracle area, random area) under the curves, and nothing normalised."""
    xp = batch.xp
    model = _model_blocks(batch, error)
    oracle = _oracle_blocks(batch, error)
    total_w = model.total_w
    root = error == "rmse"
    full = model.total_err / total_w
    full = math.sqrt(full) if root else full
    if grid == "exact":
        if not root:
            return (
                _exact_sum_mae(model) / total_w,
                _exact_sum_mae(oracle) / total_w,
                full,  # the closed form of a constant curve: W steps of E(S), over W
            )
        _integer_weights(batch)
        steps = round(total_w)
        if steps > max(_MAX_EXACT_STEPS, 8 * batch.n):
            raise UQValidationError(
                f"error='rmse' with grid='exact' would take {steps} unit steps (the total "
                "sample weight); use grid=<int> (e.g. grid=100)"
            )
        r = xp.arange(steps, dtype=xp.float64)
        m_area = float(xp.sum(_curve_at(model, r, True))) / total_w
        o_area = float(xp.sum(_curve_at(oracle, r, True))) / total_w
        return m_area, o_area, full
    r = xp.arange(grid, dtype=xp.float64) * (total_w / grid)
    m_area = float(xp.mean(_curve_at(model, r, root)))
    o_area = float(xp.mean(_curve_at(oracle, r, root)))
    return m_area, o_area, full


def _full_error(batch: Batch, error: str) -> float:
    b = _model_blocks(batch, error)
    v = b.total_err / b.total_w
    return math.sqrt(v) if error == "rmse" else v


_EXEMPT_EXACT = {
    "scale_weights": "with grid='exact' (the default, the paper's definition) the grid steps "
    "one unit of weight, so scaling all weights changes the grid exactly as duplicating every "
    "row changes the paper's AUSE; an integer grid is scale-invariant",
}


@register(
    "ause",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="lower",
    bounds=(0.0, None),
    best=0.0,
    reference=_ILG,
    exempt=_EXEMPT_EXACT,
)
def ause(
    batch: Batch,
    *,
    error: ErrorKind = "mae",
    grid: Grid = "exact",
    normalize: bool = True,
) -> float | None:
    """Area under the sparsification error: ∫ (model curve − oracle curve) dα / full error.

    AUSE = (1/E(S)) ∫_0^1 [E(S_∨^U(α)) − E(S_∨(α))] dα (xiong2024 eq. 4), where S_∨^U(α)
    keeps the 1 − α least uncertain data, S_∨(α) the 1 − α smallest errors, and E is the MAE
    (``error="mae"``, the paper) or the RMSE (``error="rmse"``, as in fregu856). Options:
    ``grid="exact"`` (every 1/N step, the paper; default) or an integer number of equal steps;
    ``normalize=True`` divides by the full-set error E(S) (default, the paper), ``False`` gives
    the area in units of the error. Ties, weights and grids follow the module conventions.
    Best value 0 (the uncertainty orders the errors perfectly); a constant uncertainty gives the
    area between the random curve (the constant E(S)) and the oracle. Undefined (``None``) when
    normalised and every error is zero. Scaling all weights changes the exact grid (exempt).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> ause(pred, np.array([4.0, 3.0, 2.0, 1.0]))  # the worst order: (3.25 - 1.75) / 2.5
    0.6
    """
    _check_error(error)
    _check_grid(grid)
    m_area, o_area, _ = _areas(batch, error, grid)
    area = max(m_area - o_area, 0.0)
    if not normalize:
        return area
    full = _full_error(batch, error)
    if full <= 0.0:
        undefined("ause", "every error is zero, so the normalising full-set error is 0")
        return None
    return area / full


@register(
    "aurg",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="higher",
    reference=_POGGI,
    exempt=_EXEMPT_EXACT,
)
def aurg(
    batch: Batch,
    *,
    error: ErrorKind = "mae",
    grid: Grid = "exact",
    normalize: bool = True,
) -> float | None:
    """Area under the random gain: ∫ (random curve − model curve) dα (Poggi et al. 2020).

    The random curve is the expected error after removing a random fraction α, i.e. the
    full-set error E(S) at every α. Positive when the uncertainty orders the errors better than
    chance, 0 for a constant uncertainty, negative when worse than chance; higher is better.
    Options as for :func:`ause` (same grid, ties, weights); ``normalize=True`` (default, as our
    ``ause``) divides by E(S), ``False`` gives the area in units of the error (Poggi et al.
    report unnormalised curves). With the same options, AUSE + AURG = the area between the
    random curve and the oracle. Undefined (``None``) when normalised and every error is zero.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> aurg(pred, np.array([1.0, 2.0, 3.0, 4.0]))  # a perfect order: (2.5 - 1.75) / 2.5
    0.3
    """
    _check_error(error)
    _check_grid(grid)
    m_area, _, r_area = _areas(batch, error, grid)
    area = r_area - m_area
    if not normalize:
        return area
    full = _full_error(batch, error)
    if full <= 0.0:
        undefined("aurg", "every error is zero, so the normalising full-set error is 0")
        return None
    return area / full


@dataclass(frozen=True)
class SparsificationCurve:
    """Sparsification curves at the removed fractions α (arrays of the input's namespace).

    ``model``: error of the data left after removing the most uncertain fraction α;
    ``oracle``: after removing the largest errors; ``random``: expected error after a random
    removal (the full-set error). Not normalised; ``error`` and ``grid`` record the options.
    """

    fractions: Array
    model: Array
    oracle: Array
    random: Array
    error: str
    grid: str | int


def sparsification_curve(
    prediction: Any,
    y: Any,
    *,
    error: ErrorKind = "mae",
    grid: Grid = 100,
    sample_weight: Any = None,
) -> SparsificationCurve:
    """The model, oracle and random sparsification curves (xiong2024 Fig. 5).

    Same conventions as :func:`ause` (ties averaged, fractional removal, frequency weights);
    ``ause`` is the left Riemann sum of ``(model − oracle)/E(S)`` over these points. The
    default ``grid=100`` gives α = 0, 0.01, …, 0.99 (as fregu856); ``grid="exact"`` gives one
    point per unit of weight (N points for unit weights), which is large for big N.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> c = sparsification_curve(pred, np.array([4.0, 3.0, 2.0, 1.0]), grid="exact")
    >>> [float(v) for v in c.model]
    [2.5, 3.0, 3.5, 4.0]
    """
    _check_error(error)
    _check_grid(grid)
    batch = Batch(prediction, y, sample_weight)
    if "uncertainty" not in batch.prediction.capabilities:
        raise UQValidationError(
            f"sparsification_curve needs a scalar uncertainty, which a "
            f"{batch.prediction.kind} prediction does not provide"
        )
    xp = batch.xp
    model = _model_blocks(batch, error)
    oracle = _oracle_blocks(batch, error)
    total_w = model.total_w
    root = error == "rmse"
    if grid == "exact":
        if root:
            _integer_weights(batch)
        steps = math.ceil(total_w - 1e-12 * total_w)
        r = xp.arange(steps, dtype=xp.float64)
        fractions = r / total_w
    else:
        fractions = xp.arange(grid, dtype=xp.float64) / grid
        r = fractions * total_w
    m = _curve_at(model, r, root)
    o = _curve_at(oracle, r, root)
    full = _full_error(batch, error)
    return SparsificationCurve(fractions, m, o, xp.full_like(m, full), error, grid)


# -- correlations ----------------------------------------------------------------------------
@register(
    "spearman",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="higher",
    bounds=(-1.0, 1.0),
    best=1.0,
    reference=_SPEARMAN,
)
def spearman(batch: Batch) -> float | None:
    """Spearman rank correlation between the uncertainty u_i and the absolute error |e_i|.

    ρ = Pearson correlation of the ranks (xiong2024 eq. 8–10) with tied values given their
    average rank (scipy.stats.spearmanr). With weights, ranks are weighted midranks (an integer
    weight k equals k copies of the row) and the correlation is weighted. Best value 1.
    Undefined (``None`` with a warning) when the uncertainty or the errors are constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> round(spearman(pred, np.array([1.0, -3.0, 2.0, 5.0])), 12)
    0.8
    """
    xp = batch.xp
    asc_u = xp.flip(batch.order("uncertainty", lambda: batch.uncertainty, descending=True))
    asc_e = batch.order("abs_error", lambda: batch.abs_error)
    ru = weighted_midranks(xp, batch.uncertainty, batch.weights, asc_u)
    re = weighted_midranks(xp, batch.abs_error, batch.weights, asc_e)
    value = weighted_pearson(xp, ru, re, batch.weights)
    if value is None:
        undefined("spearman", "the uncertainty or the absolute errors are constant")
    return value


@register(
    "pearson",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="higher",
    bounds=(-1.0, 1.0),
    best=1.0,
    reference=_SPEARMAN,
)
def pearson(batch: Batch) -> float | None:
    """Pearson correlation between the uncertainty u_i and the absolute error |e_i| (weighted).

    ρ = Σ w (u − ū)(|e| − |ē|) / sqrt(Σ w (u − ū)² · Σ w (|e| − |ē|)²). Best value 1.
    Undefined (``None`` with a warning) when either is constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(3), np.array([1.0, 2.0, 3.0]))
    >>> round(pearson(pred, np.array([2.0, -4.0, 6.0])), 12)
    1.0
    """
    value = weighted_pearson(batch.xp, batch.uncertainty, batch.abs_error, batch.weights)
    if value is None:
        undefined("pearson", "the uncertainty or the absolute errors are constant")
    return value


# -- MeRCI / n-MeRCI ---------------------------------------------------------------------------
def _check_alpha(alpha: Any) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        raise UQValidationError(f"alpha must lie in (0, 1], found {alpha!r}")


def _check_method(method: Any) -> None:
    if method not in ("linear", "inverted_cdf"):
        raise UQValidationError(
            f"quantile_method must be 'linear' or 'inverted_cdf', found {method!r}"
        )


def _ratios(batch: Batch) -> Array:
    """|e_i| / σ_i, with 0/0 := 0 (covered by any λ) and e/0 := +inf (covered by none)."""

    def compute() -> Array:
        xp = batch.xp
        s = batch.uncertainty
        e = batch.abs_error
        safe = xp.where(s > 0, s, 1.0)
        at_zero = xp.where(e > 0, xp.full_like(e, xp.inf), 0.0)
        return xp.where(s > 0, e / safe, at_zero)

    return batch.shared("ranking:merci_ratio", compute)


def _lambda(batch: Batch, alpha: float, method: QuantileMethod) -> float | None:
    """λ^α = α-quantile of the ratios; ``None`` when it falls on an infinite ratio."""
    xp = batch.xp
    ratio = _ratios(batch)
    order = batch.order("ranking:merci_ratio", lambda: ratio)
    sv = xp.take(ratio, order)
    sw = None if batch.weights is None else xp.take(batch.weights, order)
    finite = xp.isfinite(sv)
    if bool(xp.all(finite)):
        return weighted_quantile(xp, sv, sw, alpha, method)
    # Two finite stand-ins for +inf: the quantile touches an infinite ratio iff they differ.
    top = float(xp.max(xp.where(finite, sv, 0.0)))
    lo = weighted_quantile(xp, xp.where(finite, sv, top), sw, alpha, method)
    hi = weighted_quantile(xp, xp.where(finite, sv, 2.0 * top + 1.0), sw, alpha, method)
    return lo if lo == hi else None


def _q_error(batch: Batch, alpha: float, method: QuantileMethod) -> float:
    xp = batch.xp
    order = batch.order("abs_error", lambda: batch.abs_error)
    sv = xp.take(batch.abs_error, order)
    sw = None if batch.weights is None else xp.take(batch.weights, order)
    return weighted_quantile(xp, sv, sw, alpha, method)


_EXEMPT_Q = {
    "scale_weights": "with quantile_method='linear' (the default, numpy's percentile as in the "
    "paper) the quantile is taken in units of weight (type-7 interpolation depends on the "
    "count); quantile_method='inverted_cdf' is scale-invariant",
}

_ZERO_SIGMA = (
    "more than a fraction 1 − alpha of the weight has uncertainty 0 with a nonzero error, so "
    "no finite scale λ covers a fraction alpha of the errors"
)


@register(
    "merci",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="lower",
    bounds=(0.0, None),
    reference=_MOUKARI,
    exempt=_EXEMPT_Q,
)
def merci(
    batch: Batch, *, alpha: float = 0.95, quantile_method: QuantileMethod = "linear"
) -> float | None:
    """Mean rescaled confidence interval: MeRCI^α = λ^α · mean(σ_i) (moukari2019 eq. 1).

    λ^α is the α-quantile of the ratios |e_i|/σ_i (the smallest common scale such that a
    fraction α of the errors lie within λσ_i), σ_i the uncertainty. ``quantile_method``:
    ``"linear"`` (default; numpy's percentile, as the paper's code would use) or
    ``"inverted_cdf"`` (invariant to scaling the weights). Rows with σ_i = 0 take ratio 0 if
    their error is 0 and +inf otherwise; if λ^α then depends on an infinite ratio, MeRCI is
    undefined (``None`` with a warning). Lower is better; the oracle σ_i = |e_i| gives the MAE.
    Scaling all weights changes the linear quantile (exempt).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(3), np.array([1.0, 2.0, 4.0]))
    >>> merci(pred, np.array([1.0, 2.0, 4.0]), alpha=1.0)  # doctest: +ELLIPSIS
    2.333...
    """
    _check_alpha(alpha)
    _check_method(quantile_method)
    lam = _lambda(batch, float(alpha), quantile_method)
    if lam is None:
        undefined("merci", _ZERO_SIGMA)
        return None
    return lam * batch.mean(batch.uncertainty)


@register(
    "nmerci",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="lower",
    best=0.0,
    reference=_MOUKARI,
    exempt=_EXEMPT_Q,
)
def nmerci(
    batch: Batch,
    *,
    alpha: float = 0.95,
    variant: Literal["paper", "inlier"] = "paper",
    quantile_method: QuantileMethod = "linear",
) -> float | None:
    """Normalised MeRCI: (MeRCI^α − MAE) / (Q_α(|e|) − MAE) (moukari2019 eq. 2).

    MeRCI^α = λ^α · mean(σ_i) with λ^α the α-quantile of |e_i|/σ_i (see :func:`merci`), and
    Q_α(|e|) (the paper's max^α) the α-quantile of the absolute errors: the MeRCI of a constant
    uncertainty. Properties: 1 for a constant uncertainty, 0 for the oracle σ_i = |e_i|,
    invariant to scaling σ; > 1 means worse than a constant. Lower is better, best 0.

    ``variant="paper"`` (default; eq. 2 as printed, the published numbers): MAE and mean(σ)
    over all data. ``variant="inlier"``: the means are restricted to the inliers
    I = {i : |e_i| ≤ Q_α(|e|)} (MeRCI_I = λ^α · mean_I(σ), MAE_I = mean_I |e|; λ^α and Q_α
    unchanged), which keeps the three properties and a positive denominator even when a few
    huge errors push the full MAE above Q_α(|e|). Undefined (``None`` with a warning) when the
    denominator is ≤ 0 (then the normalisation is meaningless; try ``variant="inlier"``) or λ^α
    is infinite (see :func:`merci`). ``quantile_method`` as in :func:`merci` (``"linear"``
    depends on the scale of the weights: exempt).

    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.array([1.0, -2.0, 3.0, 0.5])
    >>> nmerci(P.PointUncertainty(np.zeros(4), np.full(4, 7.0)), y)  # doctest: +ELLIPSIS
    1.0...
    >>> nmerci(P.PointUncertainty(np.zeros(4), np.abs(y)), y)
    0.0
    """
    _check_alpha(alpha)
    _check_method(quantile_method)
    if variant not in ("paper", "inlier"):
        raise UQValidationError(f"variant must be 'paper' or 'inlier', found {variant!r}")
    xp = batch.xp
    lam = _lambda(batch, float(alpha), quantile_method)
    if lam is None:
        undefined("nmerci", _ZERO_SIGMA)
        return None
    q = _q_error(batch, float(alpha), quantile_method)
    sigma = batch.uncertainty
    err = batch.abs_error
    if variant == "paper":
        mean_sigma = batch.mean(sigma)
        mae = batch.mean(err)
    else:
        inl = xp.astype(err <= q, err.dtype)
        w = inl if batch.weights is None else inl * batch.weights
        tw = float(xp.sum(w))
        mean_sigma = float(xp.sum(w * sigma)) / tw
        mae = float(xp.sum(w * err)) / tw
    denom = q - mae
    if not denom > 0.0:
        undefined(
            "nmerci",
            f"the normaliser Q_alpha(|e|) - MAE = {denom:.6g} is not positive"
            + (" (try variant='inlier')" if variant == "paper" else ""),
        )
        return None
    return (lam * mean_sigma - mae) / denom
