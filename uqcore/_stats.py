"""Weighted order statistics shared by several metric families.

Weights are *frequency* weights throughout: an integer weight k gives exactly the result of k
copies of the row, and a zero weight exactly drops it. Everything here works on sorted data so
that callers can sort once and reuse the order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, cast

import array_api_compat
import numpy as np

from uqcore._backend import Array, Namespace, clip, scatter, select, value_sort
from uqcore._compiled import kernels
from uqcore._scaling import exponent, rescaled

if TYPE_CHECKING:
    from uqcore.batch import Batch

__all__ = [
    "CHUNK_ROWS",
    "QuantileMethod",
    "chunks",
    "interpolate",
    "select_quantile",
    "sorted_midranks",
    "sorted_values",
    "sorted_weights",
    "sum_of_products",
    "tie_blocks",
    "tie_runs",
    "tie_starts",
    "unit_quantile_positions",
    "weighted_midranks",
    "weighted_pearson",
    "weighted_quantile",
]

QuantileMethod = Literal["linear", "inverted_cdf"]

#: Rows per chunk of the per-row passes that :func:`chunks` splits (numpy): the temporaries of
#: a chunk (512 KiB each in float64) stay in the CPU cache and no N-sized temporary is made.
CHUNK_ROWS = 1 << 16


def chunks(xp: Namespace, n: int) -> Iterator[slice]:
    """Consecutive row slices covering 0..n: of :data:`CHUNK_ROWS` rows with numpy, one slice
    of all rows with other namespaces (a GPU prefers one large kernel to many small ones)."""
    step = CHUNK_ROWS if array_api_compat.is_numpy_namespace(xp) else max(n, 1)
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


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

    >>> import numpy as np
    >>> weighted_quantile(np, np.array([1.0, 2.0, 4.0]), None, 0.75)
    3.0
    >>> weighted_quantile(np, np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 2.0]), 0.5)
    3.0
    """
    n = int(sorted_values.shape[0])
    if sorted_weights is None:
        lo, hi, frac = unit_quantile_positions(n, q, method)
        a = float(sorted_values[lo])
        b = a if frac is None else float(sorted_values[hi])
        return interpolate(a, b, frac)
    cum = xp.cumulative_sum(sorted_weights)
    total = float(cum[-1])
    if method == "inverted_cdf":
        target = q * total
        if q == 0:
            return float(sorted_values[int(xp.nonzero(sorted_weights > 0)[0][0])])
        k = int(xp.searchsorted(cum, xp.asarray(target, dtype=cum.dtype), side="left"))
        return float(sorted_values[min(k, n - 1)])
    if method != "linear":
        raise ValueError(f"unknown quantile method {method!r}")
    h = q * (total - 1.0)
    if h <= 0:
        return float(sorted_values[int(xp.nonzero(sorted_weights > 0)[0][0])])
    lo_t = float(int(h))
    frac = h - lo_t
    # unit position t lies in row k with C_{k-1} <= t < C_k  ->  first k with C_k > t
    ts = xp.asarray([lo_t, min(lo_t + 1.0, total - 1.0)], dtype=cum.dtype)
    ks = xp.searchsorted(cum, ts, side="right")
    ks = clip(xp, ks, max=n - 1)
    a = float(sorted_values[int(ks[0])])
    b = float(sorted_values[int(ks[1])])
    return a + frac * (b - a)


