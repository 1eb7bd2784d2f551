"""Compiled kernels (numba) for the sequential algorithms that no numpy expression runs in
O(N log N) or in one pass: the isotonic α-quantile fit of CORP, a weighted lower quantile,
the fit's three pinball sums, and the three parts of the weighted interval score.

Imported only through :func:`uqcore._isotonic.kernels`, which compiles them on first use (or
loads them from numba's cache) and falls back to the numpy algorithms when numba is missing or
cannot compile; both paths are tested against the same brute-force references.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["lower_quantile", "pinball_sums", "quantile_isotonic", "wis_rows"]

NDArray = np.ndarray[Any, Any]


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
