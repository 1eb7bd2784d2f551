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
  integrates with ``np.trapz`` over α_0..α_{K−1}: ``rule="trapezoid"`` below. This grid is
  invariant to scaling the weights.
* **rule="left"** (default) sums the curve at the grid points times the step h (1/W or 1/K),
  as above. **rule="trapezoid"** integrates the same points α_0, …, α_last by the trapezoid
  rule, the left sum minus h·(y_0 + y_last)/2, as torch-uncertainty's ``AUSE`` (``torch.
  trapezoid`` over α = k/N, k = 0, …, N − 1: ``grid="exact"``) and fregu856's and Poggi et
  al.'s code (``np.trapz`` over α = k/K: ``grid=K``) compute it. For the differences of
  curves (AUSE: model − oracle; AURG: random − model) y_0 = 0, so only the last point's half
  step is removed. The last point α_last is (⌈W⌉ − 1)/W for the exact grid (where one unit of
  weight remains) and (K − 1)/K for ``grid=K``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any, Literal

import array_api_compat
import numpy as np

from uqcore._backend import (
    Array,
    Namespace,
    clip,
    flip_is_view,
    radix_argsort,
    scatter,
    select,
    sorted_unique,
    special,
    take_descending,
)
from uqcore._compiled import kernels
from uqcore._scaling import exponent, rescaled
from uqcore._stats import (
    QuantileMethod,
    chunks,
    interpolate,
    run_values,
    sorted_midranks,
    sorted_values,
    sorted_weights,
    sum_of_products,
    tie_runs,
    tie_starts,
    unit_quantile_positions,
    weighted_pearson,
    weighted_quantile,
)
from uqcore._validation import UQValidationError, first_bad
from uqcore.batch import Batch, regression_batch
from uqcore.options import MAX_GRID, Range
from uqcore.registry import IntegerWeights, register, undefined

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
Grid = Literal["exact"] | Annotated[int, Range(1, MAX_GRID)]
#: The n-MeRCI coverage: a share of the rows in (0, 1].
Alpha = Annotated[float, Range(0, 1, lo_open=True)]
#: How the area under a sparsification curve is summed over the grid points.
Rule = Literal["left", "trapezoid"]

_ILG = (
    "Xiong et al. 2024, Uncertainty Quantification Metrics for Deep Regression, eq. 1-4; "
    "Ilg et al. 2018 (ECCV)"
)
_POGGI = "Poggi et al. 2020, On the uncertainty of self-supervised monocular depth estimation"
_SPEARMAN = "Xiong et al. 2024, eq. 8-10; Spearman 1904"
_MOUKARI = "Moukari et al. 2019, n-MeRCI (IROS), section III, eq. 1-2"

#: Most unit steps the exact RMSE grid expands (beyond this, use grid=<int>).
_MAX_EXACT_STEPS = 1 << 27

# Why a metric is undefined, in the words of its warning; the stability engine's block paths
# report the same texts (:mod:`uqcore.stability.blocks.table`).
#: Spearman's and Pearson's correlation of the uncertainty and the absolute errors.
CONSTANT_UNCERTAINTY_OR_ERRORS = "the uncertainty or the absolute errors are constant"
#: The normalised AUSE and AURG.
ALL_ERRORS_ZERO = "every error is zero, so the normalising full-set error is 0"


def normaliser_not_positive(denom: float | None, variant: str) -> str:
    """Why n-MeRCI is undefined: its normaliser (``denom`` where known) is not positive."""
    value = "" if denom is None else f" = {denom:.6g}"
    hint = " (try variant='inlier')" if variant == "paper" else ""
    return f"the normaliser Q_alpha(|e|) - MAE{value} is not positive{hint}"


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


def _check_rule(rule: Any) -> None:
    if rule not in ("left", "trapezoid"):
        raise UQValidationError(f"rule must be 'left' or 'trapezoid', found {rule!r}")


# -- sorted keys -----------------------------------------------------------------------------
# Both curves are built from arrays in the *ascending* order of their key (uncertainty, or
# |error| for the oracle): removal runs from the end, so the data remaining after a removal is
# a prefix, and the remaining error sums are prefix sums (one cumulative sum, no cancellation).


@dataclass(frozen=True)
class _Key:
    """One ranking key sorted ascending: its argsort, tie runs, and the weights in that order."""

    order: Array  # the ascending argsort (ties in any order)
    ties: Array | None  # tie_starts of the sorted key; None when all differ
    weights: Array | None  # weights in the ascending key order; None for unit weights


def _u_descending(batch: Batch) -> Array:
    """Descending argsort of the uncertainty (shared with the calibration metrics where the
    uncertainty is the std). Gathers use it as it is (a contiguous index is faster than a
    reversed one) and reverse the result where the ascending order is wanted."""
    return batch.order("uncertainty", lambda: batch.uncertainty, descending=True)


def _sorted_u(batch: Batch) -> Array:
    """The uncertainty sorted ascending (shared with ENCE and UCE, which bin σ along this order
    where the uncertainty is σ): one gather along the argsort that every user of it needs
    anyway, several times cheaper than a second sort."""
    xp = batch.xp
    return batch.shared(
        "stats:sorted:uncertainty",
        lambda: xp.take(batch.uncertainty, xp.flip(_u_descending(batch))),
    )


def _weights_by_u(batch: Batch) -> Array | None:
    """The weights in the ascending order of the uncertainty (one gather); ``None`` when
    unweighted."""
    xp = batch.xp
    w = batch.weights
    if w is None:
        return None
    return batch.weighted("ranking:weights_by_u", lambda: xp.take(w, xp.flip(_u_descending(batch))))