def unit_quantile_positions(
    n: int, q: float, method: QuantileMethod = "linear"
) -> tuple[int, int, float | None]:
    """Where the unit-weight quantile of N values lies: 0-based sorted positions (lo, hi) and
    the interpolation fraction (``None``: the value at ``lo`` itself). See :func:`interpolate`."""
    if method == "inverted_cdf":
        k = min(max(int(-(-(q * float(n)) // 1)) - 1, 0), n - 1)  # ceil(q·N) − 1
        return k, k, None
    if method != "linear":
        raise ValueError(f"unknown quantile method {method!r}")
    h = q * (float(n) - 1.0)
    if h <= 0:
        return 0, 0, None
    lo = int(h)
    return lo, min(lo + 1, n - 1), h - float(lo)


def interpolate(a: float, b: float, frac: float | None) -> float:
    """The quantile from its order statistics: ``a`` if ``frac`` is None, else a + frac·(b − a)."""
    return a if frac is None else a + frac * (b - a)


def select_quantile(xp: Namespace, values: Array, q: float, method: QuantileMethod) -> float:
    """Unit-weight quantile of *unsorted* values in O(N) (a partial sort, no argsort); equal to
    ``weighted_quantile(xp, sort(values), None, q, method)``.

    >>> import numpy as np
    >>> select_quantile(np, np.array([4.0, 1.0, 2.0]), 0.75, "linear")
    3.0
    """
    lo, hi, frac = unit_quantile_positions(int(values.shape[0]), q, method)
    if frac is None:
        return select(xp, values, [lo])[0]
    a, b = select(xp, values, [lo, hi])
    return interpolate(a, b, frac)


def sorted_values(
    batch: Batch, name: str, values: Callable[[], Array], *, owned: bool = False
) -> Array:
    """``values()`` sorted ascending (a value sort, no argsort), cached in ``batch`` under
    ``"stats:sorted:<name>"``. Equals ``take(values, order)`` for every ascending argsort, so
    it pairs with :func:`sorted_weights` of the same ``name``. The radix sort where it applies
    and is the faster value sort on this CPU (:func:`~uqcore._backend.value_sort`); otherwise,
    with ``owned=True`` (``values()`` returns a new array nothing else holds), numpy sorts in
    place (no copy)."""
    xp = batch.xp

    def compute() -> Array:
        v = values()
        got = value_sort(xp, v)
        if got is not None:
            return got
        if owned and array_api_compat.is_numpy_namespace(xp):
            v.sort()
            return v
        return xp.sort(v, stable=False)

    return batch.shared(f"stats:sorted:{name}", compute)


def sorted_weights(batch: Batch, name: str, values: Callable[[], Array]) -> Array | None:
    """The sample weights in the ascending order of ``values()`` (``batch.order(name)``), or
    ``None`` for unit weights; cached per weights."""
    w = batch.weights
    if w is None:
        return None
    xp = batch.xp
    return batch.weighted(
        f"stats:sorted_weights:{name}", lambda: xp.take(w, batch.order(name, values))
    )


def tie_blocks(xp: Namespace, sorted_values: Array) -> tuple[Array, Array]:
    """Start index of each run of equal values in a sorted array, and each row's run id."""
    n = int(sorted_values.shape[0])
    new = xp.ones((n,), dtype=xp.bool)
    if n > 1:
        new = xp.concat([xp.ones((1,), dtype=xp.bool), sorted_values[1:] != sorted_values[:-1]])
    starts = xp.nonzero(new)[0]
    if array_api_compat.is_numpy_namespace(xp):
        # the running count in int64 directly (no int64 copy of the flags first)
        block_id = np.cumsum(new, dtype=np.int64)
        block_id -= 1
    else:
        block_id = xp.cumulative_sum(xp.astype(new, xp.int64)) - 1
    return starts, block_id


def tie_runs(xp: Namespace, sorted_values: Array) -> tuple[Array, Array] | None:
    """:func:`tie_blocks` of a sorted array, or ``None`` when all values differ (one pass)."""
    if int(sorted_values.shape[0]) < 2 or bool(xp.all(sorted_values[1:] != sorted_values[:-1])):
        return None
    return tie_blocks(xp, sorted_values)


def tie_starts(xp: Namespace, sorted_values: Array) -> Array | None:
    """The start index of each run of equal values in a sorted array (the first array of
    :func:`tie_blocks`, without the N-long run ids; int32 below 2^31 rows), or ``None`` when
    all values differ."""
    n = int(sorted_values.shape[0])
    if n < 2:
        return None
    if array_api_compat.is_numpy_namespace(xp):
        new = np.empty(n, dtype=bool)  # one flag per row, no concatenated copy
        new[0] = True
        np.not_equal(sorted_values[1:], sorted_values[:-1], out=new[1:])
    else:
        new = xp.concat([xp.ones((1,), dtype=xp.bool), sorted_values[1:] != sorted_values[:-1]])
    if bool(xp.all(new)):
        return None
    if not array_api_compat.is_numpy_namespace(xp) or n >= (1 << 31) - 1:
        return xp.nonzero(new)[0]
    # int32 where every index fits (the same indices in half the memory), found chunk by
    # chunk (no int64 list of them all first)
    out = np.empty(int(np.count_nonzero(new)), dtype=np.int32)
    filled = 0
    for rows in chunks(xp, n):
        idx = np.flatnonzero(new[rows])
        idx += rows.start
        out[filled : filled + idx.size] = idx
        filled += idx.size
    return out


def run_values(xp: Namespace, per_run: Array, starts: Array, lo: int, hi: int) -> Array:
    """Rows lo..hi−1 of the per-row array that repeats ``per_run[b]`` over run b (the runs
    starting at ``starts``, the last ending at the array's end, at or after ``hi``)."""
    first = int(xp.searchsorted(starts, xp.asarray(lo, dtype=starts.dtype), side="right")) - 1
    last = int(xp.searchsorted(starts, xp.asarray(hi - 1, dtype=starts.dtype), side="right"))
    if array_api_compat.is_numpy_namespace(xp):
        edges = np.empty(last - first + 1, dtype=np.int64)
        edges[:-1] = starts[first:last]
        edges[0] = lo
        edges[-1] = hi
        return np.repeat(per_run[first:last], np.diff(edges))
    rows = xp.arange(lo, hi, dtype=starts.dtype)
    return xp.take(per_run, xp.searchsorted(starts, rows, side="right") - 1)


def sorted_midranks(
    xp: Namespace, n: int, ties: tuple[Array, Array] | None, sorted_weights: Array | None
) -> Array:
    """The midranks of :func:`weighted_midranks` in sorted order (position k of the sorted data).

    ``ties`` is :func:`tie_runs` of the sorted values and ``sorted_weights`` the weights in that
    order (``None``: unit weights). Without ties and weights the ranks are k + 1/2.
    """
    if ties is None and sorted_weights is None:
        r = xp.arange(n, dtype=xp.float64)
        r += 0.5
        return r
    sw = xp.ones((n,), dtype=xp.float64) if sorted_weights is None else sorted_weights
    cum = xp.cumulative_sum(sw)
    cum0 = xp.concat([xp.zeros((1,), dtype=cum.dtype), cum])
    if ties is None:  # every row is its own block
        return cum0[:-1] + 0.5 * (cum0[1:] - cum0[:-1])
    starts, block_id = ties
    ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype)])
    block_before = xp.take(cum0, starts)
    block_mass = xp.take(cum0, ends) - block_before
    return xp.take(block_before + 0.5 * block_mass, block_id)


def weighted_midranks(xp: Namespace, values: Array, weights: Array | None, order: Array) -> Array:
    """Average ranks with ties, in units of weight: r_i = C_before(i) + m_block(i)/2.

    ``order`` is an ascending argsort of ``values`` (ties in any order). C_before is the total
    weight of strictly smaller values and m_block the total weight of values equal to v_i. With
    unit weights this is scipy's average rank minus 1/2 (a constant shift, which leaves
    correlations unchanged); with integer weights it is the average rank of the repeated rows
    minus 1/2; and scaling all weights scales the ranks, so rank correlations are
    scale-invariant.

    >>> import numpy as np
    >>> v = np.array([3.0, 1.0, 3.0, 2.0])
    >>> [float(r) for r in weighted_midranks(np, v, None, np.argsort(v))]
    [3.0, 0.5, 3.0, 1.5]
    """
    n = int(values.shape[0])
    sv = xp.take(values, order)
    sw = None if weights is None else xp.take(weights, order)
    return scatter(xp, order, sorted_midranks(xp, n, tie_runs(xp, sv), sw))


def weighted_pearson(xp: Namespace, a: Array, b: Array, weights: Array | None) -> float | None:
    """Weighted Pearson correlation; ``None`` when either variable is constant (over the rows of
    positive weight), where the correlation is undefined.

    The correlation does not change when a, b or the weights are multiplied by a positive
    constant, so each is first divided by a power of two (exactly) when its magnitudes could
    overflow or underflow the squares and products (:mod:`uqcore._scaling`); then weights of
    any scale and values of any magnitude give the same correlation.

    >>> import numpy as np
    >>> round(weighted_pearson(np, np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]), None), 12)
    0.5
    """
    if weights is None:
        got = _compiled_pearson(a, b)
        if got is not _NOT_COMPILED:
            return cast("float | None", got)
    if weights is not None:
        # rows of zero weight are dropped (exactly what a zero weight means), so that neither
        # the constancy check nor the products (0·x) see them
        keep = weights > 0
        if not bool(xp.all(keep)):
            a, b, weights = a[keep], b[keep], weights[keep]
        weights = rescaled(weights, exponent(float(xp.max(weights))))
    lo_a, hi_a = float(xp.min(a)), float(xp.max(a))
    lo_b, hi_b = float(xp.min(b)), float(xp.max(b))
    if lo_a == hi_a or lo_b == hi_b:
        return None
    a = rescaled(a, exponent(-lo_a, hi_a))
    b = rescaled(b, exponent(-lo_b, hi_b))
    # centred sums of products, chunk by chunk (no N-sized temporary)
    n = int(a.shape[0])
    if weights is None:
        ma, mb = xp.mean(a), xp.mean(b)
    else:
        tw = xp.sum(weights)
        ma = sum_of_products(xp, weights, a) / tw
        mb = sum_of_products(xp, weights, b) / tw
    sab = saa = sbb = 0.0
    for rows in chunks(xp, n):
        am = a[rows] - ma
        bm = b[rows] - mb
        if weights is None:
            sab += sum_of_products(xp, am, bm)
            saa += sum_of_products(xp, am, am)
            sbb += sum_of_products(xp, bm, bm)
        else:
            w = weights[rows]
            sab += sum_of_products(xp, w, am, bm)
            saa += sum_of_products(xp, w, am, am)
            sbb += sum_of_products(xp, w, bm, bm)
    if saa <= 0.0 or sbb <= 0.0:
        return None
    r = sab / (saa**0.5 * sbb**0.5)
    return float(max(-1.0, min(1.0, r)))


_NOT_COMPILED = object()


def _factors(e: int) -> tuple[float, float]:
    """The two factors whose product :func:`~uqcore._scaling.rescaled` multiplies by."""
    if e == 0:
        return 1.0, 1.0
    if abs(e) <= 1000:
        return math.ldexp(1.0, -e), 1.0
    half = -e // 2
    return math.ldexp(1.0, half), math.ldexp(1.0, -e - half)


def _compiled_pearson(a: Array, b: Array) -> Any:
    """The unweighted :func:`weighted_pearson` of two 1-D float64 numpy arrays (contiguous,
    N >= 2) by the compiled kernels: one pass for the ranges, two for the centred sums (the
    same rescaling, the means and sums in blocks); ``_NOT_COMPILED`` for other arrays or
    without the kernels."""
    if not (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and a.dtype == np.float64
        and b.dtype == np.float64
        and a.ndim == 1
        and a.shape == b.shape
        and a.shape[0] >= 2
        and a.flags.c_contiguous
        and b.flags.c_contiguous
    ):
        return _NOT_COMPILED
    jit = kernels()
    if jit is None:
        return _NOT_COMPILED
    lo_a, hi_a, lo_b, hi_b = jit.min_max_pair(a, b)
    if lo_a == hi_a or lo_b == hi_b:
        return None
    fa, fa2 = _factors(exponent(-lo_a, hi_a))
    fb, fb2 = _factors(exponent(-lo_b, hi_b))
    sab, saa, sbb = jit.pearson_sums(a, b, fa, fa2, fb, fb2)
    if saa <= 0.0 or sbb <= 0.0:
        return None
    r = sab / (saa**0.5 * sbb**0.5)
    return float(max(-1.0, min(1.0, r)))


def sum_of_products(xp: Namespace, *arrays: Array) -> float:
    """Σ_i Π_k arrays[k][i] of equal-length 1-D arrays (2 or 3 of them).

    With numpy one ``einsum`` pass over the operands, any strides, no N-sized temporary;
    other namespaces multiply and sum.
    """
    if array_api_compat.is_numpy_namespace(xp):
        spec = ",".join("i" * len(arrays)) + "->"
        return float(np.einsum(spec, *arrays))
    prod = arrays[0] * arrays[1]
    for a in arrays[2:]:
        prod = prod * a
    return float(xp.sum(prod))
