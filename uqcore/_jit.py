"""Compiled kernels (numba) for the sequential algorithms that no numpy expression runs in
O(N log N) or in one pass: the isotonic α-quantile fit of CORP, a weighted lower quantile,
the fit's three pinball sums, the three parts of the weighted interval score, the order
statistics of n-MeRCI's ratios without an array of them, the sum of AUSE's prefix means, and
the tabulated location-scale scores (check and interval scores) row by row, and the sums of
the bootstrap's rank block paths (Spearman's ρ, AUSE, AURG) in one pass along each order, and
the unit-weight isotonic (PAV) fit of CORP in bounded memory, and a radix sort of float64
values that yields their ascending order along with them, and the random groups of adversarial
group calibration (numpy's multivariate hypergeometric sampler, drawn from the caller's
generator, and each group's calibration error), and the per-threshold sums of the Murphy
diagram's elementary scores, and the box moments of HSIC's kernel sum (also a block of
resamples at a time, with each resample's statistics of the rows it keeps).

Imported only through :func:`uqcore._compiled.kernels`, which compiles them on first use (or
loads them from numba's cache) and falls back to the numpy algorithms when numba is missing or
cannot compile; both paths are tested against the same brute-force references.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit
from numba.np.random import generator_core as _bit_generator

__all__ = [
    "box_moments",
    "chunk_counts",
    "climatology_sums",
    "corp_mean_sums",
    "elementary_score_bins",
    "fill_log_factorials",
    "group_errors",
    "kept_ends",
    "lower_quantile",
    "pav_unit",
    "pinball_sums",
    "prefix_mean_sum",
    "quantile_isotonic",
    "radix_sort",
    "rank_sums",
    "ratio_order_stats",
    "scaled_table",
    "strata_worst_coverage",
    "weighted_box_moments",
    "weighted_spread",
    "wis_rows",
]

NDArray = np.ndarray[Any, Any]

#: The next raw draws of a numpy bit generator inside a kernel (numba's bindings to its
#: functions, the ones numpy's own samplers call).
next_double: Callable[[Any], float] = _bit_generator.next_double
next_uint32: Callable[[Any], Any] = _bit_generator.next_uint32
next_uint64: Callable[[Any], Any] = _bit_generator.next_uint64


@njit(cache=True, nogil=True)
def quantile_isotonic(ys: NDArray, ws: NDArray, starts: NDArray, level: float) -> NDArray:
    """The smallest non-decreasing α-quantile fit, one value per group (rows sorted by x; the
    groups, tied forecasts, start at ``starts``; weights ``ws`` > 0; α = ``level``).

    Dynamic programming over the groups with the slope trick (Rote 2019, "Isotonic regression
    by dynamic programming", SOSA; the convex piecewise-linear value function kept as its
    breakpoints): F_g(z) = Σ_{i∈g} w_i ρ_α(y_i − z) + min_{z' ≤ z} F_{g−1}(z'). The function
    min_{z' ≤ z} F_g(z') is non-increasing and convex; its breakpoints are outcomes, held in a
    max-heap with the slope change at each (their weights). Adding group g puts its outcomes
    in the heap (slope −α w left of y_i, (1 − α) w right of it), so the slope at +∞ becomes
    (1 − α) W_g; clipping the positive slopes removes (1 − α) W_g of weight from the top. The
    heap's top is then a_g, the smallest minimiser of F_g, and the smallest isotonic
    minimiser is z_G = a_G, z_g = min(z_{g+1}, a_g) (each step the smallest optimal value
    below the next one's). Each outcome enters and leaves the heap once: O(N log N)."""
    n = ys.shape[0]
    m = starts.shape[0]
    hv = np.empty(n)  # the heap's values (outcomes) and their remaining weights
    hw = np.empty(n)
    size = 0
    top = np.empty(m)
    up = 1.0 - level
    for g in range(m):
        a = starts[g]
        b = starts[g + 1] if g + 1 < m else n
        tot = 0.0
        for i in range(a, b):
            v = ys[i]
            w = ws[i]
            tot += w
            j = size
            size += 1
            while j > 0:
                p = (j - 1) >> 1
                if hv[p] >= v:
                    break
                hv[j] = hv[p]
                hw[j] = hw[p]
                j = p
            hv[j] = v
            hw[j] = w
        need = up * tot
        while True:
            w0 = hw[0]
            if w0 > need:
                hw[0] = w0 - need
                break
            if size == 1:  # only by rounding (α·W ≈ 0): the last outcome stays
                hw[0] = 0.0
                break
            need -= w0
            size -= 1
            v = hv[size]
            w = hw[size]
            j = 0
            while True:
                c = 2 * j + 1
                if c >= size:
                    break
                if c + 1 < size and hv[c + 1] > hv[c]:
                    c += 1
                if hv[c] <= v:
                    break
                hv[j] = hv[c]
                hw[j] = hw[c]
                j = c
            hv[j] = v
            hw[j] = w
            if need <= 0.0:
                break
        top[g] = hv[0]
    for g in range(m - 2, -1, -1):
        if top[g] > top[g + 1]:
            top[g] = top[g + 1]
    return top


@njit(cache=True, nogil=True)
def lower_quantile(y: NDArray, w: NDArray, level: float) -> float:
    """The weighted lower α-quantile (inverted CDF): the smallest y_j with
    Σ_{y_i ≤ y_j} w_i ≥ α Σ w_i (weights > 0), by selection (Hoare's quickselect with a
    three-way partition, median-of-three pivots): O(N) expected."""
    v = y.copy()
    u = w.copy()
    need = level * np.sum(u)
    lo = 0
    hi = v.shape[0]
    while True:
        if hi - lo == 1:
            return float(v[lo])
        a, b, c = v[lo], v[(lo + hi) >> 1], v[hi - 1]
        pivot = max(min(a, b), min(max(a, b), c))
        # three-way partition of [lo, hi): < pivot, == pivot, > pivot
        lt = lo
        i = lo
        gt = hi
        below = 0.0
        equal = 0.0
        while i < gt:
            x = v[i]
            if x < pivot:
                below += u[i]
                v[i], v[lt] = v[lt], x
                u[i], u[lt] = u[lt], u[i]
                lt += 1
                i += 1
            elif x > pivot:
                gt -= 1
                v[i], v[gt] = v[gt], x
                u[i], u[gt] = u[gt], u[i]
            else:
                equal += u[i]
                i += 1
        if below >= need and lt > lo:
            hi = lt
        elif below + equal >= need or gt == hi:
            return float(pivot)
        else:
            need -= below + equal
            lo = gt


@njit(cache=True, nogil=True)
def pinball_sums(
    ys: NDArray,
    ws: NDArray,
    xs: NDArray,
    starts: NDArray,
    fitted: NDArray,
    ref: float,
    level: float,
) -> tuple[float, float, float]:
    """(Σ w ρ_α(y − x), Σ w ρ_α(y − x̂), Σ w ρ_α(y − r)) in one pass, ρ_α(y − x) =
    (1{y < x} − α)(x − y); x̂ is ``fitted[g]`` on group g (starting at ``starts[g]``). Each
    sum is compensated (Neumaier), as accurate as numpy's pairwise sums or more."""
    n = ys.shape[0]
    m = starts.shape[0]
    out = np.zeros(3)
    comp = np.zeros(3)
    lo = 1.0 - level
    for g in range(m):
        f = fitted[g]
        b = starts[g + 1] if g + 1 < m else n
        for i in range(starts[g], b):
            y = ys[i]
            w = ws[i]
            for k in range(3):
                x = xs[i] if k == 0 else (f if k == 1 else ref)
                t = w * ((lo if y < x else -level) * (x - y))
                s = out[k] + t
                if abs(out[k]) >= abs(t):
                    comp[k] += (out[k] - s) + t
                else:
                    comp[k] += (t - s) + out[k]
                out[k] = s
    return out[0] + comp[0], out[1] + comp[1], out[2] + comp[2]


@njit(cache=True, nogil=True)
def wis_rows(
    q: NDArray,
    y: NDArray,
    median: int,
    cols: NDArray,
    c_disp: NDArray,
    c_over: NDArray,
    c_under: NDArray,
    out_disp: NDArray,
    out_over: NDArray,
    out_under: NDArray,
) -> None:
    """The per-row parts of the weighted interval score in one pass over the quantiles ``q``
    (rows × columns, of which ``cols`` are used, coefficients given per used column): with
    D_j = q_j − y and m = q[median], dispersion Σ c_disp_j (q_j − m), overprediction
    Σ c_over_j max(D_j, 0), underprediction Σ c_under_j min(D_j, 0) (the numpy path's three
    products, row by row; sums in float64)."""
    n = q.shape[0]
    k = cols.shape[0]
    for i in range(n):
        yi = y[i]
        m = q[i, median]
        d = 0.0
        o = 0.0
        u = 0.0
        for t in range(k):
            v = q[i, cols[t]]
            d += c_disp[t] * (v - m)
            e = v - yi
            o += c_over[t] * max(e, 0.0)
            u += c_under[t] * min(e, 0.0)
        out_disp[i] = d
        out_over[i] = o
        out_under[i] = u


#: The ratios' buckets in :func:`ratio_order_stats`: the top 16 bits of a non-negative float64
#: (its exponent and 5 leading mantissa bits), an order of the bit patterns that agrees with
#: the order of the values (+0.0 is bucket 0, +inf lies above every finite value).
_BUCKET_SHIFT = 47
_N_BUCKETS = 1 << 16
_CHUNK = 1024


@njit(cache=True, nogil=True, inline="always")
def _ratio(e: float, s: float) -> float:
    """|e|/σ with 0/0 := 0 and e/0 := +inf (the n-MeRCI ratio); +0.0 for a zero ratio."""
    if s > 0.0:
        return e / s + 0.0
    return 0.0 if e == 0.0 else np.inf


@njit(cache=True, nogil=True)
def ratio_order_stats(e: NDArray, s: NDArray, lo: int, hi: int) -> tuple[float, float, float]:
    """(r_(lo), r_(hi), the largest finite r) of the ratios r_i = e_i/σ_i (:func:`_ratio`),
    r_(k) the k-th smallest (0-based, lo ≤ hi ≤ lo + 1), without an N-array of them: one pass
    counts the ratios per bucket of the leading bits of their float64 patterns (a radix
    select), a second collects the bucket holding r_(lo) (and the smallest ratio of the next
    non-empty bucket, r_(hi) when it lies beyond) and sorts only those. The values equal those
    of a sort of the ratios exactly."""
    n = e.shape[0]
    counts = np.zeros(_N_BUCKETS, dtype=np.int64)
    r = np.empty(_CHUNK)
    bits = r.view(np.uint64)
    top = 0.0
    for a in range(0, n, _CHUNK):
        m = min(_CHUNK, n - a)
        for i in range(m):
            v = _ratio(e[a + i], s[a + i])
            r[i] = v
            if v > top and v != np.inf:
                top = v
        for i in range(m):
            counts[bits[i] >> _BUCKET_SHIFT] += 1
    below = 0
    b_lo = 0
    while below + counts[b_lo] <= lo:
        below += counts[b_lo]
        b_lo += 1
    k = lo - below  # the rank of r_(lo) in its bucket
    in_bucket = counts[b_lo]
    b_next = b_lo + 1
    if hi - below >= in_bucket:  # r_(hi) is the smallest ratio of the next non-empty bucket
        while counts[b_next] == 0:
            b_next += 1
    buf = np.empty(in_bucket)
    filled = 0
    nxt = np.inf
    for a in range(0, n, _CHUNK):
        m = min(_CHUNK, n - a)
        for i in range(m):
            r[i] = _ratio(e[a + i], s[a + i])
        for i in range(m):
            b = bits[i] >> _BUCKET_SHIFT
            if b == b_lo:
                buf[filled] = r[i]
                filled += 1
            elif b == b_next and r[i] < nxt:
                nxt = r[i]
    buf.sort()
    first = buf[k]
    if hi == lo:
        return first, first, top
    return first, (buf[k + 1] if k + 1 < in_bucket else nxt), top


@njit(cache=True, nogil=True)
def prefix_mean_sum(err: NDArray) -> tuple[float, float]:
    """(Σ_{j=1..N} (Σ_{i<j} err_i)/j, Σ err_i): the running sum in one pass, its quotients
    summed compensated (Neumaier)."""
    cum = 0.0
    total = 0.0
    comp = 0.0
    for j in range(err.shape[0]):
        cum += err[j]
        t = cum / (j + 1)
        s = total + t
        if abs(total) >= abs(t):
            comp += (total - s) + t
        else:
            comp += (t - s) + total
        total = s
    return total + comp, cum


@njit(cache=True, nogil=True)
def count_between(y: NDArray, loc: NDArray, scale: NDArray, zl: NDArray, zu: NDArray) -> NDArray:
    """#{i : zl_j <= z_i <= zu_j} for each j, z_i = (y_i − loc_i)/scale_i, in one pass."""
    m = zl.shape[0]
    out = np.zeros(m, dtype=np.int64)
    for i in range(y.shape[0]):
        z = (y[i] - loc[i]) / scale[i]
        for j in range(m):  # no branch: the comparisons' outcomes are random
            out[j] += (z >= zl[j]) & (z <= zu[j])
    return out


@njit(cache=True, nogil=True)
def ks_distance(s: NDArray, total: float) -> float:
    """max(0, max_i (s_i − i/T), max_i ((i + 1)/T − s_i)) over the sorted values ``s``
    (0-based i, T = ``total``): the KS distance of unit weights, the same operations as
    numpy's blocks of :func:`uqcore.regression.calibration.pit`, in one pass."""
    d = 0.0
    for i in range(s.shape[0]):
        below = s[i] - i / total
        above = (i + 1) / total - s[i]
        if below > d:
            d = below
        if above > d:
            d = above
    return d


@njit(cache=True, nogil=True)
def min_max_pair(a: NDArray, b: NDArray) -> tuple[float, float, float, float]:
    """(min a, max a, min b, max b) of two arrays of N >= 1 finite values, in one pass."""
    lo_a = hi_a = a[0]
    lo_b = hi_b = b[0]
    for i in range(1, a.shape[0]):
        x, y = a[i], b[i]
        lo_a, hi_a = min(lo_a, x), max(hi_a, x)
        lo_b, hi_b = min(lo_b, y), max(hi_b, y)
    return lo_a, hi_a, lo_b, hi_b


@njit(cache=True, nogil=True)
def pearson_sums(
    a: NDArray, b: NDArray, fa: float, fa2: float, fb: float, fb2: float
) -> tuple[float, float, float]:
    """(Σ (a'_i − ā')(b'_i − b̄'), Σ (a'_i − ā')², Σ (b'_i − b̄')²) of a' = (a·fa)·fa2 and
    b' = (b·fb)·fb2 (powers of two: exact), the means first (two passes). Sums of blocks of
    :data:`_SUM_BLOCK` rows, then of the blocks (error ~ (256 + N/256)·ε); N >= 1."""
    n = a.shape[0]
    ma = mb = 0.0
    for start in range(0, n, _SUM_BLOCK):
        pa = pb = 0.0
        for i in range(start, min(n, start + _SUM_BLOCK)):
            pa += (a[i] * fa) * fa2
            pb += (b[i] * fb) * fb2
        ma += pa
        mb += pb
    ma /= n
    mb /= n
    sab = saa = sbb = 0.0
    for start in range(0, n, _SUM_BLOCK):
        pab = paa = pbb = 0.0
        for i in range(start, min(n, start + _SUM_BLOCK)):
            da = (a[i] * fa) * fa2 - ma
            db = (b[i] * fb) * fb2 - mb
            pab += da * db
            paa += da * da
            pbb += db * db
        sab += pab
        saa += paa
        sbb += pbb
    return sab, saa, sbb


@njit(cache=True, nogil=True)
def scaled_table(
    y: NDArray,
    loc: NDArray,
    scale: NDArray,
    lo: float,
    inv_width: float,
    top: float,
    base: NDArray,
    nxt: NDArray,
    slope: NDArray,
    intercept: NDArray,
) -> NDArray:
    """scale_i · g(z_i), z_i = (y_i − loc_i)/scale_i, for the piecewise-linear g of a tabulated
    location-scale score (``uqcore.regression.scoring._Table``: the cell of z on a uniform
    grid, the segment k = base[cell] + (z > nxt[base[cell]]), g = slope[k]·z + intercept[k]),
    in one pass: the same operations as the numpy path, row by row, with no temporaries."""
    n = y.shape[0]
    out = np.empty(n)
    for i in range(n):
        s = scale[i]
        z = (y[i] - loc[i]) / s
        c = min(max((z - lo) * inv_width, 0.0), top)
        k = base[int(c)]
        if z > nxt[k]:
            k += 1
        out[i] = s * (slope[k] * z + intercept[k])
    return out


#: Terms summed plainly before each partial sum is added to the total in :func:`rank_sums`
#: (a two-level sum: rounding error of order (block + N/block)·ε instead of N·ε, at the
#: speed of a plain loop; a compensated sum made the loop twice as slow). A power of two.
_SUM_BLOCK = 256


@njit(cache=True, nogil=True)
def rank_sums(
    m_u: NDArray,
    r_u: NDArray,
    w: NDArray,
    order_e: NDArray,
    perm: NDArray,
    e_u: NDArray,
    step_e: NDArray,
    h: NDArray,
    g: NDArray,
    ce: NDArray | None = None,
) -> tuple[NDArray, NDArray, NDArray, NDArray, NDArray]:
    """Per resample (row of the b × N integer weights): the sums of the bootstrap's rank block
    paths (``uqcore.stability.blocks.ranks``), two short loops along each order:

    - cross = Σ_k m_k (2R_k − m_k)(2C^e_{π(k)} − m_k) in int64 (Spearman's Σ m du de_u),
    - s1 = Σ_k m_k e_k H_{R_k − m_k} and s2 = Σ_k R_k e_k (H_{R_k} − H_{R_k − m_k}) (the
      sparsification area along the uncertainty),
    - s3 = Σ_j G_{C^e_j} step_j (the oracle's area along |e|),
    - cubes = Σ_k m_k³ in int64 (Spearman's Σ w³),

    with m and R the weights and cumulative weights along the uncertainty (``m_u``, ``r_u``),
    C^e the cumulative weights along |e| (from ``w`` in row order and ``order_e``; below
    2^31), π = ``perm`` the |e| position of each uncertainty position (``order_e`` and
    ``perm`` of any integer type: int32 halves what the passes read), e = ``e_u`` the errors
    along the uncertainty, H and G = k·H_k the harmonic tables. C^e is written into ``ce``
    (b × N int32; a new array when ``None``): the block's cumulative weights along |e|, which
    its weighted quantiles of |e| then search instead of summing windows of them again. Float
    sums are two-level (:data:`_SUM_BLOCK`). Each order's integer sums and float sums are
    separate loops: at N = 10⁶ that took the kernel from 7.5 to 4.0 ms per resample with the
    cache cold (the float sums' dependency chains no longer hold up the scattered reads), with
    the same values bit for bit. (Gathering m and R inside the pass along u, where numpy's
    gather and cumulative sum make them now, was measured slower: the running sum then waits
    on each scattered read.)"""
    b, n = m_u.shape
    cross = np.zeros(b, dtype=np.int64)
    cubes = np.zeros(b, dtype=np.int64)
    s1 = np.zeros(b)
    s2 = np.zeros(b)
    s3 = np.zeros(b)
    if ce is None:
        ce = np.empty((b, n), dtype=np.int32)
    last = _SUM_BLOCK - 1
    for row in range(b):
        c = np.int64(0)
        for j in range(n):
            c += np.int64(w[row, order_e[j]])
            ce[row, j] = c
        total = 0.0
        part = 0.0
        for j in range(n):
            part += g[ce[row, j]] * step_e[j]
            if (j & last) == last:
                total += part
                part = 0.0
        s3[row] = total + part
        x = np.int64(0)
        q = np.int64(0)
        for k in range(n):
            m = np.int64(m_u[row, k])
            r = np.int64(r_u[row, k])
            x += m * (2 * r - m) * (2 * np.int64(ce[row, perm[k]]) - m)
            q += m * m * m
        t1 = 0.0
        t2 = 0.0
        p1 = 0.0
        p2 = 0.0
        for k in range(n):
            m = np.int64(m_u[row, k])
            r = np.int64(r_u[row, k])
            e = e_u[k]
            hp = h[r - m]
            p1 += m * e * hp
            p2 += r * e * (h[r] - hp)
            if (k & last) == last:
                t1 += p1
                t2 += p2
                p1 = 0.0
                p2 = 0.0
        cross[row] = x
        cubes[row] = q
        s1[row] = t1 + p1
        s2[row] = t2 + p2
    return cross, s1, s2, s3, cubes


@njit(cache=True, nogil=True)
def pav_unit(y: NDArray) -> NDArray:
    """The non-decreasing least-squares fit to ``y`` under unit weights (pool adjacent
    violators, Barlow et al. 1972): blocks kept on a stack as (sum, count), a new value merged
    with the blocks before it while their mean exceeds its block's; each block's mean
    sum/count is its fitted value. O(N); memory 20 bytes per row (the stack and the fit), where
    scipy's ``isotonic_regression`` holds a copy, unit weights and block indices besides."""
    n = y.shape[0]
    sums = np.empty(n)
    counts = np.empty(n, dtype=np.int32)
    top = -1
    for i in range(n):
        s = y[i]
        c = 1
        while top >= 0 and sums[top] / counts[top] > s / c:
            s += sums[top]
            c += counts[top]
            top -= 1
        top += 1
        sums[top] = s
        counts[top] = c
    out = np.empty(n)
    pos = 0
    for b in range(top + 1):
        v = sums[b] / counts[b]
        for k in range(counts[b]):
            out[pos + k] = v
        pos += counts[b]
    return out


_SIGN = np.uint64(1 << 63)
_MAGNITUDE = np.uint64((1 << 63) - 1)
_INF_BITS = np.uint64(0x7FF0000000000000)
_NAN_BITS = np.uint64(0x7FF8000000000000)
#: From :data:`WIDE_DIGITS_MIN_ROWS` to this many rows :func:`radix_sort` takes 11-bit digits
#: (six passes over a 64-bit key, 2048 buckets each), elsewhere bytes (eight passes, 256
#: buckets): fewer passes win while the rows are few, the fewer buckets (fewer places written
#: at once) once they are many, and below a few thousand rows the larger histograms cost more
#: than the passes they save. Measured on an AMD EPYC (Zen 2): 11-bit digits took 0.73-0.87 of
#: the byte digits' time from 10^4 to 5·10^5 rows, 1.5 at 10^6 and 1.1 at 10^3.
WIDE_DIGITS_MAX_ROWS = 1 << 19
#: See :data:`WIDE_DIGITS_MAX_ROWS`.
WIDE_DIGITS_MIN_ROWS = 1 << 11
_DIGIT8 = np.uint64(0xFF)
_DIGIT11 = np.uint64(0x7FF)


@njit(cache=True, nogil=True, inline="always")
def _sortable(k: Any) -> Any:
    """The bits of a float64 as an unsigned key in the float order: the sign bit set on
    non-negative values, every bit flipped on negative ones. −0.0 is keyed as +0.0 and NaN (any
    payload, either sign) as the positive quiet NaN, which sorts after +inf: keys are equal
    exactly where numpy's sorts see equal values, so a stable sort by them is numpy's."""
    if (k & _MAGNITUDE) > _INF_BITS:
        k = _NAN_BITS
    elif k == _SIGN:  # −0.0
        k = np.uint64(0)
    if k & _SIGN:
        return ~k
    return k | _SIGN


@njit(cache=True, nogil=True, inline="always")
def _float_bits(k: Any) -> Any:
    """The float64 bits of a key of :func:`_sortable` (its inverse but for −0.0, read as +0.0,
    and NaN payloads)."""
    if k & _SIGN:
        return k ^ _SIGN
    return ~k


@njit(cache=True, nogil=True)
def _radix_pass(
    src: NDArray,
    idx: NDArray,
    dst: NDArray,
    dst_idx: NDArray,
    pos: NDArray,
    shift: Any,
    mask: Any,
    first: bool,
    last: bool,
) -> None:
    """One stable counting pass of :func:`radix_sort` on the digit (k >> ``shift``) & ``mask``
    of each key k: the keys ``src`` (the float bits themselves on the ``first`` pass) go to
    ``dst`` at the running positions ``pos`` of their digit, as float bits on the ``last``
    pass, and their indices (``idx``, or the row on the first pass) to ``dst_idx`` where it
    has N entries."""
    n = src.shape[0]
    with_order = dst_idx.shape[0] == n
    for i in range(n):
        k = _sortable(src[i]) if first else src[i]
        b = (k >> shift) & mask
        j = pos[b]
        pos[b] = j + 1
        dst[j] = _float_bits(k) if last else k
        if with_order:
            dst_idx[j] = i if first else idx[i]


@njit(cache=True, nogil=True)
def radix_sort(
    bits: NDArray, out: NDArray, order: NDArray, keys: NDArray, idx_a: NDArray, idx_b: NDArray
) -> None:
    """Sort the float64 values whose bits are ``bits`` (uint64, any stride; N < 2³¹) ascending
    into ``out`` (uint64, the bits of the sorted values), and, where ``order`` has N entries,
    their ascending order into ``order`` (int64, or int32 for a caller that keeps it so:
    ``out`` = ``bits[order]``).

    ``keys`` (uint64) and, with an order, ``idx_a`` and ``idx_b`` (int32) are the caller's
    temporaries of N entries each (only the pages a pass writes are touched): numpy allocates
    them, and asks the kernel for huge pages for arrays of this size, where an allocation
    inside the compiled function gets 4 KiB pages. The counting passes scatter across 256
    buckets, and with huge pages their writes miss the TLB far less (measured at 10^7 rows:
    250 → 180 ms per argsort).

    Least-significant-digit radix sort (Knuth, TAOCP vol. 3, §5.2.5) on the digits of the
    keys of :func:`_sortable`: 11-bit digits from :data:`WIDE_DIGITS_MIN_ROWS` to
    :data:`WIDE_DIGITS_MAX_ROWS` rows (six of them), bytes otherwise (eight). One pass counts
    every digit's histogram, then each digit that not all keys share is one stable counting
    pass (:func:`_radix_pass`); a digit every key shares (the top digit of data within a binade or two, say) is skipped. Stable, and
    equal keys are equal values: ``order`` is exactly numpy's ``argsort(values,
    kind="stable")``, and ``out`` is ``sort(values)`` (NaN last; −0.0 written as +0.0).

    The keys alternate between ``out`` and one temporary so that the last pass lands in
    ``out`` (8 bytes per row); the indices between two int32 temporaries until the last pass
    writes ``order`` (8 or 4 bytes per row). O(N) for N values, against numpy's O(N log N)
    comparison sorts."""
    n = bits.shape[0]
    with_order = order.shape[0] == n
    if keys.shape[0] < n or (with_order and min(idx_a.shape[0], idx_b.shape[0]) < n):
        raise ValueError("radix_sort: a temporary has fewer than N entries")
    width = 11 if WIDE_DIGITS_MIN_ROWS <= n <= WIDE_DIGITS_MAX_ROWS else 8
    n_digits = (64 + width - 1) // width
    n_buckets = 1 << width
    mask = np.uint64(n_buckets - 1)
    hist = np.zeros((n_digits, n_buckets), dtype=np.int32)  # counts up to N < 2^31
    if width == 11:  # constant digit counts and shifts: the compiler unrolls the digits
        for i in range(n):
            k = _sortable(bits[i])
            for d in range(6):
                hist[d, (k >> np.uint64(11 * d)) & _DIGIT11] += 1
    else:
        for i in range(n):
            k = _sortable(bits[i])
            for d in range(8):
                hist[d, (k >> np.uint64(8 * d)) & _DIGIT8] += 1
    digits = np.empty(n_digits, dtype=np.int64)
    m = 0
    for d in range(n_digits):
        for b in range(n_buckets):
            if hist[d, b] != 0:
                if hist[d, b] != n:  # not a digit every key shares
                    digits[m] = d
                    m += 1
                break
    none = np.empty(0, dtype=np.int32)
    if m == 0:  # every key equal, or N = 0
        for i in range(n):
            out[i] = _float_bits(_sortable(bits[i]))
            if with_order:
                order[i] = i
        return
    tk, ia, ib = keys, idx_a, idx_b
    pos = np.empty(n_buckets, dtype=np.int64)
    into_out = m % 2 == 1  # the keys' first pass writes to out when the count is odd
    for q in range(m):
        d = digits[q]
        total = 0
        for b in range(n_buckets):
            pos[b] = total
            total += hist[d, b]
        dk = out if into_out else tk
        sk = bits if q == 0 else (tk if into_out else out)
        si = none if q == 0 else (ia if q % 2 == 1 else ib)
        shift = np.uint64(width * d)
        if q == m - 1:
            _radix_pass(sk, si, dk, order, pos, shift, mask, q == 0, True)
        else:
            _radix_pass(sk, si, dk, ia if q % 2 == 0 else ib, pos, shift, mask, q == 0, False)
        into_out = not into_out


# -- the random groups of adversarial group calibration ---------------------------------------
#: Stadlober's constants of the ratio-of-uniforms hypergeometric sampler (HRUA), as numpy
#: uses them: 2·sqrt(2/e) and 3 − 2·sqrt(3/e).
_HRUA_D1 = 1.7155277699214135
_HRUA_D2 = 0.8989161620588988
#: log(2π)/2, as numpy's Stirling series writes it.
_HALF_LOG_2PI = 0.9189385332046728


@njit(cache=True, nogil=True, error_model="numpy")
def _stirling_log_factorial(k: Any) -> Any:
    """log(k!) by the Stirling series truncated after the 1/k³ term, in numpy's order of
    operations (its ``logfactorial`` for k ≥ 126)."""
    return (
        (k + 0.5) * np.log(k) - k + (_HALF_LOG_2PI + (1.0 / k) * (1 / 12.0 - 1 / (360.0 * k * k)))
    )


@njit(cache=True, nogil=True, error_model="numpy")
def fill_log_factorials(table: NDArray, start: int) -> None:
    """``table[k]`` = :func:`_stirling_log_factorial` (k) for k from ``start`` (≥ 1) on."""
    for k in range(start, table.shape[0]):
        table[k] = _stirling_log_factorial(k)


@njit(cache=True, nogil=True, error_model="numpy")
def _log_factorial(k: Any, table: NDArray) -> Any:
    """log(k!) from ``table`` (numpy's values), by the series past its end."""
    if k < table.shape[0]:
        return table[k]
    return _stirling_log_factorial(k)


@njit(cache=True, nogil=True, error_model="numpy")
def _bounded(bitgen: Any, high: Any) -> Any:
    """A uniform integer in [0, ``high``] (uint64), drawn as numpy's ``random_interval``: the
    bits of one 32-bit (or, past 2³² − 1, 64-bit) draw under the smallest all-ones mask ≥
    ``high``, drawn again while above it."""
    if high == 0:
        return np.uint64(0)
    mask = high
    for s in (1, 2, 4, 8, 16, 32):
        mask |= mask >> np.uint64(s)
    if high <= np.uint64(0xFFFFFFFF):
        v = np.uint64(next_uint32(bitgen)) & mask
        while v > high:
            v = np.uint64(next_uint32(bitgen)) & mask
        return v
    v = next_uint64(bitgen) & mask
    while v > high:
        v = next_uint64(bitgen) & mask
    return v


@njit(cache=True, nogil=True, error_model="numpy")
def _hypergeometric_by_draws(bitgen: Any, good: Any, bad: Any, sample: Any) -> Any:
    """The good ones among ``sample`` of ``good`` + ``bad`` items drawn one by one without
    replacement (numpy's sampler below 10 draws, or within 10 of all items): the smaller of
    the sample and its complement is drawn, stopping once only good or no good items are
    left."""
    total = good + bad
    complement = sample > total // 2
    left = total - sample if complement else sample
    remaining, good_left = total, good
    while left > 0 and good_left > 0 and remaining > good_left:
        remaining -= 1
        if np.int64(_bounded(bitgen, np.uint64(remaining))) < good_left:
            good_left -= 1
        left -= 1
    if remaining == good_left:
        good_left -= left
    return good_left if complement else good - good_left


@njit(cache=True, nogil=True, error_model="numpy")
def _hypergeometric_hrua(
    bitgen: Any, good: Any, bad: Any, sample: Any, p: float, q: float, table: NDArray
) -> Any:
    """Stadlober's ratio-of-uniforms sampler (HRUA; thesis 1989, algorithm on p. 82) of the
    hypergeometric law, in numpy's formulation: the sample or its complement, whichever is
    smaller, of the rarer kind of item; ``p`` and ``q`` the rarer and the commoner kind's
    shares of the population (the caller's, the same divisions)."""
    pop = good + bad
    n = min(sample, pop - sample)
    rare = min(good, bad)
    common = max(good, bad)
    a = n * p + 0.5
    c = np.sqrt(float(pop - n) * n * p * q / (pop - 1) + 0.5)
    h = _HRUA_D1 * c + _HRUA_D2
    m = np.int64(np.floor(float(n + 1) * (rare + 1) / (pop + 2)))
    g = (
        _log_factorial(m, table)
        + _log_factorial(rare - m, table)
        + _log_factorial(n - m, table)
        + _log_factorial(common - n + m, table)
    )
    b = min(float(min(n, rare) + 1), np.floor(a + 16 * c))
    k = np.int64(0)
    while True:
        u = next_double(bitgen)
        v = next_double(bitgen)
        x = a + h * (v - 0.5) / u  # u = 0: ±inf, as in C (numba's numpy error model)
        if not (x >= 0.0 and x < b):  # numpy's x < 0 or x >= b, and NaN (u = 0, v = 1/2)
            continue
        k = np.int64(np.floor(x))
        t = g - (
            _log_factorial(k, table)
            + _log_factorial(rare - k, table)
            + _log_factorial(n - k, table)
            + _log_factorial(common - n + k, table)
        )
        if u * (4.0 - u) - 3.0 <= t:  # quick acceptance
            break
        if u * (u - t) >= 1:  # quick rejection
            continue
        if 2.0 * np.log(u) <= t:
            break
    if good > bad:
        k = n - k
    if n < sample:
        k = good - k
    return k


@njit(cache=True, nogil=True, error_model="numpy")
def _pairwise_block(a: NDArray, lo: int, n: int) -> Any:
    """Σ a[lo : lo + n] for n ≤ 128 in numpy's order: in order below 8 terms, else in 8
    running sums (a stride of 8 apart) combined as a tree, then the last n mod 8 in order."""
    if n < 8:
        s = 0.0
        for i in range(lo, lo + n):
            s += a[i]
        return s
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    end = n - n % 8
    while i < end:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    s = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        s += a[lo + i]
        i += 1
    return s


@njit(cache=True, nogil=True, error_model="numpy")
def _pairwise_sum(a: NDArray, n: int) -> Any:
    """Σ a[:n] in numpy's order for a contiguous reduction (its pairwise summation): blocks
    of at most 128 terms (:func:`_pairwise_block`); a longer run is split in two, the first
    part a multiple of 8 terms, and the parts' sums added. The splits are walked with a stack
    rather than by recursion (numba's cache cannot reload a recursive function called from
    another)."""
    if n <= 128:
        return _pairwise_block(a, 0, n)
    depth = 64  # each split at least halves the run: fewer than 64 levels
    lo_at = np.empty(depth, dtype=np.int64)
    n_at = np.empty(depth, dtype=np.int64)
    step = np.zeros(depth, dtype=np.int64)  # 0: left part next, 1: right part, 2: add
    sums = np.empty(depth)
    top, held = 0, 0
    lo_at[0], n_at[0] = 0, n
    while top >= 0:
        lo, size = lo_at[top], n_at[top]
        if size <= 128:
            sums[held] = _pairwise_block(a, lo, size)
            held += 1
            top -= 1
            continue
        half = size // 2
        half -= half % 8
        if step[top] == 0:
            step[top] = 1
            top += 1
            lo_at[top], n_at[top], step[top] = lo, half, 0
        elif step[top] == 1:
            step[top] = 2
            top += 1
            lo_at[top], n_at[top], step[top] = lo + half, size - half, 0
        else:
            held -= 1
            sums[held - 1] = sums[held - 1] + sums[held]
            top -= 1
    return sums[0]


@njit(cache=True, nogil=True, error_model="numpy")
def group_errors(
    rng: Any,
    colors: NDArray,
    sizes: NDArray,
    expected: NDArray,
    root: bool,
    table: NDArray,
    out: NDArray,
) -> None:
    """The calibration error of ``out.shape[1]`` random groups of each size ``sizes[s]``, into
    ``out[s]``: each group's histogram over the M + 1 ``colors`` (rows per category, int64)
    drawn from the multivariate hypergeometric law exactly as numpy's
    ``rng.multivariate_hypergeometric(colors, sizes[s], size=out.shape[1])`` for s in order
    (its "marginals" method: the same draws from ``rng``'s bit generator, which ends in the
    same state), then the error = mean over the M levels of |o_j − e_j| (``root``: √ of the
    mean of the squares), o = cumsum(histogram[:M]) / size, e = ``expected``, each term and
    sum as numpy computes them (the sum in its pairwise order). ``table``: log(k!) for small k
    (:func:`fill_log_factorials`; numpy's values). M ≥ 1; every size ≤ the total of
    ``colors``, which is below 10^9.

    The marginals method draws the colors one after another, each a hypergeometric draw of
    the rows still to place among those of this color and the rest; when the sample is more
    than half the rows, the complement is drawn."""
    bitgen = rng.bit_generator
    ncol = colors.shape[0]
    m_levels = ncol - 1
    total = np.int64(0)
    for j in range(ncol):
        total += colors[j]
    # each color's shares of its population (this color and the ones after it)
    rare_share = np.empty(ncol)
    common_share = np.empty(ncol)
    rest = total
    for j in range(ncol):
        rest -= colors[j]
        pop = colors[j] + rest
        if pop > 0:
            rare_share[j] = float(min(colors[j], rest)) / pop
            common_share[j] = float(max(colors[j], rest)) / pop
    hist = np.empty(ncol, dtype=np.int64)
    terms = np.empty(m_levels)
    for s in range(sizes.shape[0]):
        nsample = sizes[s]
        complement = nsample > total // 2
        draw = total - nsample if complement else nsample
        for i in range(out.shape[1]):
            hist[:] = 0
            if total > 0 and nsample > 0:
                left = draw
                rest = total
                j = 0
                while left > 0 and j + 1 < ncol:
                    good = colors[j]
                    rest -= good
                    if left >= 10 and left <= good + rest - 10:
                        r = _hypergeometric_hrua(
                            bitgen, good, rest, left, rare_share[j], common_share[j], table
                        )
                    else:
                        r = _hypergeometric_by_draws(bitgen, good, rest, left)
                    hist[j] = r
                    left -= r
                    j += 1
                if left > 0:
                    hist[ncol - 1] = left
                if complement:
                    for j in range(ncol):
                        hist[j] = colors[j] - hist[j]
            cum = np.int64(0)
            for j in range(m_levels):
                cum += hist[j]
                d = cum / nsample - expected[j]
                terms[j] = d * d if root else abs(d)
            mean = (0.0 + _pairwise_sum(terms, m_levels)) / m_levels
            out[s, i] = np.sqrt(mean) if root else mean


# -- the elementary scores of the Murphy diagram -----------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _first_not_below(grid: NDArray, v: float) -> int:
    """numpy's ``searchsorted(grid, v, side="left")``: the first index whose value is not
    below ``v`` in numpy's order (NaN after every number), by bisection of the ascending
    ``grid``."""
    lo, hi = 0, grid.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        g = grid[mid]
        if g < v or (v != v and g == g):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def _guess(v: float, g0: float, scale: float, k: int) -> int:
    """The index of ``v`` among ``k`` thresholds evenly spaced from ``g0``, ``scale`` per
    unit (clipped to [0, k]; only a starting point of the search)."""
    t = (v - g0) * scale
    if not t > 0.0:
        return 0
    if t >= k:
        return k
    i = int(t)  # t in (0, k): its ceiling
    return i + 1 if i < t else i


@njit(cache=True, nogil=True, inline="always")
def _first_not_below_near(grid: NDArray, v: float, guess: int) -> int:
    """:func:`_first_not_below` of a number ``v`` (not NaN), searched from the index
    ``guess`` outwards (doubling steps, then bisection of the bracket found): the same index
    whatever the guess, in a few comparisons when the guess is close (a grid of evenly spaced
    thresholds, where it is v's position by arithmetic)."""
    k: int = grid.shape[0]
    i = min(max(guess, 0), k)
    if i < k and grid[i] < v:  # the answer is after i
        lo = i + 1
        step = 1
        j = lo
        while j < k and grid[j] < v:
            lo = j + 1
            step <<= 1
            j = lo + step - 1
        hi = min(j, k)
    else:  # the answer is i or before it
        hi = i
        step = 1
        j = hi - 1
        while j >= 0 and not grid[j] < v:
            hi = j
            step <<= 1
            j = hi - step
        lo = max(j + 1, 0)
    while lo < hi:  # grid[lo - 1] < v (or lo = 0); grid[hi] >= v (or hi = k)
        mid = (lo + hi) >> 1
        if grid[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def elementary_score_bins(
    x: NDArray,
    y: NDArray,
    w: NDArray,
    grid: NDArray,
    level: float,
    expectile: bool,
    out: NDArray,
) -> None:
    """The six per-threshold sums of :func:`uqcore.score_curves.elementary_scores` over the
    rows (``w``: their weights, or an empty array for unit weights), into the zeroed
    ``out`` (6 × (K + 1)): rows live from and to each threshold, the rates (c, or the slope
    ±c of an expectile) entering and leaving, and the values entering and leaving (an
    expectile). Each row is binned as numpy's ``searchsorted(grid, ..., side="left")`` bins
    it and each sum accumulates the rows in order, as ``numpy.bincount`` does: the same sums
    to the last bit, in one pass without the per-row temporaries."""
    k = grid.shape[0]
    weighted = w.shape[0] == x.shape[0]
    # where a value falls if the thresholds are evenly spaced: the searches start there
    g0 = grid[0] if k else 0.0
    span = grid[k - 1] - g0 if k else 0.0
    scale = (k - 1) / span if k > 1 and span > 0.0 and span < np.inf else 0.0
    for i in range(x.shape[0]):
        xi, yi = x[i], y[i]
        below = yi < xi
        low, high = min(xi, yi), max(xi, yi)
        if low != low or high != high:  # NaN: no guess (numpy's order puts it last)
            first = _first_not_below(grid, low)
            stop = _first_not_below(grid, high)
        else:
            first = _first_not_below_near(grid, low, _guess(low, g0, scale, k))
            stop = _first_not_below_near(grid, high, _guess(high, g0, scale, k))
        wi = w[i] if weighted else 1.0
        c = wi * (1.0 - level) if below else wi * level
        if first >= stop:
            c = 0.0
        live = 1.0 if c != 0.0 else 0.0
        out[0, first] += live
        out[1, stop] += live
        if not expectile:
            out[2, first] += c
            out[3, stop] += c
            continue
        out[4, first] += c * abs(grid[min(first, k - 1)] - yi)
        out[5, stop] += c * abs(grid[max(stop - 1, 0)] - yi)
        slope = c if below else -c
        out[2, first] += slope
        out[3, stop] += slope


# -- the climatological references of the skill scores, a block of resamples at a time --------
@njit(cache=True, nogil=True)
def climatology_sums(
    cum: NDArray,
    total: NDArray,
    taus: NDArray,
    below: NDArray,
    above: NDArray,
    gaps: NDArray,
    crps: bool,
    out: NDArray,
) -> None:
    """out[r] = Σ_j gaps_j φ(F_j, G_j) for each resample r (a row of ``cum``, its cumulative
    weights along the targets' order; j < len(gaps)), F_j = cum[r, j] / total[r] and
    G_j = (total[r] − cum[r, j]) / total[r] as numpy computes them: φ = F·G (``crps``), else
    G·below[k] + F·above[k] with k = ``searchsorted(taus, F, side="left")`` (the pinball sums
    of :mod:`uqcore.stability.blocks.skill`). F grows along the order, so k is a pointer that
    moves forward (and back, should F not grow), in one pass without the b × N temporaries of
    the numpy path; its sum runs in row order (numpy's matrix product sums in its own order:
    the two agree to rounding)."""
    m = gaps.shape[0]
    nk = taus.shape[0]
    for r in range(cum.shape[0]):
        tot = total[r]
        acc = 0.0
        k = 0
        for j in range(m):
            c = cum[r, j]
            f = c / tot
            g = (tot - c) / tot
            if crps:
                acc += gaps[j] * (f * g)
                continue
            while k < nk and taus[k] < f:
                k += 1
            while k > 0 and not taus[k - 1] < f:
                k -= 1
            acc += gaps[j] * (g * below[k] + f * above[k])
        out[r] = acc


# -- the CORP decomposition of the mean, a block of resamples at a time ------------------------
@njit(cache=True, nogil=True)
def corp_mean_sums(
    xs: NDArray,
    ys: NDArray,
    w: NDArray,
    out: NDArray,
    block_w: NDArray,
    block_s: NDArray,
    block_end: NDArray,
) -> None:
    """For each resample r (a row of ``w``: its weights along the forecasts' ascending order;
    ``xs``, ``ys``: the forecasts and the outcomes in that order) the sums of the CORP
    decomposition of the mean (:func:`uqcore._isotonic.corp`), into out[r, :4]: the total
    weight W, Σ w (x − y)², Σ w (x̂ − y)² and Σ w (y − ȳ)² with ȳ = Σ w y / W.

    x̂ is the isotonic regression of y on x: tied forecasts one point of their summed weight and
    weighted mean, pooled adjacent violators (a stack of blocks, each its weight, its weighted
    sum and the row where it ends; a block whose mean is not below the next one's is merged
    with it, the means compared by cross-multiplication); the rows of zero weight join a
    block without changing it, as if left out. ``block_*``: workspace of N entries. Three
    passes along the order, no gather; the sums run in row order (the per-resample path's
    fit, scipy's PAVA, and its dot products round differently: the two agree to rounding)."""
    n = xs.shape[0]
    for r in range(w.shape[0]):
        # the blocks below the current one are on the stack; the current one (cw, cs) is
        # kept apart. A group of zero weight (0, 0) merges into it (0 >= 0): no branch on the
        # weights, and a block's sums never change by it.
        top = 0
        cw = 0.0
        cs = 0.0
        i = 0
        while i < n:
            gx = xs[i]
            gw = 0.0
            gs = 0.0
            j = i
            while j < n and xs[j] == gx:
                wj = float(w[r, j])
                gw += wj
                gs += wj * ys[j]
                j += 1
            # the current block's mean not below the group's (weights >= 0: no division)
            if cs * gw >= gs * cw:
                gw += cw
                gs += cs
                while top > 0 and block_s[top - 1] * gw >= gs * block_w[top - 1]:
                    top -= 1
                    gw += block_w[top]
                    gs += block_s[top]
            else:
                block_w[top] = cw
                block_s[top] = cs
                top += 1
            cw = gw
            cs = gs
            block_end[top] = j
            i = j
        block_w[top] = cw
        block_s[top] = cs
        top += 1
        total = 0.0
        wy = 0.0
        s_x = 0.0
        s_hat = 0.0
        i = 0
        for k in range(top):
            # (a block of zero weight holds rows of zero weight only: all of them)
            fit = block_s[k] / block_w[k] if block_w[k] > 0.0 else 0.0
            end = block_end[k]
            while i < end:  # a row of zero weight adds exact zeros (finite inputs)
                wi = float(w[r, i])
                yi = ys[i]
                total += wi
                wy += wi * yi
                d = xs[i] - yi
                s_x += wi * (d * d)
                d = fit - yi
                s_hat += wi * (d * d)
                i += 1
        s_ref = 0.0
        if total > 0.0:
            mean = wy / total
            for i in range(n):
                d = ys[i] - mean
                s_ref += float(w[r, i]) * (d * d)
        out[r, 0] = total
        out[r, 1] = s_x
        out[r, 2] = s_hat
        out[r, 3] = s_ref


# -- size-stratified coverage, a block of resamples at a time ---------------------------------
@njit(cache=True, nogil=True)
def strata_worst_coverage(
    cum: NDArray,
    covered: NDArray,
    last: NDArray,
    bins: int,
    out: NDArray,
    weight: NDArray,
    hits: NDArray,
) -> None:
    """The smallest coverage over the strata of each resample r (a row of ``cum``, its
    cumulative weights along the widths' stable order; ``covered``: 1.0 where the row in that
    order is covered, else 0.0; ``last``: the last position of each position's tie): a row's
    stratum is k = ⌈bins · F − 10⁻⁹⌉ − 1 clipped to [0, bins − 1], F = cum[r, last] / W
    computed as numpy computes it, and a stratum's weight and covered weight are the sums of
    the rows' weights cum[r, j] − cum[r, j − 1] (exact integers for counts). Strata without
    weight are left out. ``weight``, ``hits``: workspace of ``bins`` entries."""
    n = cum.shape[1]
    for r in range(cum.shape[0]):
        for k in range(bins):
            weight[k] = 0.0
            hits[k] = 0.0
        total = float(cum[r, n - 1])
        if not total > 0.0:  # no weight: no stratum
            out[r] = np.nan
            continue
        prev = 0.0
        for j in range(n):
            now = float(cum[r, j])
            wj = now - prev
            prev = now
            f = float(cum[r, last[j]]) / total
            f *= bins
            f -= 1e-9
            k = int(np.ceil(f)) - 1
            if k < 0:
                k = 0
            elif k > bins - 1:
                k = bins - 1
            weight[k] += wj
            hits[k] += wj * covered[j]
        worst = np.inf
        for k in range(bins):
            if weight[k] > 0.0:
                c = hits[k] / weight[k]
                if c < worst:
                    worst = c
        out[r] = worst


# -- the box moments of the HSIC kernel sum ----------------------------------------------------
@njit(cache=True, nogil=True)
def box_moments(t: NDArray, a: NDArray, t0: float, width: float, terms: int) -> NDArray:
    """P[B, m] = Σ_{l∈B} a_l (t_l − c_B)^m for m < ``terms``, the boxes B of ``width`` from
    ``t0`` (= min t) and c_B their centres, as :func:`uqcore.regression.intervals.box_moments`
    computes them with numpy: each row's offset σ by the same operations, its terms a·σ^m by
    repeated products, and each sum over the rows in order (as ``numpy.bincount``), so the
    same values to the last bit, in one pass without the m temporaries."""
    n = t.shape[0]
    inv = 1.0 / width
    top = np.int64(0)
    for i in range(n):
        b = np.int64((t[i] - t0) * inv)
        if b > top:
            top = b
    out = np.zeros((top + 1 if n else 1, terms))
    for i in range(n):
        s = (t[i] - t0) * inv
        b = np.int64(s)
        s -= b
        s -= 0.5
        s *= width
        term = a[i]
        for m in range(terms):
            out[b, m] += term
            term *= s
    return out


# -- HSIC of width and coverage, a block of resamples -----------------------------------------
@njit(cache=True, nogil=True)
def kept_ends(w: NDArray, order: NDArray, out: NDArray) -> None:
    """Per resample r (row of the b × N weights ``w``): ``out[r]`` = the first and the last
    position j of ``order`` whose row has positive weight, w[r, order[j]] > 0 (−1, −1 where
    none has). A walk from each end: about 1.6 steps each for a bootstrap's counts."""
    b, n = w.shape
    for r in range(b):
        first = -1
        for j in range(n):
            if w[r, order[j]] > 0:
                first = j
                break
        last = -1
        if first >= 0:
            for j in range(n - 1, first - 1, -1):
                if w[r, order[j]] > 0:
                    last = j
                    break
        out[r, 0] = first
        out[r, 1] = last


@njit(cache=True, nogil=True)
def weighted_spread(width: NDArray, w: NDArray, top: float, total: float) -> float:
    """√(Σ w (v − v̄)² / Σ w) of v = ``width`` / ``top``, v̄ = Σ w v / ``total`` over the rows
    of positive weight ``w`` (one resample; ``total`` = Σ w): the weighted standard deviation
    as :func:`uqcore.regression.intervals.hsic_width_coverage` computes it, in two passes (the
    sums two-level; finite widths, ``top`` > 0)."""
    n = width.shape[0]
    last = _SUM_BLOCK - 1
    acc = 0.0
    part = 0.0
    # a row of weight 0 adds 0 · (a finite value) = 0: no branch on the weight
    for i in range(n):
        part += float(w[i]) * (width[i] / top)
        if (i & last) == last:
            acc += part
            part = 0.0
    mean = (acc + part) / total
    acc = 0.0
    part = 0.0
    for i in range(n):
        d = width[i] / top - mean
        part += float(w[i]) * (d * d)
        if (i & last) == last:
            acc += part
            part = 0.0
    return float(np.sqrt((acc + part) / total))


@njit(cache=True, nogil=True)
def weighted_box_moments(
    width: NDArray,
    covered: NDArray,
    w: NDArray,
    unit: float,
    scale: float,
    centre: float,
    w_top: float,
    lo: float,
    hi: float,
    box: float,
    terms: int,
) -> NDArray:
    """:func:`box_moments` of t = (``width`` / ``unit``) / ``scale`` and
    a = (``covered`` − ``centre``) · (w / ``w_top``) over the rows of positive weight ``w`` (one
    resample), in row order, as :func:`uqcore.regression.intervals.hsic_width_coverage` makes
    t and a from the rows it keeps: the same operations, so the same moments to the last bit,
    without the N-long t and a. ``lo``, ``hi``: the least and largest width of those rows
    (the boxes start at the least t; division by positive numbers keeps the order)."""
    inv = 1.0 / box
    t0 = lo / unit / scale
    count = np.int64((hi / unit / scale - t0) * inv) + 1
    out = np.zeros((count, terms))
    n = width.shape[0]
    for i in range(n):
        x = float(w[i])
        if x > 0.0:
            s = (width[i] / unit / scale - t0) * inv
            b = np.int64(s)
            s -= b
            s -= 0.5
            s *= box
            term = (covered[i] - centre) * (x / w_top)
            for m in range(terms):
                out[b, m] += term
                term *= s
    return out


# -- a bootstrap resample's counts --------------------------------------------------------------
@njit(cache=True, nogil=True)
def chunk_counts(
    halves: NDArray, shift: int, totals: NDArray, chunk: int, out: NDArray, top: float
) -> bool:
    """The counts of :func:`uqcore.stability.weights.multinomial_counts`'s full chunks into
    ``out`` (its first len(totals)·``chunk`` entries, zeroed first): chunk j bins the next
    ``totals[j]`` of ``halves`` >> ``shift`` among its rows, one increment per draw (the same
    counts as a ``bincount`` per chunk, without its int64 array and the copy into ``out``).
    False, with ``out`` partly filled, when a count would exceed ``top`` (the largest value
    ``out``'s type holds exactly)."""
    full = totals.shape[0]
    for i in range(full * chunk):
        out[i] = 0
    pos = 0
    for j in range(full):
        base = j * chunk
        for _ in range(totals[j]):
            k = base + (np.int64(halves[pos]) >> shift)
            pos += 1
            if out[k] >= top:
                return False
            out[k] += 1
    return True