def _u_key(batch: Batch) -> _Key:
    xp = batch.xp
    order = xp.flip(_u_descending(batch))
    ties = batch.shared("ranking:ties:uncertainty", lambda: tie_starts(xp, _sorted_u(batch)))
    return _Key(order, ties, _weights_by_u(batch))


def _sorted_abs_error(batch: Batch) -> Array:
    """|e| sorted ascending (shared with mdae and n-MeRCI's Q_α(|e|)).

    Where reversing is free (numpy, CuPy) it is one gather along :func:`_e_rank_order`, the
    argsort that Spearman's ρ needs anyway, instead of a sort of its own; elsewhere a value
    sort."""
    xp = batch.xp
    if not flip_is_view(xp):
        return sorted_values(batch, "abs_error", lambda: batch.abs_error)
    if not batch.has_shared("stats:sorted:abs_error"):
        _e_rank_order(batch)  # makes the sorted |e| along with it
    return batch.shared(
        "stats:sorted:abs_error",
        lambda: xp.take(xp.flip(_errors_by_u_descending(batch)), _e_rank_order(batch)),
    )


#: The metrics that sort |e| (:func:`_sorted_abs_error`); with one of them in a batch's plan
#: the sorted |e| is made anyway, and mdae reads its median from it.
SORTS_ABS_ERROR = frozenset({"ause", "nmerci", "spearman"})


def sorted_abs_error_planned(batch: Batch) -> Array | None:
    """The sorted |e| where it is cached or a planned metric will make it, else ``None``."""
    if batch.has_shared("stats:sorted:abs_error") or batch.plan & SORTS_ABS_ERROR:
        return _sorted_abs_error(batch)
    return None


def _e_rank_order(batch: Batch) -> Array:
    """The ascending argsort of |e| listed in increasing uncertainty (numpy, CuPy: where the
    reversed list is a view): position j holds the uncertainty rank of the j-th smallest
    error. Shared by Spearman's ρ and the sorted |e|."""
    xp = batch.xp

    def compute() -> Array:
        by_u = xp.flip(_errors_by_u_descending(batch))
        radix = radix_argsort(xp, by_u, index=np.int32)
        if radix is not None:  # the sorted |e| comes with the order (written as int32)
            pos, sorted_e = radix
            batch.shared("stats:sorted:abs_error", lambda: sorted_e)
            return pos
        pos = xp.argsort(by_u, stable=False)
        if flip_is_view(xp) and not batch.has_shared("stats:sorted:abs_error"):
            # the sorted |e| (every user of this order needs it too) gathered along the
            # argsort as it comes, before the cast: numpy gathers along intp indices several
            # times faster than along int32 ones, which it converts first
            batch.shared("stats:sorted:abs_error", lambda: xp.take(by_u, pos))
        # held for the whole evaluation: int32 where every position fits (the same
        # positions, half the memory)
        return xp.astype(pos, xp.int32) if batch.n < (1 << 31) - 1 else pos

    return batch.shared("ranking:e_rank_order", compute)


def _abs_error_weights(batch: Batch) -> Array | None:
    """The weights in the ascending |e| order, paired with :func:`_sorted_abs_error`."""
    return sorted_weights(batch, "abs_error", lambda: batch.abs_error)


def _errors_by_u_descending(batch: Batch) -> Array:
    """|e| in the descending order of the uncertainty (one gather, shared)."""
    xp = batch.xp
    return batch.shared(
        "ranking:abs_error_by_u_desc",
        lambda: take_descending(xp, batch.abs_error, _u_descending(batch)),
    )


def _error_exponent(batch: Batch, error: str) -> int:
    """e such that the curves are computed from |e|/2^e (exact): 0 for ``error="mae"`` and for
    errors whose squares stay inside float64's range; the RMSE curves and areas are then 2^−e
    times those of the data (:func:`_in_error_units` scales them back)."""
    if error == "mae":
        return 0
    return batch.shared(
        "ranking:rmse_exponent", lambda: exponent(float(_sorted_abs_error(batch)[-1]))
    )


def _in_error_units(batch: Batch, error: str, value: float) -> float:
    """An area or error computed from :func:`_errors_by_u` / :func:`_errors_by_error`, in the
    units of the data's errors."""
    return math.ldexp(value, _error_exponent(batch, error))


def _errors_by_u(batch: Batch, error: str) -> Array:
    """The errors (|e| or e², of |e|/2^e: :func:`_error_exponent`) in the ascending order of
    the uncertainty."""
    e = batch.xp.flip(_errors_by_u_descending(batch))  # a view for numpy
    if error == "mae":
        return e
    e = rescaled(e, _error_exponent(batch, error))
    return e * e  # |e|·|e| == e·e exactly


def _errors_by_error(batch: Batch, error: str) -> Array:
    """The errors (|e| or e², of |e|/2^e: :func:`_error_exponent`) in ascending |e| order."""
    e = _sorted_abs_error(batch)
    if error == "mae":
        return e
    e = rescaled(e, _error_exponent(batch, error))
    return e * e


# -- sorted blocks ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Blocks:
    """Rows (or tie blocks) in removal order with remaining sums, for one error kind."""

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


def _prefix(xp: Namespace, x: Array) -> Array:
    """p[j] = Σ_{i < j} x_i for j = 0, …, n (one cumulative sum)."""
    return xp.concat([xp.zeros((1,), dtype=x.dtype), xp.cumulative_sum(x)])


