"""Weighted order statistics shared by several metric families.

Weights are *frequency* weights throughout: an integer weight k gives exactly the result of k
copies of the row, and a zero weight exactly drops it. Everything here works on sorted data so
that callers can sort once and reuse the order.
"""

from __future__ import annotations

from typing import Literal

from uqcore._backend import Array, Namespace, scatter

__all__ = [
    "QuantileMethod",
    "tie_blocks",
    "weighted_midranks",
    "weighted_pearson",
    "weighted_quantile",
]

QuantileMethod = Literal["linear", "inverted_cdf"]


def weighted_quantile(
    xp: Namespace,
    sorted_values: Array,
    sorted_weights: Array | None,
    q: float,
    method: QuantileMethod = "linear",
) -> float:
    """Quantile of already-sorted values under frequency weights.

    ``"linear"`` (Hyndman & Fan type 7, numpy's default): with cumulative weights C_k and total
    W, the value at unit position t is v_k for C_{k−1} ≤ t < C_k, and the quantile is the linear
    interpolation at h = q·(W − 1). With unit weights this is ``numpy.quantile``; with integer
    weights it equals ``numpy.quantile`` of the repeated rows. It depends on the weights' scale
    (as type 7 depends on N).

    ``"inverted_cdf"`` (type 1): the smallest v_k with C_k ≥ q·W (q = 0 gives the minimum among
    rows of positive weight). Invariant to repeating rows *and* to scaling the weights.
    """
    n = int(sorted_values.shape[0])
    if sorted_weights is None:
        cum = None
        total = float(n)
    else:
        cum = xp.cumulative_sum(sorted_weights)
        total = float(cum[-1])
    if method == "inverted_cdf":
        target = q * total
        if cum is None:
            k = max(int(-(-target // 1)) - 1, 0)  # ceil(target) - 1
            return float(sorted_values[min(k, n - 1)])
        if q == 0:
            assert sorted_weights is not None
            return float(sorted_values[int(xp.nonzero(sorted_weights > 0)[0][0])])
        k = int(xp.searchsorted(cum, xp.asarray(target, dtype=cum.dtype), side="left"))
        return float(sorted_values[min(k, n - 1)])
    if method != "linear":
        raise ValueError(f"unknown quantile method {method!r}")
    h = q * (total - 1.0)
    if h <= 0:
        if sorted_weights is None:
            return float(sorted_values[0])
        return float(sorted_values[int(xp.nonzero(sorted_weights > 0)[0][0])])
    lo_t = float(int(h))
    frac = h - lo_t
    if cum is None:
        lo = int(lo_t)
        hi = min(lo + 1, n - 1)
        a = float(sorted_values[lo])
        b = float(sorted_values[hi])
        return a + frac * (b - a)
    # unit position t lies in row k with C_{k-1} <= t < C_k  ->  first k with C_k > t
    ts = xp.asarray([lo_t, min(lo_t + 1.0, total - 1.0)], dtype=cum.dtype)
    ks = xp.searchsorted(cum, ts, side="right")
    ks = xp.clip(ks, max=n - 1)
    a = float(sorted_values[int(ks[0])])
    b = float(sorted_values[int(ks[1])])
    return a + frac * (b - a)


def tie_blocks(xp: Namespace, sorted_values: Array) -> tuple[Array, Array]:
    """Start index of each run of equal values in a sorted array, and each row's run id."""
    n = int(sorted_values.shape[0])
    new = xp.ones((n,), dtype=xp.bool)
    if n > 1:
        new = xp.concat([xp.ones((1,), dtype=xp.bool), sorted_values[1:] != sorted_values[:-1]])
    block_id = xp.cumulative_sum(xp.astype(new, xp.int64)) - 1
    starts = xp.nonzero(new)[0]
    return starts, block_id


def weighted_midranks(xp: Namespace, values: Array, weights: Array | None, order: Array) -> Array:
    """Average ranks with ties, in units of weight: r_i = C_before(i) + m_block(i)/2.

    ``order`` is an ascending stable argsort of ``values``. C_before is the total weight of
    strictly smaller values and m_block the total weight of values equal to v_i. With unit
    weights this is scipy's average rank minus 1/2 (a constant shift, which leaves correlations
    unchanged); with integer weights it is the average rank of the repeated rows minus 1/2; and
    scaling all weights scales the ranks, so rank correlations are scale-invariant.
    """
    n = int(values.shape[0])
    sv = xp.take(values, order)
    sw = xp.ones((n,), dtype=values.dtype) if weights is None else xp.take(weights, order)
    starts, block_id = tie_blocks(xp, sv)
    cum = xp.cumulative_sum(sw)
    cum0 = xp.concat([xp.zeros((1,), dtype=cum.dtype), cum])
    ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype)])
    block_before = xp.take(cum0, starts)
    block_mass = xp.take(cum0, ends) - block_before
    rank_sorted = xp.take(block_before + 0.5 * block_mass, block_id)
    return scatter(xp, order, rank_sorted)


def weighted_pearson(xp: Namespace, a: Array, b: Array, weights: Array | None) -> float | None:
    """Weighted Pearson correlation; ``None`` when either variable is constant (over the rows of
    positive weight), where the correlation is undefined."""
    if _is_constant(xp, a, weights) or _is_constant(xp, b, weights):
        return None
    if weights is None:
        am = a - xp.mean(a)
        bm = b - xp.mean(b)
        saa = float(xp.sum(am * am))
        sbb = float(xp.sum(bm * bm))
        sab = float(xp.sum(am * bm))
    else:
        tw = xp.sum(weights)
        am = a - xp.sum(weights * a) / tw
        bm = b - xp.sum(weights * b) / tw
        saa = float(xp.sum(weights * am * am))
        sbb = float(xp.sum(weights * bm * bm))
        sab = float(xp.sum(weights * am * bm))
    if saa <= 0.0 or sbb <= 0.0:
        return None
    r = sab / (saa**0.5 * sbb**0.5)
    return float(max(-1.0, min(1.0, r)))


def _is_constant(xp: Namespace, x: Array, weights: Array | None) -> bool:
    if weights is not None:
        x = x[weights > 0]
    return bool(xp.max(x) == xp.min(x))