def _blocks(xp: Namespace, err: Array, weights: Array | None, ties: Any) -> _Blocks:
    """Blocks of ``err`` (sorted by ascending key, removed from the end); ``ties`` (the key's
    :func:`~uqcore._stats.tie_starts`, or ``None``) merges runs of equal keys."""
    n = int(err.shape[0])
    we = err if weights is None else weights * err
    pre_e = _prefix(xp, we)
    pre_w = xp.arange(n + 1, dtype=err.dtype) if weights is None else _prefix(xp, weights)
    if ties is None:
        rem_err, after_err = pre_e[1:], pre_e[:-1]
        rem_w, after_w = pre_w[1:], pre_w[:-1]
        mass = xp.ones((n,), dtype=err.dtype) if weights is None else weights
        mean_err = err
    else:
        starts = ties
        ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype)])
        rem_err = xp.take(pre_e, ends)
        after_err = xp.take(pre_e, starts)
        rem_w = xp.take(pre_w, ends)
        after_w = xp.take(pre_w, starts)
        single = (ends - starts) == 1
        w1 = 1.0 if weights is None else xp.take(weights, starts)
        mass = xp.where(single, w1, rem_w - after_w)
        block_err = xp.where(single, xp.take(we, starts), rem_err - after_err)
        safe = xp.where(mass > 0, mass, 1.0)
        mean_err = xp.where(mass > 0, block_err / safe, 0.0)
    total_w = float(pre_w[-1])
    f = xp.flip  # removal order: the largest key first
    rem_w = f(rem_w)
    return _Blocks(
        xp,
        f(mass),
        total_w - rem_w,
        f(rem_err),
        rem_w,
        f(after_err),
        f(after_w),
        f(mean_err),
        float(pre_e[-1]),
        total_w,
    )


def _exact_sum_unit(xp: Namespace, err: Array) -> tuple[float, float]:
    """(Σ_t remaining error / remaining weight, total error) for unit weights and no merged
    ties: removing one row per step from the end leaves the prefix of length j = N, …, 1, so
    the sum is Σ_j (Σ_{i<j} err_i) / j — prefix sums chunk by chunk, carried across chunks."""
    n = int(err.shape[0])
    if (
        array_api_compat.is_numpy_namespace(xp)
        and err.dtype == np.float64
        and err.ndim == 1
        and (err.flags.c_contiguous or err.strides[0] == -8)
        and (jit := kernels()) is not None
    ):
        mean_sum, last = jit.prefix_mean_sum(err)
        return float(mean_sum), float(last)
    total = 0.0
    carry = 0.0
    for rows in chunks(xp, n):
        cum = xp.cumulative_sum(err[rows])
        cum += carry
        carry = float(cum[-1])
        cum /= xp.arange(rows.start + 1, rows.stop + 1, dtype=cum.dtype)
        total += float(xp.sum(cum))
    return total, carry


def _run_prefix_sums(xp: Namespace, err: Array, starts: Array) -> Array:
    """p[b] = Σ_{i < starts[b]} err_i for each run b, and p[B] = Σ err_i: the values of the
    cumulative sum at the run boundaries, computed chunk by chunk without an N-long cumulative
    sum (each chunk continues the running sum element by element, so every value is the one
    a single cumulative sum gives, bit for bit)."""
    n = int(err.shape[0])
    nb = int(starts.shape[0])
    out = xp.empty((nb + 1,), dtype=err.dtype)
    carry = 0.0
    for rows in chunks(xp, n):
        x = xp.asarray(err[rows], copy=True)
        x[0] += carry
        cum = xp.cumulative_sum(x)
        del x
        # boundaries i in (rows.start, rows.stop]: the sum before row i is cum[i − start − 1]
        lo = int(xp.searchsorted(starts, xp.asarray(rows.start + 1, dtype=starts.dtype)))
        hi = int(xp.searchsorted(starts, xp.asarray(rows.stop, dtype=starts.dtype), side="right"))
        if hi > lo:
            out[lo:hi] = xp.take(cum, starts[lo:hi] - (rows.start + 1))
        carry = float(cum[-1])
    out[0] = 0.0
    out[nb] = carry
    return out


def _exact_sum_unit_ties(xp: Namespace, err: Array, starts: Array) -> tuple[float, float]:
    """:func:`_exact_sum_mae` of the tie blocks of unit rows (runs starting at ``starts``),
    and the total error, block chunk by block chunk (no N-long temporaries; each block's term
    is computed exactly as :func:`_blocks` and :func:`_exact_sum_mae` compute it)."""
    n = int(err.shape[0])
    nb = int(starts.shape[0])
    pre = _run_prefix_sums(xp, err, starts)
    psi = special(xp).digamma
    total = 0.0
    for rows in chunks(xp, nb):
        after_w = xp.astype(starts[rows], xp.float64)
        rem_w = xp.empty_like(after_w)
        m = rows.stop - rows.start
        if rows.stop < nb:
            rem_w[:] = xp.astype(starts[rows.start + 1 : rows.stop + 1], xp.float64)
        else:
            rem_w[: m - 1] = xp.astype(starts[rows.start + 1 : rows.stop], xp.float64)
            rem_w[m - 1] = float(n)
        after_err = pre[rows]
        rem_err = pre[rows.start + 1 : rows.stop + 1]
        mass = rem_w - after_w
        mean_err = (rem_err - after_err) / mass
        direct = rem_err / rem_w
        dpsi = psi(rem_w + 1.0) - psi(after_w + 1.0)
        general = mass * mean_err + (after_err - after_w * mean_err) * dpsi
        total += float(xp.sum(xp.where(mass == 1.0, direct, general)))
    return total, float(pre[nb])


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
    k = clip(xp, k, max=int(b.mass.shape[0]) - 1)
    j = removed - xp.take(b.before, k)
    num = xp.take(b.rem_err, k) - j * xp.take(b.mean_err, k)
    den = xp.take(b.rem_w, k) - j
    num = clip(xp, num, min=0.0)
    den = xp.where(den > 0, den, 1.0)
    out = num / den
    return xp.sqrt(out) if root else out


def _unit_curve(
    xp: Namespace, err: Array, ties: Array | None, removed: Array, root: bool
) -> tuple[Array, float]:
    """``_curve_at(_blocks(xp, err, None, ties), removed, root)`` and the total error, for unit
    weights, without the blocks' N-long arrays: only the blocks that the G points fall in are
    looked at, their prefix sums taken from one chunked pass (:func:`_run_prefix_sums`, the
    values of one cumulative sum bit for bit), and every operation on them is the one
    :func:`_blocks` and :func:`_curve_at` do, so the values are the same bits.

    With unit weights a block b (rows start_b .. end_b − 1 in ascending key order) ends, in
    removal order, after W − start_b units of weight; the point r falls in the last block with
    W − start_b > r, that is start_b < W − ⌊r⌋ (integers, exact). ``ties``: the key's tie
    starts, or ``None`` (every row a block)."""
    n = int(err.shape[0])
    total_w = float(n)
    # the block of each point: the last start below W − ⌊r⌋ (rows are their own starts)
    bound = n - xp.astype(xp.floor(removed), xp.int64)
    if ties is None:
        start = clip(xp, bound - 1, min=0)
        end = start + 1
    else:
        nb = int(ties.shape[0])
        b = clip(xp, xp.searchsorted(ties, xp.astype(bound, ties.dtype)) - 1, min=0, max=nb - 1)
        start = xp.astype(xp.take(ties, b), xp.int64)
        nxt = clip(xp, b + 1, max=nb - 1)
        end = xp.where(b + 1 < nb, xp.astype(xp.take(ties, nxt), xp.int64), n)
    # prefix sums Σ_{i<p} err_i at the blocks' starts and ends (0 first, n by the total)
    inner = sorted_unique(xp, xp.concat([xp.zeros((1,), dtype=xp.int64), start, end]))
    inner = inner[inner < n]
    pre = _run_prefix_sums(xp, err, inner)
    total_err = float(pre[-1])

    def prefix(p: Array) -> Array:  # pre: the prefix at each of ``inner``, then at n
        return xp.take(pre, xp.searchsorted(inner, p))  # p = n finds the last entry

    rem_err = prefix(end)
    end_w = xp.astype(end, xp.float64)
    mass = end_w - xp.astype(start, xp.float64)
    single = (end - start) == 1
    block_err = xp.where(single, xp.take(err, start), rem_err - prefix(start))
    mean_err = block_err / xp.where(single, 1.0, mass)
    before = total_w - end_w
    j = removed - before
    num = rem_err - j * mean_err
    den = end_w - j
    num = clip(xp, num, min=0.0)
    den = xp.where(den > 0, den, 1.0)
    out = num / den
    return (xp.sqrt(out) if root else out), total_err


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
def _model_blocks(batch: Batch, error: str) -> _Blocks:
    key = _u_key(batch)
    return _blocks(batch.xp, _errors_by_u(batch, error), key.weights, key.ties)


def _oracle_blocks(batch: Batch, error: str) -> _Blocks:
    # Ascending |e| (e² has the same order), removed from the end: the largest errors first.
    # Ties in the error do not matter here.
    return _blocks(batch.xp, _errors_by_error(batch, error), _abs_error_weights(batch), None)


def _curve_area(batch: Batch, b: _Blocks, error: str, grid: Grid) -> float:
    """Area under one curve (not normalised) from its blocks, for the grids that need them."""
    xp = batch.xp
    root = error == "rmse"
    total_w = b.total_w
    if grid == "exact":
        if not root:
            return _exact_sum_mae(b) / total_w
        _integer_weights(batch)
        steps = round(total_w)
        if steps > max(_MAX_EXACT_STEPS, 8 * batch.n):
            raise UQValidationError(
                f"error='rmse' with grid='exact' would take {steps} unit steps (the total "
                "sample weight); use grid=<int> (e.g. grid=100)"
            )
        r = xp.arange(steps, dtype=xp.float64)
        return float(xp.sum(_curve_at(b, r, True))) / total_w
    r = xp.arange(grid, dtype=xp.float64) * (total_w / grid)
    return float(xp.mean(_curve_at(b, r, root)))


def _model_area(batch: Batch, error: str, grid: Grid) -> tuple[float, float]:
    """(area under the model curve, full-set error E(S)), not normalised; cached per weights."""

    def compute() -> tuple[float, float]:
        unit = grid == "exact" and error == "mae" and batch.weights is None
        ties = _u_key(batch).ties
        if unit and ties is None:  # unit blocks: the closed form is a plain sum
            s, total_err = _exact_sum_unit(batch.xp, _errors_by_u(batch, error))
            return s / batch.n, total_err / batch.n
        if unit and ties is not None:  # unit rows in tie blocks: chunk by chunk
            s, total_err = _exact_sum_unit_ties(batch.xp, _errors_by_u(batch, error), ties)
            return s / batch.n, total_err / batch.n
        b = _model_blocks(batch, error)
        full = b.total_err / b.total_w
        return _curve_area(batch, b, error, grid), math.sqrt(full) if error == "rmse" else full

    return batch.weighted(f"ranking:model_area:{error}:{grid!r}", compute)


def _oracle_area(batch: Batch, error: str, grid: Grid) -> float:
    """Area under the oracle curve, not normalised; cached per weights."""

    def compute() -> float:
        if grid == "exact" and error == "mae" and batch.weights is None:
            return _exact_sum_unit(batch.xp, _errors_by_error(batch, error))[0] / batch.n
        return _curve_area(batch, _oracle_blocks(batch, error), error, grid)

    return batch.weighted(f"ranking:oracle_area:{error}:{grid!r}", compute)


def _last_points(batch: Batch, error: str, grid: Grid) -> tuple[float, float]:
    """(model, oracle) curve at the last grid point α_last, the end point that
    ``rule="trapezoid"`` counts with half a step; cached per weights."""

    def compute() -> tuple[float, float]:
        xp = batch.xp
        if grid == "exact" and batch.weights is None and _u_key(batch).ties is None:
            # one row remains: the least uncertain one (model), the smallest error (oracle)
            m = float(_errors_by_u(batch, error)[0])
            o = float(_errors_by_error(batch, error)[0])
        else:
            model = _model_blocks(batch, error)
            total_w = model.total_w
            if grid == "exact":
                r = math.ceil(total_w - 1e-12 * total_w) - 1.0
            else:
                r = (grid - 1) * (total_w / grid)  # as the grid of _curve_area
            at = xp.asarray([r], dtype=xp.float64)
            m = float(_curve_at(model, at, False)[0])
            o = float(_curve_at(_oracle_blocks(batch, error), at, False)[0])
        return (math.sqrt(m), math.sqrt(o)) if error == "rmse" else (m, o)

    return batch.weighted(f"ranking:last_points:{error}:{grid!r}", compute)


def _half_step(batch: Batch, grid: Grid) -> float:
    """h/2, the weight of the end points in the trapezoid rule (h = 1/W or 1/K)."""
    return 0.5 / (batch.total_weight if grid == "exact" else grid)


#: The exact RMSE grid steps one unit of weight at a time (see the module docstring).
_INTEGER_EXACT_RMSE = IntegerWeights(
    "the exact grid steps one unit of weight at a time, and the square root has no closed-form "
    "sum over a fractional step; grid=<int> takes any weights",
    when={"error": "rmse", "grid": "exact"},
)

_EXEMPT_EXACT = {
    "scale_weights": "with grid='exact' (the default, the paper's definition) the grid steps "
    "one unit of weight, so scaling all weights changes the grid exactly as duplicating every "
    "row changes the paper's AUSE; an integer grid is scale-invariant",
}


@register(
    "ause",
    biased=True,
    family="ranking",
    needs={"point", "uncertainty"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_ILG,
    exempt=_EXEMPT_EXACT,
    integer_weights=_INTEGER_EXACT_RMSE,
)
def ause(
    batch: Batch,
    *,
    error: ErrorKind = "mae",
    grid: Grid = "exact",
    normalize: bool = True,
    rule: Rule = "left",
) -> float | None:
    """Area under the sparsification error: ∫ (model curve − oracle curve) dα / full error.

    AUSE = (1/E(S)) ∫_0^1 [E(S_∨^U(α)) − E(S_∨(α))] dα (xiong2024 eq. 4), where S_∨^U(α)
    keeps the 1 − α least uncertain data, S_∨(α) the 1 − α smallest errors, and E is the MAE
    (``error="mae"``, the paper) or the RMSE (``error="rmse"``, as in fregu856). Options:
    ``grid="exact"`` (every 1/N step, the paper; default) or an integer number of equal steps;
    ``normalize=True`` divides by the full-set error E(S) (default, the paper), ``False`` gives
    the area in units of the error; ``rule="left"`` (default) sums the curves at the grid
    points α_0..α_last times the step h, ``rule="trapezoid"`` integrates them by the trapezoid
    rule, AUSE_left − h·(model(α_last) − oracle(α_last))/(2·E(S)) (torch-uncertainty's
    ``AUSE``, the sum of its errors' sparsification: ``grid="exact"``, ``error="mae"`` with
    |e| as its errors; fregu856's and Poggi et al.'s ``np.trapz``: ``grid=K``). Ties, weights
    and grids follow the module conventions.
    Best value 0 (the uncertainty orders the errors perfectly); a constant uncertainty gives the
    area between the random curve (the constant E(S)) and the oracle. Undefined (``None``) when
    normalised and every error is zero. Scaling all weights changes the exact grid (exempt).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> ause(pred, np.array([4.0, 3.0, 2.0, 1.0]))  # the worst order: (3.25 - 1.75) / 2.5
    0.6
    >>> ause(pred, np.array([4.0, 3.0, 2.0, 1.0]), rule="trapezoid")  # 0.6 - (4 - 1) / 8 / 2.5
    0.45
    """
    _check_error(error)
    _check_grid(grid)
    _check_rule(rule)
    m_area, full = _model_area(batch, error, grid)
    area = m_area - _oracle_area(batch, error, grid)
    if rule == "trapezoid":  # the first points agree (both E(S)): only the last half step
        m_last, o_last = _last_points(batch, error, grid)
        area -= _half_step(batch, grid) * (m_last - o_last)
    area = max(area, 0.0)
    if not normalize:
        return _in_error_units(batch, error, area)
    if full <= 0.0:
        undefined("ause", ALL_ERRORS_ZERO)
        return None
    return area / full


@register(
    "aurg",
    biased=True,
    family="ranking",
    needs={"point", "uncertainty"},
    direction="higher",
    scaling="invariant",
    reference=_POGGI,
    exempt=_EXEMPT_EXACT,
    integer_weights=_INTEGER_EXACT_RMSE,
)
def aurg(
    batch: Batch,
    *,
    error: ErrorKind = "mae",
    grid: Grid = "exact",
    normalize: bool = True,
    rule: Rule = "left",
) -> float | None:
    """Area under the random gain: ∫ (random curve − model curve) dα (Poggi et al. 2020).

    The random curve is the expected error after removing a random fraction α, i.e. the
    full-set error E(S) at every α. Positive when the uncertainty orders the errors better than
    chance, 0 for a constant uncertainty, negative when worse than chance; higher is better.
    Options as for :func:`ause` (same grid, ties, weights, ``rule``: the trapezoid rule
    subtracts h·(E(S) − model(α_last))/2 from the left sum); ``normalize=True`` (default, as our
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
    _check_rule(rule)
    m_area, full = _model_area(batch, error, grid)
    area = full - m_area  # the random curve is the constant E(S)
    if rule == "trapezoid":
        area -= _half_step(batch, grid) * (full - _last_points(batch, error, grid)[0])
    if not normalize:
        return _in_error_units(batch, error, area)
    if full <= 0.0:
        undefined("aurg", ALL_ERRORS_ZERO)
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
    ``ause`` is the left Riemann sum (with ``rule="trapezoid"`` the trapezoid rule) of
    ``(model − oracle)/E(S)`` over these points. The default ``grid=100`` gives α = 0, 0.01,
    …, 0.99 (as fregu856); ``grid="exact"`` gives one point per unit of weight (N points for
    unit weights), which is large for big N.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    >>> c = sparsification_curve(pred, np.array([4.0, 3.0, 2.0, 1.0]), grid="exact")
    >>> [float(v) for v in c.model]
    [2.5, 3.0, 3.5, 4.0]
    """
    _check_error(error)
    _check_grid(grid)
    batch = regression_batch(prediction, y, sample_weight)
    if "uncertainty" not in batch.prediction.capabilities:
        raise UQValidationError(
            f"sparsification_curve needs a scalar uncertainty, which a "
            f"{batch.prediction.kind} prediction does not provide"
        )
    xp = batch.xp
    root = error == "rmse"
    e = _error_exponent(batch, error)
    if grid != "exact" and batch.weights is None:
        # a few points of unit-weight curves: no N-long blocks (their memory is the
        # curve's peak at large N)
        total_w = float(batch.n)
        fractions = xp.arange(grid, dtype=xp.float64) / grid
        r = fractions * total_w
        m, total_err = _unit_curve(xp, _errors_by_u(batch, error), _u_key(batch).ties, r, root)
        o, _ = _unit_curve(xp, _errors_by_error(batch, error), None, r, root)
    else:
        model = _model_blocks(batch, error)
        oracle = _oracle_blocks(batch, error)
        total_w, total_err = model.total_w, model.total_err
        if grid == "exact":
            if root:
                _integer_weights(batch)
            steps = math.ceil(total_w - 1e-12 * total_w)
            r = xp.arange(steps, dtype=xp.float64)
            fractions = r / total_w
        else:
            fractions = xp.arange(grid, dtype=xp.float64) / grid
            r = fractions * total_w
        m, o = _curve_at(model, r, root), _curve_at(oracle, r, root)
    m = rescaled(m, -e)
    o = rescaled(o, -e)
    full = total_err / total_w
    full = math.ldexp(math.sqrt(full) if root else full, e)
    return SparsificationCurve(fractions, m, o, xp.full_like(m, full), error, grid)


# -- correlations ----------------------------------------------------------------------------
@register(
    "spearman",
    biased=True,
    family="ranking",
    needs={"point", "uncertainty"},
    direction="higher",
    scaling="invariant",
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
    n = batch.n
    u_key = _u_key(batch)
    ties_e = batch.shared(
        "ranking:ties:abs_error", lambda: tie_starts(xp, _sorted_abs_error(batch))
    )
    if u_key.ties is None and ties_e is None and u_key.weights is None:
        pos = _e_rank_order(batch) if flip_is_view(xp) else None
        value = _spearman_distinct(xp, n, _errors_by_u_descending(batch), pos)
    elif u_key.weights is None and flip_is_view(xp):
        value = _spearman_unit_ties(xp, n, _e_rank_order(batch), u_key.ties, ties_e)
    else:
        # Midranks in each key's sorted order; the |e| ranks are then brought into the
        # uncertainty's order (one scatter, one gather), where its ranks and weights are.
        blocks_u = None if u_key.ties is None else tie_runs(xp, _sorted_u(batch))
        ru = sorted_midranks(xp, n, blocks_u, u_key.weights)
        del blocks_u
        blocks_e = None if ties_e is None else tie_runs(xp, _sorted_abs_error(batch))
        re_sorted = sorted_midranks(xp, n, blocks_e, _abs_error_weights(batch))
        del blocks_e
        order_e = batch.order("abs_error", lambda: batch.abs_error)
        re = xp.take(scatter(xp, order_e, re_sorted), u_key.order)
        del re_sorted
        value = weighted_pearson(xp, ru, re, u_key.weights)
    if value is None:
        undefined("spearman", CONSTANT_UNCERTAINTY_OR_ERRORS)
    return value


def _doubled_midranks(xp: Namespace, n: int, starts: Array) -> tuple[Array, float]:
    """Per run of ties (starting at ``starts``): twice its midrank minus the mean rank,
    d_b = s_b + e_b − N for the rows s_b..e_b − 1 (an integer, so exact; int32 where N < 2^31,
    half the memory), and the rank variance sum Σ_b t_b·(d_b/2)² (t_b = e_b − s_b)."""
    nb = int(starts.shape[0])
    small = n < (1 << 31) - 1
    d = xp.empty((nb,), dtype=xp.int32 if small else starts.dtype)
    sq = 0.0
    for rows in chunks(xp, nb):
        s = starts[rows]
        e = starts[rows.start + 1 : rows.stop + 1]
        if rows.stop == nb:
            e = xp.concat([e, xp.asarray([n], dtype=starts.dtype)])
        t = xp.astype(e - s, xp.float64)
        dd = xp.astype(s, xp.int64) + e  # in int64: s + e reaches 2N
        dd -= n
        d[rows] = xp.astype(dd, d.dtype)
        df = xp.astype(dd, xp.float64)
        sq += sum_of_products(xp, t, df, df)
    return d, 0.25 * sq


def _spearman_unit_ties(
    xp: Namespace, n: int, pos: Array, ties_u: Array | None, ties_e: Array | None
) -> float | None:
    """Spearman's ρ for unit weights with ties (midranks), without an N-long rank vector of
    the errors or any scatter.

    ``pos`` sorts the errors listed in increasing uncertainty (:func:`_e_rank_order`): the
    j-th smallest error is the row at uncertainty position p_j, so Σ_i r_u(i)·r_e(i) =
    Σ_j r_u[p_j]·r_e[j] with both ranks in their own sorted order. The ranks are centred
    (midranks average exactly N/2), so the cross sum needs no mean, and each variance is a
    sum over the runs, Σ_b t_b·c_b² (no row-wise pass). The ranks are held doubled as
    integers (exact) and halved in float64 chunk by chunk.
    """
    if n < 2:
        return None
    half = (n - 1) / 2.0
    distinct = float(Fraction(n * (n * n - 1), 12))
    ru = d_e = None
    if ties_u is None:
        saa = distinct
    else:
        d_u, saa = _doubled_midranks(xp, n, ties_u)
        # doubled centred ranks in increasing uncertainty (int32: half an N-long float64),
        # filled chunk by chunk (no N-long run lengths)
        ru = xp.empty((n,), dtype=d_u.dtype)
        for rows in chunks(xp, n):
            ru[rows] = run_values(xp, d_u, ties_u, rows.start, rows.stop)
        del d_u
    if ties_e is None:
        sbb = distinct
    else:
        d_e, sbb = _doubled_midranks(xp, n, ties_e)
    if saa <= 0.0 or sbb <= 0.0:
        return None
    sab = 0.0
    for rows in chunks(xp, n):  # Σ_j r_u[p_j]·r_e[j], chunk by chunk
        if ru is None:
            a = xp.astype(pos[rows], xp.float64)
            a -= half
        else:
            a = xp.astype(xp.take(ru, pos[rows]), xp.float64)
            a *= 0.5
        if d_e is None or ties_e is None:
            b = xp.arange(rows.start, rows.stop, dtype=xp.float64)
            b -= half
        else:
            b = xp.astype(run_values(xp, d_e, ties_e, rows.start, rows.stop), xp.float64)
            b *= 0.5
        sab += sum_of_products(xp, a, b)
    r = sab / (saa**0.5 * sbb**0.5)
    return float(max(-1.0, min(1.0, r)))


#: Up to this many rows Σ_j j·p_j of a permutation fits in int64 (N³/3 < 2^63).
_EXACT_RANK_SUM_ROWS = 2_000_000


def _spearman_distinct(
    xp: Namespace, n: int, e_by_u_desc: Array, pos: Array | None = None
) -> float | None:
    """Spearman's ρ for unit weights and no ties in either variable, from one argsort.

    With centred ranks c_k = k − (N − 1)/2 (exact), both rank variances are Σ c_k² =
    N(N² − 1)/12. Let p sort the errors listed in increasing uncertainty: the j-th smallest
    error sits at position p_j of that list, which is its uncertainty rank, so
    ρ = Σ_j c_j·(p_j − (N − 1)/2) / Σ c_k² (no scatter or gather of the inverse permutations).
    That list is the reversed ``e_by_u_desc`` (a view for numpy and CuPy); torch argsorts the
    decreasing list itself, whose positions p'_j = N − 1 − p_j flip the sign of the sum.
    ``pos``: that argsort of the increasing list where it is computed already. A numpy ``pos``
    of up to :data:`_EXACT_RANK_SUM_ROWS` rows gives ρ exactly rounded: Σ_j j·p_j is one
    integer dot product and ρ = 3(4·Σ_j j·p_j − N(N − 1)²)/(N(N² − 1)) a fraction of integers.
    """
    if n < 2:
        return None  # one row: the ranks are constant
    if pos is not None and isinstance(pos, np.ndarray) and n <= _EXACT_RANK_SUM_ROWS:
        # Σ_j (j − h)(p_j − h) = Σ_j j·p_j − N·h² with h = (N − 1)/2 (p is a permutation of
        # 0..N−1): one integer dot product, exact, and so is ρ = 3(4S − N(N − 1)²)/(N(N² − 1))
        s = int(np.dot(np.arange(n, dtype=np.int64), pos.astype(np.int64, copy=False)))
        rho = Fraction(3 * (4 * s - n * (n - 1) ** 2), n * (n * n - 1))
        return float(max(-1.0, min(1.0, float(rho))))
    half = (n - 1) / 2.0
    if pos is not None:
        sign = 1.0
    elif flip_is_view(xp):
        pos, sign = xp.argsort(xp.flip(e_by_u_desc), stable=False), 1.0
    else:
        pos, sign = xp.argsort(e_by_u_desc, stable=False), -1.0
    sab = 0.0
    for rows in chunks(xp, n):  # Σ_j c_j·(p_j − (N − 1)/2), chunk by chunk
        c = xp.arange(rows.start, rows.stop, dtype=xp.float64)
        c -= half
        p = xp.astype(pos[rows], xp.float64)
        p -= half
        sab += sign * sum_of_products(xp, c, p)
    saa = float(Fraction(n * (n * n - 1), 12))
    return float(max(-1.0, min(1.0, sab / saa)))


@register(
    "pearson",
    family="ranking",
    needs={"point", "uncertainty"},
    direction="higher",
    scaling="invariant",
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
        undefined("pearson", CONSTANT_UNCERTAINTY_OR_ERRORS)
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
    xp = batch.xp
    s = batch.uncertainty
    e = batch.abs_error
    if float(xp.min(s)) > 0.0:  # one reduction, no boolean temporary
        return e / s
    safe = xp.where(s > 0, s, 1.0)
    at_zero = xp.where(e > 0, xp.full_like(e, xp.inf), 0.0)
    return xp.where(s > 0, e / safe, at_zero)


#: From this many rows on, the ratios' order statistics are selected by the compiled radix
#: select (no N-array of ratios; two passes over |e| and σ); below, a partition of the ratios
#: is cheaper than the select's table of buckets.
_RADIX_SELECT_MIN = 1 << 16


def _ratio_order_stats(batch: Batch, lo: int, hi: int) -> tuple[float, float, float]:
    """(r_(lo), r_(hi), the largest finite ratio or 0 if none) of the ratios |e_i|/σ_i
    (:func:`_ratios`), r_(k) the k-th smallest, 0-based. The third is what the caller reads
    only when r_(lo) or r_(hi) is infinite; the partition path computes it only then (NaN
    otherwise)."""
    xp = batch.xp
    e, s = batch.abs_error, batch.uncertainty
    if (
        batch.n >= _RADIX_SELECT_MIN
        and array_api_compat.is_numpy_namespace(xp)
        and e.dtype == np.float64
        and s.dtype == np.float64
        and e.flags.c_contiguous  # the layout the kernel was compiled for at start
        and s.flags.c_contiguous
        and (jit := kernels()) is not None
    ):
        a, b, top = jit.ratio_order_stats(e, s, lo, hi)
        return float(a), float(b), float(top)
    ratio = _ratios(batch)  # this call's own array: partitioned in place (no copy)
    got = select(xp, ratio, [lo] if hi == lo else [lo, hi], overwrite=True)
    a, b = got[0], got[-1]
    if math.isfinite(a) and math.isfinite(b):
        return a, b, math.nan
    return a, b, float(xp.max(xp.where(xp.isfinite(ratio), ratio, 0.0)))


def _lambda(batch: Batch, alpha: float, method: QuantileMethod) -> float | None:
    """λ^α = α-quantile of the ratios; ``None`` when it falls on an infinite ratio.

    Where the quantile touches an infinite ratio is decided as if +inf were replaced by two
    finite stand-ins above every finite ratio (the largest finite ratio ``top`` and 2·top + 1):
    λ is defined iff both give the same value. Cached per weights (merci and nmerci share it).
    """

    def compute() -> float | None:
        xp = batch.xp
        if batch.weights is None:  # an O(N) selection of the one or two order statistics
            lo, hi, frac = unit_quantile_positions(batch.n, alpha, method)
            a, b, top = _ratio_order_stats(batch, lo, hi if frac is not None else lo)
            if math.isfinite(a) and (frac is None or math.isfinite(b)):
                return interpolate(a, b, frac)
            big = 2.0 * top + 1.0
            low = interpolate(a if math.isfinite(a) else top, b if math.isfinite(b) else top, frac)
            high = interpolate(a if math.isfinite(a) else big, b if math.isfinite(b) else big, frac)
            return low if low == high else None
        sv = sorted_values(batch, "ranking:merci_ratio", lambda: _ratios(batch))
        sw = sorted_weights(batch, "ranking:merci_ratio", lambda: _ratios(batch))
        finite = xp.isfinite(sv)
        if bool(xp.all(finite)):
            return weighted_quantile(xp, sv, sw, alpha, method)
        # Two finite stand-ins for +inf: the quantile touches an infinite ratio iff they differ.
        top = float(xp.max(xp.where(finite, sv, 0.0)))
        lo_q = weighted_quantile(xp, xp.where(finite, sv, top), sw, alpha, method)
        hi_q = weighted_quantile(xp, xp.where(finite, sv, 2.0 * top + 1.0), sw, alpha, method)
        return lo_q if lo_q == hi_q else None

    return batch.weighted(f"ranking:merci_lambda:{alpha!r}:{method}", compute)


def _q_error(batch: Batch, alpha: float, method: QuantileMethod) -> float:
    """Q_α(|e|) from the shared sorted |e| (the quantile itself is O(1) once sorted)."""
    return weighted_quantile(
        batch.xp, _sorted_abs_error(batch), _abs_error_weights(batch), alpha, method
    )


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
    biased=True,
    family="ranking",
    needs={"point", "uncertainty"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    reference=_MOUKARI,
    exempt=_EXEMPT_Q,
)
def merci(
    batch: Batch, *, alpha: Alpha = 0.95, quantile_method: QuantileMethod = "linear"
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
    biased=True,
    family="ranking",
    needs={"point", "uncertainty"},
    direction="lower",
    scaling="invariant",
    best=0.0,
    reference=_MOUKARI,
    exempt=_EXEMPT_Q,
)
def nmerci(
    batch: Batch,
    *,
    alpha: Alpha = 0.95,
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
        undefined("nmerci", normaliser_not_positive(denom, variant))
        return None
    return (lam * mean_sigma - mae) / denom
